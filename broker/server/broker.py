"""``Broker``: one broker's components and lifecycle; the context every request handler gets.

Components, built once from the config. The only place where standalone and cluster mode
differ is the cluster view chosen here, and the ZooKeeper client cluster mode needs:

* ``cluster``: a :class:`~sluice.broker.cluster.cluster_view.ClusterView` — standalone a
  :class:`~sluice.broker.cluster.single_broker.SingleBrokerCluster` (topics in the first log
  dir; this broker the only replica and leader of everything), in cluster mode a
  :class:`~sluice.broker.cluster.cluster_metadata.ClusterMetadata` over ZooKeeper;
* ``log_manager``: the partitions' logs in the log dirs;
* ``replicas``: the :class:`~sluice.broker.replication.replica_manager.ReplicaManager`, which
  makes each local replica leader or follower as the cluster view says, creates and deletes
  the logs, and takes every append (a single broker's appends commit at once);
* ``offsets`` (committed offsets in ``__consumer_offsets``, appended through the replica
  manager, loaded for the partitions this broker leads), ``groups``, ``purgatory``, ``metrics``.

The request handlers (``sluice.broker.server.handlers``) see it only as a
:class:`~sluice.broker.server.context.BrokerContext`; this module imports them, they never
import it.

Startup: load (and if need be recover) the logs; standalone, make sure the offsets topic
exists; start the log manager's background threads; bind the listener; join the cluster (a
no-op for a single broker; in cluster mode register in ZooKeeper) and start the replica
manager, which creates the log of every partition this broker holds and takes the roles the
cluster view gives; then serve.

Shutdown (SIGTERM or SIGINT; ``shutdown_guard``) finishes whatever ZooKeeper, the peers or the
clients do — every step that may wait is bounded and logs one line if it gives up: stop
accepting and close the connections (``CONNECTIONS_CLOSE_TIMEOUT``); stop the replicas
(``REPLICAS_STOP_TIMEOUT``); leave the cluster, the controlled part (``controlled_shutdown``:
``controlled.shutdown.max.retries`` attempts of ``controlled.shutdown.retry.backoff.ms``);
close the ZooKeeper session (``ZOOKEEPER_STOP_TIMEOUT``); then, whatever happened before,
flush and close every log and write the checkpoints and the clean-shutdown marker. The whole
is bounded by ``shutdown_bound_s`` (the controlled part's budget + ``SHUTDOWN_GRACE``); a
second signal ends it at once. Exit statuses are listed in ``shutdown_guard``.

Connections: ``connection_limits`` admits each (``max.connections``,
``max.connections.per.ip[.overrides]``) and an idle check closes those that waited for bytes
longer than ``connections.max.idle.ms``; responses are written by ``response_writer``
(zero-copy fetches).

Listeners (``listeners``): one server socket each, with its security protocol. ``SSL`` and
``SASL_SSL`` listeners wrap their connections in TLS (``sluice.broker.security.tls``; the
handshake is done before the first request is read, and a client certificate's subject is
the principal); ``SASL_PLAINTEXT`` and ``SASL_SSL`` connections get a
:class:`~sluice.broker.server.handlers.security.SaslSession` and serve nothing but
ApiVersions, SaslHandshake and SaslAuthenticate until it has authenticated — any other
request closes the connection, as in Kafka — with frames capped at
``sasl.server.max.receive.size`` meanwhile. SCRAM credentials live in ``scram_credentials``:
ZooKeeper's ``/config/users`` in cluster mode, ``sluice-users.json`` in the first log dir
standalone.

A listener that cannot be bound stops the start with a :class:`ListenerBindError` naming the
key (``listeners``, ``metrics.listener``) and the address.

Everything here runs on the broker's asyncio loop except the log manager's background threads,
the fsyncs and the ZooKeeper calls, which run in the loop's default executor — and the
shutdown's blocking steps, which run on daemon threads of their own (``controlled_shutdown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry
from prometheus_client import start_http_server

from sluice.broker.cluster.cluster_metadata import ClusterMetadata
from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.cluster.topic_config import log_settings
from sluice.broker.cluster.topic_metadata import (
    InvalidConfigError,
    InvalidPartitionsError,
    MetadataUnavailableError,
    TopicInfo,
)
from sluice.broker.config import BrokerConfig, ConfigError, Listener
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import OffsetCommitFailedError, OffsetStore
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import LogManager
from sluice.broker.protocol import (
    NEED_DATA,
    ApiKey,
    FrameDecoder,
    RemoteProtocolError,
    UnsupportedVersion,
    decode_request,
    encode_unsupported_version,
)
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.broker_client import BrokerConnector
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.security.authorizer import AclAuthorizer
from sluice.broker.security.errors import CredentialFormatError
from sluice.broker.security.scram_store import FileScramStore, ScramStore, ZkScramStore
from sluice.broker.security.tls import ANONYMOUS, listener_server_context, peer_principal
from sluice.broker.server.authorization import (
    AclChangeWatcher,
    authorizer_wanted,
    cluster_denied,
    start_authorizer,
)
from sluice.broker.server.connection_limits import (
    ConnectionLimits,
    ConnectionSlot,
    UnresolvableOverrideError,
    resolve_overrides,
)
from sluice.broker.server.context import CURRENT_LISTENER, CURRENT_PEER, Handler, Response
from sluice.broker.server.controlled_shutdown import (
    ControlledShutdown,
    run_on_thread,
    start_thread,
)
from sluice.broker.server.file_descriptors import check_file_descriptors
from sluice.broker.server.handlers import HANDLERS
from sluice.broker.server.handlers.security import (
    CURRENT_PRINCIPAL,
    SASL_API_KEYS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    ListenerAuth,
    SaslSession,
    handle_sasl_without_sasl,
)
from sluice.broker.server.handlers.transactions import attach_coordinator, detach_coordinator
from sluice.broker.server.metrics import BrokerMetrics
from sluice.broker.server.purgatory import FetchPurgatory
from sluice.broker.server.response_writer import FdFile as FdFile  # its name before the split
from sluice.broker.server.response_writer import flush_pending, write_response
from sluice.broker.server.shutdown_guard import ShutdownGuard
from sluice.broker.transactions.transaction_log import TOPIC as TRANSACTION_STATE_TOPIC
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

# One int32 in a CreateTopics request must not make this broker try to create 2^31 - 1
# partitions (see file_descriptors for the check of what is left).
MAX_PARTITIONS_PER_TOPIC = 1000

_API_NAMES = {int(key): key.name.lower() for key in ApiKey}
_API_NAMES.update({SASL_HANDSHAKE: "sasl_handshake", SASL_AUTHENTICATE: "sasl_authenticate"})
_PRODUCE_KEY = int(ApiKey.PRODUCE).to_bytes(2, "big")

# Shutdown: each step that may wait on the network gets a bound of its own (seconds); the
# controlled part gets controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms;
# the whole, that plus SHUTDOWN_GRACE (ShutdownGuard ends the process when it runs out).
CONNECTIONS_CLOSE_TIMEOUT = 5.0
REPLICAS_STOP_TIMEOUT = 5.0
ZOOKEEPER_STOP_TIMEOUT = 5.0
CLUSTER_STOP_TIMEOUT = 5.0  # the cluster view's threads, after ZooKeeper is closed
SHUTDOWN_GRACE = 20.0
# kazoo's own reconnect backoff grows to an hour; a broker retries ZooKeeper at least every
# ZOOKEEPER_RETRY_MAX_DELAY seconds (so it reconnects soon after an outage, and kazoo's stop,
# which waits for the reconnect loop to notice it, returns soon).
ZOOKEEPER_RETRY_MAX_DELAY = 1.0


class ListenerBindError(OSError):
    """A listener's address cannot be bound; names the config key and the address."""


