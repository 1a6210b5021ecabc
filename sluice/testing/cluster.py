"""``BrokerCluster``: three (or more) real Sluice broker processes sharing one ZooKeeper chroot.

Each broker is a :class:`~sluice.testing.broker.BrokerProcess` in cluster mode (``broker.id``
and ``zookeeper.connect`` set), with timeouts short enough that a ``kill -9`` is noticed in
seconds: the ZooKeeper session (``zookeeper.session.timeout.ms``) decides when the controller
sees a killed broker gone, ``replica.lag.time.max.ms`` when a leader drops a silent follower
from the ISR.

What callers see of the cluster they see the way clients do: Metadata answers through
confluent-kafka's ``AdminClient.list_topics()``, polled until a condition holds (never fixed
sleeps). Metadata is asked of one running broker at a time (each broker answers from its own
ZooKeeper view), so a dead broker's stale view is never taken for the cluster's. While brokers
change state a Metadata request may fail: :func:`wait_for_metadata` counts that as "not yet".

A secured cluster: ``protocol`` names each broker's one listener's security protocol (it is
also the inter-broker one), ``probe_tls`` the TLS context of the readiness probe,
``client_config`` the librdkafka security settings of the admin clients (and of any client a
test makes: :attr:`BrokerCluster.client_config`), and ``broker_overrides`` settings for one
broker only (a wrong inter-broker password, say).

Not thread-safe: one thread drives the cluster (the admin clients are cached per broker).
"""

from __future__ import annotations

import itertools
import ssl
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ClusterMetadata,
    NewTopic,
    PartitionMetadata,
)

from sluice.testing.broker import BrokerProcess
from sluice.testing.net import wait_until

T = TypeVar("T")

# Short enough for fast failover, long enough that a busy 2-core box does not expire sessions.
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.num.partitions": "3",
    "default.replication.factor": "3",
    # A broker whose ZooKeeper is gone gives up its controlled shutdown after 3 x 1 s, well
    # inside BrokerProcess's stop timeout (Kafka's default backoff, 5 s, would not be).
    "controlled.shutdown.retry.backoff.ms": "1000",
}
# What a CreateTopics may meet while the cluster recovers (librdkafka does not mark them).
RETRIABLE_ADMIN_ERRORS = (KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT)
# What a Metadata request may raise while a broker is between states.
METADATA_ERRORS = (KafkaException, OSError)
# Client settings for a cluster whose brokers come and go: librdkafka logs every refused
# connection to a dead broker (the callers expect them), and reconnects quickly.
QUIET = {"log_level": 0, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}


def wait_for_metadata(
    predicate: Callable[[], T | None], timeout: float, message: str, interval: float = 0.1
) -> T:
    """:func:`~sluice.testing.net.wait_until`, with :data:`METADATA_ERRORS` from
    ``predicate`` counted as "not yet" (a broker may be between states)."""
    return wait_until(predicate, timeout, message, interval=interval, ignore=METADATA_ERRORS)


