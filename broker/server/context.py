"""``BrokerContext``: what a request handler may use of the broker serving it — and nothing else.

Handlers (``sluice.broker.server.handlers``) are coroutines ``handle(ctx, request)`` that see
the broker only through this interface; ``sluice.broker.server.broker.Broker`` implements it
and imports the handlers, never the other way round. The same context serves standalone and
cluster mode: the mode is chosen once, by the cluster view the broker builds (a cluster of one,
or ZooKeeper), so handlers have a single path.

What it offers:

* ``config``: the broker's settings (defaults for auto-created topics, offsets topic size).
* ``cluster``: the :class:`~sluice.broker.cluster.cluster_view.ClusterView` — topics, live
  brokers, leaders and ISRs, the controller, producer ids.
* ``replicas``: the :class:`~sluice.broker.replication.replica_manager.ReplicaManager` — the
  partitions this broker leads (``leader_or_error``), appends, followers' fetch positions.
* ``log_manager``: the :class:`~sluice.broker.log.log_manager.LogManager` — the log dirs and
  the moves between them (DescribeLogDirs, AlterReplicaLogDirs).
* ``offsets``, ``groups``: committed offsets and the group coordinator; ``consumer_groups``
  the KIP-848 consumer groups'.
* ``purgatory``, ``metrics``: where fetches wait for appends; the Prometheus metrics.
* ``handlers``: the API keys served (what ApiVersions advertises).
* ``topics``: topic administration with the broker's own limits
  (:class:`~sluice.broker.server.topic_admin.TopicAdmin`).
* ``dynamic_config``: the broker configs altered at run time
  (:class:`~sluice.broker.server.dynamic_broker_config.DynamicBrokerConfig`); ``config`` has
  them applied. ``alter`` may block: call it through ``off_loop``.
* ``off_loop``: run a metadata call that may block on ZooKeeper without stalling the loop.

* ``authorizer``: the ACL authorizer, or None when ``authorizer.class.name`` is unset
  (everything allowed); handlers ask it through ``sluice.broker.server.authorization``.
* ``scram_credentials``: the SCRAM credential store (ZooKeeper's ``/config/users`` in cluster
  mode, ``sluice-users.json`` in the first log dir standalone).
* ``share``: share groups (KIP-932): their members, in-flight records and durable state
  (:class:`~sluice.broker.share.share_coordinator.ShareCoordinator`).
* ``transactions``: the broker's transaction coordinator, built on first use
  (:class:`~sluice.broker.server.lazy_transaction_coordinator.LazyTransactionCoordinator`).

Every service is built once, by the broker; handlers keep no state of their own between
requests (no module-level registries).

``CURRENT_PEER`` holds the client address of the connection a handler is serving,
``CURRENT_PRINCIPAL`` its principal (what the authorizer checks), ``CURRENT_LISTENER`` the
listener it came in on (``client_endpoint`` picks a broker's endpoint of that listener).

Every member is used on the broker's event loop.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.zk_data import BrokerInfo
from sluice.broker.config import BrokerConfig
from sluice.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.offset_store import OffsetStore
from sluice.broker.log.log_manager import LogManager
from sluice.broker.protocol import EncodedFetchResponse
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.security.authorizer import AclAuthorizer
from sluice.broker.security.scram_store import ScramStore
from sluice.broker.server.dynamic_broker_config import DynamicBrokerConfig
from sluice.broker.server.lazy_transaction_coordinator import LazyTransactionCoordinator
from sluice.broker.server.metrics import BrokerMetrics
from sluice.broker.server.purgatory import FetchPurgatory
from sluice.broker.server.topic_admin import TopicAdmin
from sluice.broker.share.share_coordinator import ShareCoordinator

T = TypeVar("T")

#: What a handler returns: encoded bytes, a zero-copy fetch response, or None (no response:
#: Produce with acks=0).
Response = bytes | EncodedFetchResponse | None

# The client address of the connection a handler is serving (each connection runs in its
# own task, so its own context); DescribeGroups reports it as the member's host.
CURRENT_PEER: contextvars.ContextVar[str] = contextvars.ContextVar("CURRENT_PEER", default="")

# The name of the listener the connection came in on: Metadata, FindCoordinator and
# DescribeCluster answer with the brokers' endpoints of that listener (Kafka's per-listener
# metadata), so a client on a TLS listener is never sent to a plaintext port.
CURRENT_LISTENER: contextvars.ContextVar[str] = contextvars.ContextVar(
    "CURRENT_LISTENER", default=""
)


def client_endpoint(broker: BrokerInfo) -> tuple[str, int] | None:
    """Where the client being served reaches ``broker``: its endpoint of the listener the
    client connected to; None if that broker has no such listener (Kafka leaves it out)."""
    listener = CURRENT_LISTENER.get()
    return broker.endpoint(listener) if listener else (broker.host, broker.port)


#: The principal of the connection a handler is serving: ``User:ANONYMOUS``, a TLS client
#: certificate's ``User:<subject>``, or ``User:<name>`` after SASL (what the authorizer checks).
CURRENT_PRINCIPAL: contextvars.ContextVar[str] = contextvars.ContextVar(
    "CURRENT_PRINCIPAL", default="User:ANONYMOUS"
)


class BrokerContext(Protocol):
    """The broker as its request handlers see it. See the module docstring."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def cluster(self) -> ClusterView: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def offsets(self) -> OffsetStore: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def consumer_groups(self) -> ConsumerGroupCoordinator: ...

    @property
    def purgatory(self) -> FetchPurgatory: ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    @property
    def handlers(self) -> Mapping[int, Handler]: ...

    @property
    def authorizer(self) -> AclAuthorizer | None: ...

    @property
    def scram_credentials(self) -> ScramStore: ...

    @property
    def transactions(self) -> LazyTransactionCoordinator: ...

    @property
    def share(self) -> ShareCoordinator: ...

    @property
    def dynamic_config(self) -> DynamicBrokerConfig: ...

    @property
    def topics(self) -> TopicAdmin:
        """Topic creation and deletion with the broker's limits. ``create`` and ``delete``
        may block on ZooKeeper: call them through :meth:`off_loop`."""
        ...

    async def off_loop(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call(*args, **kwargs)`` where it cannot stall the event loop; a ZooKeeper failure
        comes out as ``MetadataUnavailableError``."""
        ...


Handler = Callable[[BrokerContext, Any], Awaitable[Response]]