class _CloseConnection(Exception):
    """The connection must close after what was answered (a failed SASL exchange)."""


class Broker:
    """One broker; implements :class:`~sluice.broker.server.context.BrokerContext`. See the
    module docstring."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port = config.listener.port
        advertised_port = config.advertised.port or config.listener.port  # set again once bound
        self.zk: KazooClient | None = None
        self.cluster: ClusterView
        if config.standalone:
            self.cluster = SingleBrokerCluster(
                LocalMetadataStore(config.log_dirs[0], config.broker_id),
                config.broker_id,
                listener_host=config.advertised.host,
                listener_port=advertised_port,
            )
        else:
            # Cluster mode: topics, leaders and ISRs live in ZooKeeper (registered once the
            # listener is bound, so the advertised port is known).
            self.zk = KazooClient(
                hosts=config.zookeeper_connect,
                timeout=config.zookeeper_session_timeout_ms / 1000,
                connection_retry=KazooRetry(max_tries=-1, max_delay=ZOOKEEPER_RETRY_MAX_DELAY),
            )
            self.cluster = ClusterMetadata(
                self.zk,
                config.broker_id,
                listener_host=config.advertised.host,
                listener_port=advertised_port,
                inter_broker_listener=config.listener.name,
                default_replication_factor=config.default_replication_factor,
                num_partitions=config.num_partitions,
                unclean_leader_election=config.unclean_leader_election,
                # Restarted right after a crash, the broker finds its previous session's
                # registration still there until that session expires: wait that long.
                registration_timeout=max(10.0, config.zookeeper_session_timeout_ms / 1000 + 5),
            )
        # In a cluster a produce may wait for followers (acks=-1); a single broker's never does.
        self._produce_may_wait = not config.standalone
        self.log_manager = LogManager(
            config.log_dirs,
            config.log,
            topic_config=self.topic_log_config,
            flush_check_ms=config.flush_scheduler_interval_ms,
            retention_check_ms=config.retention_check_interval_ms,
            checkpoint_ms=config.checkpoint_interval_ms,
            log_dir_retry_ms=config.log_dir_failure_retry_ms,
        )
        self.purgatory = FetchPurgatory()
        self.metrics = BrokerMetrics(self.log_manager.logs)
        self.replicas = ReplicaManager(
            config.broker_id,
            self.cluster,
            self._replica_log,
            self._delete_log,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            on_high_watermark=self.purgatory.notify,
            on_role_change=self._on_role_change,
            # Cluster mode: a log dir gone offline takes its replicas offline and the
            # controller moves their leadership away (Kafka's LogDirFailureHandler).
            dir_failures=self.log_manager.dir_failures,
            connector=BrokerConnector(config.inter_broker_security),
        )
        # Kafka's replica-manager and controller gauges (under-replicated partitions, ISR
        # shrinks/expands, offline partitions) read at scrape time.
        self.metrics.track(self.replicas, self.cluster, config.broker_id)
        # The offsets topic's own partition count where it exists (standalone: known now),
        # else the configured one.
        existing = self.cluster.get(OFFSETS_TOPIC)
        self.offsets = OffsetStore(
            existing.partitions if existing else config.offsets_topic_num_partitions,
            self._append_offsets,
        )
        self.groups = GroupCoordinator(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
        )
        # Security, per listener: a TLS context, the SASL mechanisms and PLAIN users. A bad
        # key raises a ValueError (TlsError, ConfigError) naming it.
        self._tls: dict[str, ssl.SSLContext] = {}
        self._sasl: dict[str, ListenerAuth] = {}
        for listener in config.listeners:
            if listener.uses_tls:
                self._tls[listener.name] = listener_server_context(
                    config.security_properties, listener.name
                )
            if listener.uses_sasl:
                self._sasl[listener.name] = ListenerAuth.build(config, listener)
        try:
            self.scram_credentials: ScramStore = (
                FileScramStore(config.log_dirs[0]) if self.zk is None else ZkScramStore(self.zk)
            )
        except CredentialFormatError as exc:  # a damaged users file: one line, not a traceback
            raise ConfigError(str(exc)) from None
        # The ACL authorizer (authorization.py): its keys checked now, its store read at start.
        authorizer_wanted(config)
        self.authorizer: AclAuthorizer | None = None
        self._acl_watcher: AclChangeWatcher | None = None
        # One secret per broker: an unknown SCRAM user always gets the same fake salt.
        self._fake_salt_key = secrets.token_bytes(32)
        if self._sasl and config.connections_max_reauth_ms > 0:
            log.warning(
                "connections.max.reauth.ms=%d: re-authentication (KIP-368) is not supported; "
                "SASL sessions get session_lifetime_ms=0 and last as long as the connection",
                config.connections_max_reauth_ms,
            )
        # The SASL APIs are the connection's (see _authenticate); listed here so that
        # ApiVersions advertises them, and answered ILLEGAL_SASL_STATE on other listeners.
        self.handlers: dict[int, Handler] = {
            **HANDLERS,
            SASL_HANDSHAKE: handle_sasl_without_sasl,
            SASL_AUTHENTICATE: handle_sasl_without_sasl,
        }
        try:
            overrides = resolve_overrides(config.max_connections_per_ip_overrides)
        except UnresolvableOverrideError as exc:
            raise ConfigError(str(exc)) from None
        self.connection_limits = ConnectionLimits(
            max_connections=config.max_connections,
            max_per_ip=config.max_connections_per_ip,
            per_ip_overrides=overrides,
            max_idle_ms=config.connections_max_idle_ms,
        )
        self._servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task[None], ConnectionSlot] = {}
        self._stopped = asyncio.Event()
        self._joined = False
        self._shutdown_step = "not shutting down"
        self.controlled_shutdown = ControlledShutdown(
            config.controlled_shutdown_enable,
            config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms,
        )
        #: how long a signalled shutdown may take before the process ends regardless
        self.shutdown_bound_s = self.controlled_shutdown.budget_s + SHUTDOWN_GRACE

    # -- topics and partitions -------------------------------------------------------------

    def topic_log_config(self, topic: str) -> LogConfig:
        """The broker's log settings with the topic's overrides. In cluster mode, logs loaded
        before joining get the broker defaults (the view is still empty); the replica manager
        applies the topic's overrides when it takes the partition on."""
        info = self.cluster.get(topic)
        return log_settings(self.config.log, info.config) if info else self.config.log

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Register a topic; the replicas create its partitions' logs (standalone, before this
        returns).

        Raises the cluster view's ``TopicError`` subclasses and ``InvalidTopicError``;
        ``InvalidPartitionsError`` beyond ``MAX_PARTITIONS_PER_TOPIC`` or the file descriptors
        left; ``InvalidConfigError`` for a config the log settings refuse. Standalone, if a log
        cannot be created (``OSError``, ``StorageError``) the topic is removed again before the
        error propagates, so that it is not left registered with partitions that have no log.
        """
        if partitions > MAX_PARTITIONS_PER_TOPIC:
            raise InvalidPartitionsError(
                f"expected at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic, "
                f"found {partitions}"
            )
        try:
            log_settings(self.config.log, config)  # every Kafka topic key; the log's applied
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from None
        check_file_descriptors(partitions)
        return self.cluster.create_topic(
            name, partitions, replication_factor, config, validate_only=validate_only
        )

    def delete_topic(self, name: str) -> None:
        """Delete a topic; each replica deletes its log when the topic is gone (standalone,
        before this returns)."""
        self.cluster.delete_topic(name)

    async def off_loop(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a metadata ``call`` (``create_topic``, ``next_producer_id``, …) — in cluster mode
        in the executor, because it talks to ZooKeeper and kazoo blocks while disconnected,
        which on the event loop would stall every connection for the whole outage. A
        ZooKeeper failure is raised as ``MetadataUnavailableError`` (a retriable error code).
        Standalone, the call runs inline, as it always did: it only touches local files, and
        the replicas it creates must exist when it returns."""
        if self.zk is None:
            return call(*args, **kwargs)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, lambda: call(*args, **kwargs))
        except KazooException as exc:
            raise MetadataUnavailableError(f"ZooKeeper is unavailable: {exc!r}") from None

    def _replica_log(self, topic: str, partition: int) -> Log:
        config = self.topic_log_config(topic)
        partition_log = self.log_manager.get_or_create_log(topic, partition, config)
        partition_log.config = config  # a log loaded at startup gets the topic's overrides
        return partition_log

    def _delete_log(self, topic: str, partition: int) -> None:
        self.log_manager.delete_log(topic, partition)

    async def _append_offsets(self, partition: int, batch: bytes) -> int:
        """Make a commit batch durable: a replicated append to the offsets partition; returns
        the batch's base offset (the offset store orders commits by it)."""
        result = await self.replicas.append(
            OFFSETS_TOPIC, partition, batch, acks=-1,
            timeout_ms=self.config.offsets_commit_timeout_ms, min_insync_replicas=1,
            coordinator=True,
        )  # fmt: skip
        if result.error != Errors.NONE or result.info is None:
            raise OffsetCommitFailedError(result.error, result.message or "")
        return result.info.first_offset

    def _on_role_change(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        """Coordinate the groups of the offsets partitions this broker leads."""
        if tp.topic != OFFSETS_TOPIC:
            return
        if role is Role.LEADER and partition_log is not None:
            # Only a standalone broker rewrites a mostly stale partition as it loads it (at
            # startup, before it serves): in a cluster the rewrite would run on the event loop
            # while serving, and followers would have to follow the moved log start.
            live = self.offsets.load_partition(
                tp.partition, partition_log, compact=self.config.standalone
            )
            log.info("coordinating groups of %s (%d committed offsets)", tp, live)
        else:
            self.offsets.unload_partition(tp.partition)

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        started = time.monotonic()
        self.log_manager.startup()
        if self.zk is not None:
            self.zk.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        elif self.cluster.get(OFFSETS_TOPIC) is None:
            # A single broker has its offsets topic from the start (a cluster creates it on
            # the first FindCoordinator, with the brokers then alive).
            self.cluster.create_topic(
                OFFSETS_TOPIC,
                self.offsets.num_partitions,
                1,
                {"cleanup.policy": "compact"},
                internal=True,
            )
        self.authorizer, self._acl_watcher = start_authorizer(self.config, self.zk)
        self.log_manager.start_background()
        log.info(
            "broker %d loaded %d partitions in %.2fs (%d bytes cut by recovery)",
            self.config.broker_id,
            len(self.log_manager.logs()),
            time.monotonic() - started,
            self.log_manager.recovered_bytes_cut,
        )

    async def serve(self) -> None:
        """Listen until :meth:`stop`; then shut everything down cleanly.

        Raises ``OSError`` if the listener or the metrics port cannot be bound — after
        closing the logs it had loaded, so the next start needs no recovery.
        """
        loop = asyncio.get_running_loop()
        guard = ShutdownGuard(
            self.shutdown_bound_s,
            on_first=self.stop,
            flush=self._best_effort_flush,
            describe=lambda: self._shutdown_step,
        )
        guard.install(loop)  # SIGTERM, SIGINT: a bounded stop; a second one: at once
        await loop.run_in_executor(None, self.startup)
        reaper: asyncio.Task[None] | None = None
        try:
            bound: dict[str, int] = {}
            for listener in self.config.listeners:
                server = await self._bind(listener)
                self._servers.append(server)
                bound[listener.name] = server.sockets[0].getsockname()[1]
                if listener.name == self.config.listener.name:
                    self.port = bound[listener.name]
            # Every listener as clients are told of it (port 0: the one bound), registered.
            self.cluster.endpoints = tuple(
                (a.name, a.security_protocol, a.host, a.port or bound[a.name])
                for a in self.config.advertised_listeners
            )
            await self._join()
            # Where transactions were ever used, the coordinator loads its state partitions now,
            # so transactions a crash left prepared are finished without waiting for a
            # transactional client (like Kafka, __transaction_state itself is created on the
            # first transactional request, not at every start).
            if self.cluster.get(TRANSACTION_STATE_TOPIC) is not None:
                await attach_coordinator(self)
            for server in self._servers:
                await server.start_serving()
            reaper = asyncio.create_task(self._close_idle_connections(), name="idle-connections")
            if self.config.metrics_port is not None:
                host = self.config.metrics_host or "127.0.0.1"
                try:
                    start_http_server(
                        self.config.metrics_port, host, registry=self.metrics.registry
                    )
                except OSError as exc:
                    raise ListenerBindError(
                        exc.errno,
                        f"metrics.listener=http://{host}:{self.config.metrics_port}: cannot "
                        f"bind {host}:{self.config.metrics_port}: {_reason(exc)}",
                    ) from None
            log.info(
                "broker %d listening on %s (%s, log dirs %s)",
                self.config.broker_id,
                ", ".join(str(listener) for listener in self.config.listeners),
                "standalone" if self.zk is None else f"cluster {self.config.zookeeper_connect}",
                ",".join(self.config.log_dirs),
            )
            await self._stopped.wait()
        finally:
            if reaper is not None:
                reaper.cancel()
            await self._shutdown()
            guard.stopped_cleanly()  # and hands the signals back unless one was received

    async def _bind(self, listener: Listener) -> asyncio.Server:
        """Bound (so the port is known for the registration) but not yet listening: requests
        wait until the broker has joined (as Kafka starts processing requests only after
        registering), so no client sees a broker with an empty view of the cluster or
        without its replicas."""
        try:
            return await asyncio.start_server(
                functools.partial(self._on_connection, listener),
                listener.host,
                listener.port,
                limit=1 << 20,
                reuse_address=True,
                ssl=self._tls.get(listener.name),
                start_serving=False,
            )
        except OSError as exc:
            raise ListenerBindError(
                exc.errno,
                f"listeners={listener}: cannot bind {listener.host}:{listener.port}: "
                f"{_reason(exc)}",
            ) from None

    async def _join(self) -> None:
        """Register in the cluster (in cluster mode: in ZooKeeper, starting the controller
        candidate) and start the replica manager."""
        self.cluster.listener_port = self.config.advertised.port or self.port
        await asyncio.get_running_loop().run_in_executor(None, self.cluster.start)
        self._joined = True
        self.replicas.start()

    def stop(self) -> None:
        self._stopped.set()

    async def _shutdown(self) -> None:
        """Stop everything, each step bounded (see the module docstring): what a step could
        not do is logged in one line and the next step runs. The logs are flushed, closed and
        checkpointed last, whatever happened before."""
        log.info("broker %d shutting down", self.config.broker_id)
        self._shutdown_step = "closing connections"
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            _, left = await asyncio.wait(self._connections, timeout=CONNECTIONS_CLOSE_TIMEOUT)
            if left:
                log.warning(
                    "%d connections did not close within %.0fs; going on",
                    len(left), CONNECTIONS_CLOSE_TIMEOUT,
                )  # fmt: skip
        for server in self._servers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), CONNECTIONS_CLOSE_TIMEOUT)
        self.groups.close()
        detach_coordinator(self)
        self._shutdown_step = "stopping the replicas"
        try:
            await asyncio.wait_for(self.replicas.stop(), REPLICAS_STOP_TIMEOUT)
        except TimeoutError:
            log.warning(
                "the replica fetchers did not stop within %.0fs; going on", REPLICAS_STOP_TIMEOUT
            )
        cluster_stopped = await self._leave_cluster()
        if self._acl_watcher is not None:
            self._acl_watcher.stop()
        if self.zk is not None:
            self._shutdown_step = "closing the ZooKeeper session"
            if not await run_on_thread("zookeeper-stop", self.zk.stop, ZOOKEEPER_STOP_TIMEOUT):
                log.warning(
                    "the ZooKeeper client did not stop within %.0fs: the session ends when "
                    "ZooKeeper expires it", ZOOKEEPER_STOP_TIMEOUT,
                )  # fmt: skip
            else:
                self.zk.close()
        if self._joined and not cluster_stopped:
            # The cluster view's threads, on a closed client (its calls fail at once).
            self._shutdown_step = "stopping the cluster view"
            if not await run_on_thread("cluster-stop", self.cluster.stop, CLUSTER_STOP_TIMEOUT):
                log.warning(
                    "the cluster view did not stop within %.0fs; going on", CLUSTER_STOP_TIMEOUT
                )
        self._shutdown_step = "flushing, checkpointing and closing the logs"
        await start_thread("log-shutdown", self.log_manager.shutdown)  # raises what it raises
        self._shutdown_step = "stopped"
        log.info("broker %d stopped cleanly", self.config.broker_id)

    async def _leave_cluster(self) -> bool:
        """The controlled part (cluster mode; see ``controlled_shutdown``): whether the
        cluster view was stopped."""
        if not self._joined:
            return True
        if self.zk is None:
            self.cluster.stop()  # a single broker: nothing to hand over, nothing to wait for
            return True
        zk = self.zk

        def step(attempt: int) -> None:
            self._shutdown_step = f"controlled shutdown, attempt {attempt}"

        return await self.controlled_shutdown.leave(lambda: zk.connected, self.cluster.stop, step)

    def _best_effort_flush(self) -> None:
        """What a forced exit does (any thread): fsync every log it can, then the
        checkpoints. A log that fails (closed meanwhile, its dir offline) is skipped."""
        failed = 0
        for partition_log in list(self.log_manager.logs().values()):
            try:
                partition_log.flush()
            except Exception:  # a closed or offline log: the next start recovers it
                failed += 1
        self.log_manager.checkpoint()
        if failed:
            raise RuntimeError(f"{failed} logs could not be flushed")

    # -- connections -----------------------------------------------------------------------

    async def _on_connection(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        slot = self.connection_limits.admit(peer[0] if isinstance(peer, tuple) else "")
        if slot is None or self._stopped.is_set():  # refused (logged once per burst)
            if slot is not None:
                self.connection_limits.release(slot)
            writer.close()  # as Kafka's acceptor: nothing read, nothing answered
            return
        self._connections[task] = slot
        CURRENT_PEER.set(f"/{peer[0]}" if isinstance(peer, tuple) else "")
        CURRENT_LISTENER.set(listener.name)
        tls = writer.get_extra_info("ssl_object")
        CURRENT_PRINCIPAL.set(peer_principal(tls) if tls is not None else ANONYMOUS)
        if tls is not None:
            log.debug("TLS connection from %s as %s", peer, CURRENT_PRINCIPAL.get())
        auth = self._sasl.get(listener.name)
        session = (
            SaslSession(auth, self.scram_credentials, self._fake_salt_key, str(peer))
            if auth is not None
            else None
        )
        max_bytes = self.config.socket_request_max_bytes
        decoder = FrameDecoder(
            max_bytes if session is None else self.config.sasl_server_max_receive_size
        )
        pending: list[bytes] = []
        try:
            while True:
                # Waiting for bytes, idle or halfway through a request: the idle check
                # closes the connection after connections.max.idle.ms of it.
                slot.waiting_since = time.monotonic()
                data = await reader.read(1 << 18)
                slot.waiting_since = None
                decoder.receive_data(data)
                # Requests of one connection are handled one at a time, in order, as Kafka
                # does (it mutes the channel): a producer's pipelined batches are appended in
                # the order sent, which idempotence depends on.
                # Responses to pipelined requests go out in one write per chunk read (one
                # send syscall instead of one per response, which profiling showed costly
                # for a batch-of-1 producer); anything that may wait flushes them first.
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes | bytearray | memoryview)
                    if session is not None and (
                        not session.authenticated
                        or int.from_bytes(frame[:2], "big") in SASL_API_KEYS
                    ):
                        pending.append(await self._authenticate(session, frame, listener))
                        if session.close_after_response:
                            raise _CloseConnection
                        if session.authenticated:
                            decoder.max_frame_bytes = max_bytes
                            CURRENT_PRINCIPAL.set(session.principal or ANONYMOUS)
                            log.debug(
                                "connection from %s authenticated as %s (%s)",
                                peer, session.principal, session.mechanism,
                            )  # fmt: skip
                        continue
                    if pending and (frame[:2] != _PRODUCE_KEY or self._produce_may_wait):
                        await flush_pending(writer, pending)
                    response = await self.handle_frame(frame)
                    if isinstance(response, bytes):
                        pending.append(response)
                    elif response is not None:
                        await flush_pending(writer, pending)
                        await write_response(writer, response)
                await flush_pending(writer, pending)
                if not data:
                    break
        except _CloseConnection:
            with contextlib.suppress(ConnectionError):
                await flush_pending(writer, pending)
                await writer.drain()
        except RemoteProtocolError as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self._connections.pop(task, None)
            self.connection_limits.release(slot)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError, ssl.SSLError):
                await writer.wait_closed()

    async def _close_idle_connections(self) -> None:
        """Close every connection that waited for bytes longer than connections.max.idle.ms,
        checking a few times per that period (forever; cancelled at shutdown)."""
        interval = self.connection_limits.idle_check_interval
        if interval is None:
            return
        while True:
            await asyncio.sleep(interval)
            idle = self.connection_limits.idle(time.monotonic())
            if not idle:
                continue
            tasks = {slot: task for task, slot in self._connections.items()}
            for slot in idle:
                task = tasks.get(slot)
                if task is not None and slot.waiting_since is not None:
                    log.debug(
                        "closing a connection from %s idle for more than "
                        "connections.max.idle.ms=%d", slot.address,
                        self.config.connections_max_idle_ms,
                    )  # fmt: skip
                    task.cancel()

    async def _authenticate(
        self, session: SaslSession, frame: bytes | bytearray | memoryview, listener: Listener
    ) -> bytes:
        """One frame of a SASL connection before (or a SASL request after) authentication:
        the answer to send. Raises ``_CloseConnection`` (a legacy token refused) or
        ``RemoteProtocolError`` (a request not allowed yet), which close the connection."""
        if session.legacy_tokens and not session.authenticated:
            # After SaslHandshake v0 the tokens come as bare frames, and go back so.
            answer = await self.off_loop(session.legacy_token, bytes(frame))
            if answer is None:
                raise _CloseConnection
            return len(answer).to_bytes(4, "big") + answer
        api_key = int.from_bytes(frame[:2], "big")
        if api_key == ApiKey.API_VERSIONS and not session.authenticated:
            response = await self.handle_frame(frame)
            assert isinstance(response, bytes)
            return response
        if api_key not in SASL_API_KEYS:
            name = _API_NAMES.get(api_key, f"api key {api_key}")
            raise RemoteProtocolError(
                f"expected SaslHandshake or SaslAuthenticate before {name} on the "
                f"{listener.security_protocol} listener {listener.name}"
            )
        request = decode_request(frame)
        if api_key == SASL_HANDSHAKE:
            return session.handshake(request)
        # SCRAM looks the user up in ZooKeeper in cluster mode: off the event loop.
        return await self.off_loop(session.authenticate, request)

    async def handle_frame(self, frame: bytes | bytearray | memoryview) -> Response:
        """Decode one request, run its handler, return the encoded response (None: none)."""
        try:
            request = decode_request(frame)
        except UnsupportedVersion as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                return encode_unsupported_version(exc)
            raise
        handler = self.handlers.get(request.api_key)
        if handler is None:
            raise UnsupportedVersion(
                request.api_key, request.api_version, request.correlation_id,
                f"api key {request.api_key} is not handled by this broker",
            )  # fmt: skip
        started = time.perf_counter()
        denied = cluster_denied(self, request)  # an API of the cluster the principal may not use
        response = denied if denied is not None else await handler(self, request)
        self.metrics.record_request(_API_NAMES[request.api_key], time.perf_counter() - started)
        return response


def _reason(exc: OSError) -> str:
    """``Address already in use``: the errno's text, without asyncio's wrapping."""
    return os.strerror(exc.errno) if exc.errno else str(exc)