class BrokerCluster:
    """Broker processes ``0..n-1`` on free ports; see the module docstring."""

    def __init__(
        self,
        base_dir: Path,
        zk_connect: str,
        size: int = 3,
        overrides: Mapping[str, str] | None = None,
        *,
        protocol: str = "PLAINTEXT",
        probe_tls: ssl.SSLContext | None = None,
        client_config: Mapping[str, Any] | None = None,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        self.zk_connect = zk_connect
        settings = {**CLUSTER_OVERRIDES, **(overrides or {})}
        only = broker_overrides or {}
        #: what a client of this cluster needs besides ``bootstrap.servers`` (librdkafka keys)
        self.client_config: dict[str, Any] = dict(client_config or {})
        self.brokers = {
            i: BrokerProcess(
                Path(base_dir) / f"broker-{i}",
                {**settings, **only.get(i, {})},
                broker_id=i,
                zookeeper_connect=zk_connect,
                protocol=protocol,
                probe_tls=probe_tls,
            )
            for i in range(size)
        }
        self._admins: dict[int, AdminClient] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def running(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> BrokerCluster:
        """Start every broker, then wait until all are registered under one controller; a
        failed start stops the brokers already started."""
        try:
            for b in self.brokers.values():
                b.start()
            self.wait_registered(set(self.brokers), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        """Start a stopped or killed broker again (same port, same log dir)."""
        self.brokers[broker_id].start()

    def stop(self) -> None:
        """SIGTERM every broker (each waited for; SIGKILL after its stop timeout)."""
        for b in self.brokers.values():
            b.stop()

    def __enter__(self) -> BrokerCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def output_tails(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- broker {i}:\n{b.output_tail(lines)}" for i, b in self.brokers.items()
        )

    # -- metadata, as clients see it -------------------------------------------------------

    def admin(self, broker_id: int | None = None) -> AdminClient:
        """An admin client bootstrapped from one broker (the first running one by default)."""
        if broker_id is None:
            broker_id = self.running()[0]
        if broker_id not in self._admins:
            self._admins[broker_id] = AdminClient(
                {
                    "bootstrap.servers": self.brokers[broker_id].bootstrap,
                    **QUIET,
                    **self.client_config,
                }
            )
        return self._admins[broker_id]

    def metadata(self, broker_id: int | None = None, topic: str | None = None) -> ClusterMetadata:
        return self.admin(broker_id).list_topics(topic, timeout=5)

    def views(self, topic: str | None = None) -> Iterator[tuple[int, ClusterMetadata]]:
        """Every running broker's Metadata answer."""
        for i in self.running():
            yield i, self.metadata(i, topic)

    def partition(self, topic: str, partition: int, broker_id: int | None = None) -> Any:
        md = self.metadata(broker_id, topic)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        found: PartitionMetadata | None = t.partitions.get(partition)
        return found

    def wait_registered(self, expected: set[int], timeout: float = 30.0) -> None:
        """Every running broker lists exactly ``expected`` and names one live controller."""

        def settled() -> bool:
            controllers = set()
            for _, md in self.views():
                if set(md.brokers) != expected:
                    return False
                controllers.add(md.controller_id)
            return len(controllers) == 1 and controllers.pop() in expected

        wait_for_metadata(
            settled, timeout, f"brokers {sorted(expected)} registered, one controller"
        )

    def controller_id(self) -> int:
        return self.metadata().controller_id

    def wait_partition(
        self,
        topic: str,
        partition: int,
        predicate: Callable[[Any], bool],
        timeout: float,
        message: str,
    ) -> Any:
        """Poll until every running broker's Metadata shows the partition satisfying
        ``predicate``; returns it (as the first running broker sees it)."""

        def check() -> Any:
            seen = None
            for i in self.running():
                p = self.partition(topic, partition, i)
                if p is None or not predicate(p):
                    return None
                seen = seen or p
            return seen

        return wait_for_metadata(check, timeout, f"{topic}-{partition}: {message}")

    def wait_leader(
        self, topic: str, partition: int, *, not_in: Collection[int] = (), timeout: float = 30.0
    ) -> Any:
        """The partition once it has a live leader outside ``not_in``."""
        live = set(self.running())
        return self.wait_partition(
            topic,
            partition,
            lambda p: p.leader in live and p.leader not in not_in,
            timeout,
            f"a leader in {sorted(live - set(not_in))}",
        )

    def wait_isr(self, topic: str, partition: int, isr: set[int], timeout: float = 30.0) -> Any:
        return self.wait_partition(
            topic, partition, lambda p: set(p.isrs) == isr, timeout, f"ISR {sorted(isr)}"
        )

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create the topic (retrying retriable errors, as a tool would: right after a
        ZooKeeper restart a broker may still be re-establishing its session) and wait until all
        its partitions have a leader and a full ISR on every running broker."""
        deadline = time.monotonic() + timeout
        for attempt in itertools.count():
            future = self.admin().create_topics(
                [NewTopic(name, partitions, replication_factor, config=dict(config or {}))],
                operation_timeout=10,
            )[name]
            try:
                future.result(timeout=15)
                break
            except KafkaException as exc:
                error = exc.args[0]
                if attempt > 0 and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break  # an earlier attempt got through after all
                retriable = error.retriable() or error.code() in RETRIABLE_ADMIN_ERRORS
                if not retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for p in range(partitions):
            self.wait_partition(
                name,
                p,
                lambda pm: pm.leader >= 0 and len(pm.isrs) == replication_factor,
                timeout,
                "leader and full ISR",
            )
