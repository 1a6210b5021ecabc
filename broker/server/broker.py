"""``Broker``: one broker's components and lifecycle; the context every request handler gets.

Components, built once from the config. The only place where standalone and cluster mode
differ is the cluster view (and the ZooKeeper client cluster mode needs), chosen by
:func:`~sluice.broker.server.cluster_mode.cluster_view_for`:

* ``cluster``: a :class:`~sluice.broker.cluster.cluster_view.ClusterView` — standalone a
  :class:`~sluice.broker.cluster.single_broker.SingleBrokerCluster` (topics in the first log
  dir; this broker the only replica and leader of everything), in cluster mode a
  :class:`~sluice.broker.cluster.cluster_metadata.ClusterMetadata` over ZooKeeper;
* ``log_manager``: the partitions' logs in the log dirs;
* ``replicas``: the :class:`~sluice.broker.replication.replica_manager.ReplicaManager`, which
  makes each local replica leader or follower as the cluster view says, creates and deletes
  the logs, and takes every append (a single broker's appends commit at once);
* ``offsets`` (committed offsets in ``__consumer_offsets``, appended through the replica
  manager, loaded for the partitions this broker leads), ``groups``, ``purgatory``, ``metrics``;
  ``group_coordination`` loads and unloads the groups with the offsets partitions this broker
  leads (:class:`~sluice.broker.server.group_coordination.GroupCoordination`);
* ``share`` (share groups) over ``share_state``, which carries their state to and from the
  replicated ``__share_group_state`` topic
  (:class:`~sluice.broker.server.share_state_host.ShareStateHost`, also called on role changes).

Handlers see it only as a :class:`~sluice.broker.server.context.BrokerContext`.

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

Requests are served by ``acceptor`` (:class:`~sluice.broker.server.acceptor.Acceptor`:
listeners, TLS, admission, idle check; :class:`ListenerBindError` names the key and address
of a listener that cannot be bound), one :class:`~sluice.broker.server.connection.Connection`
per client (read loop, framing, SASL gate) and a
:class:`~sluice.broker.server.dispatcher.RequestDispatcher` (API key to handler). Services
only handlers use are built here too: ``topics``, ``scram_credentials``, ``authorizer`` (at
start) and ``transactions`` (the coordinator, built on first use).

Everything here runs on the broker's asyncio loop except the log manager's background threads,
the fsyncs and the ZooKeeper calls, which run in the loop's default executor — and the
shutdown's blocking steps, which run on daemon threads of their own (``controlled_shutdown``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import KazooException
from prometheus_client import start_http_server

from sluice.broker.cluster.topic_metadata import (
    MetadataUnavailableError,
)
from sluice.broker.config import BrokerConfig, ConfigError
from sluice.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import OffsetCommitFailedError, OffsetStore
from sluice.broker.log.log import Log
from sluice.broker.log.log_manager import LogManager
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.broker_client import BrokerConnector
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.security.authorizer import AclAuthorizer
from sluice.broker.security.errors import CredentialFormatError
from sluice.broker.security.scram_store import FileScramStore, ScramStore, ZkScramStore
from sluice.broker.server.acceptor import Acceptor, ListenerBindError, reason
from sluice.broker.server.authorization import (
    AclChangeWatcher,
    authorizer_wanted,
    start_authorizer,
)
from sluice.broker.server.cluster_mode import cluster_view_for
from sluice.broker.server.context import Handler
from sluice.broker.server.controlled_shutdown import (
    ControlledShutdown,
    run_on_thread,
    start_thread,
)
from sluice.broker.server.dispatcher import RequestDispatcher
from sluice.broker.server.dynamic_broker_config import DynamicBrokerConfig, store_for
from sluice.broker.server.fetch_session import FetchSessionCache
from sluice.broker.server.group_coordination import GroupCoordination
from sluice.broker.server.handlers import HANDLERS
from sluice.broker.server.handlers.security import handle_sasl_without_sasl
from sluice.broker.server.lazy_transaction_coordinator import LazyTransactionCoordinator
from sluice.broker.server.metrics import BrokerMetrics
from sluice.broker.server.purgatory import FetchPurgatory
from sluice.broker.server.sasl_session import SASL_API_KEYS
from sluice.broker.server.share_state_host import build_share_coordinator
from sluice.broker.server.shutdown_guard import ShutdownGuard, best_effort_flush
from sluice.broker.server.topic_admin import TopicAdmin
from sluice.broker.server.transaction_host import build_coordinator
from sluice.broker.transactions.transaction_log import TOPIC as TRANSACTION_STATE_TOPIC
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

# Shutdown: each step that may wait on the network gets a bound of its own (seconds); the
# controlled part gets controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms;
# the whole, that plus SHUTDOWN_GRACE (ShutdownGuard ends the process when it runs out).
CONNECTIONS_CLOSE_TIMEOUT = 5.0
REPLICAS_STOP_TIMEOUT = 5.0
ZOOKEEPER_STOP_TIMEOUT = 5.0
CLUSTER_STOP_TIMEOUT = 5.0  # the cluster view's threads, after ZooKeeper is closed
SHUTDOWN_GRACE = 20.0


class Broker:
    """One broker; implements :class:`~sluice.broker.server.context.BrokerContext`. See the
    module docstring."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port = config.listener.port
        self.zk, self.cluster = cluster_view_for(config)
        self.topics = TopicAdmin(config.log, self.cluster)
        # Dynamic broker configs (AlterConfigs on a BROKER resource): read at startup, then
        # each change swaps in the config with them applied (_reconfigure).
        self.dynamic_config = DynamicBrokerConfig(
            config, store_for(config, self.zk), self._reconfigure
        )
        self.log_manager = LogManager(
            config.log_dirs,
            config.log,
            topic_config=lambda topic: self.topics.log_config(topic),  # swapped: dynamic
            flush_check_ms=config.flush_scheduler_interval_ms,
            retention_check_ms=config.retention_check_interval_ms,
            checkpoint_ms=config.checkpoint_interval_ms,
            log_dir_retry_ms=config.log_dir_failure_retry_ms,
        )
        self.purgatory = FetchPurgatory(
            FetchSessionCache(config.fetch_session_cache_slots, config.fetch_session_eviction_ms)
        )
        self.metrics = BrokerMetrics(self.log_manager.logs)
        self.replicas = ReplicaManager(
            config.broker_id,
            self.cluster,
            self._replica_log,
            self._delete_log,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            on_high_watermark=self.purgatory.notify,
            # The groups follow the __consumer_offsets partitions led here, the share-group
            # state the __share_group_state partitions and topic partitions led here (both
            # built below).
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
            # Each completed rebalance's metadata in __consumer_offsets (Kafka's storeGroup),
            # so a coordinator that takes the partition over rebuilds the group from it.
            store_group=self.offsets.store_group,
            has_offsets=lambda group: bool(self.offsets.committed(group)),
        )
        # KIP-848's groups (group.protocol=consumer), under the broker's group.consumer.* keys.
        self.consumer_groups = ConsumerGroupCoordinator(
            config.consumer_groups,
            classic=self.groups,
            store=self.offsets.store_consumer_records,
            topics=lambda: {
                name: (info.partitions, info.topic_id)
                for name, info in self.cluster.topics().items()
                if not info.internal
            },
        )
        self.group_coordination = GroupCoordination(
            self.offsets, self.groups, self.consumer_groups, compact_on_load=config.standalone
        )
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
        # The transaction coordinator: this holder now, the coordinator on first use (it
        # creates __transaction_state; see lazy_transaction_coordinator).
        self.transactions = LazyTransactionCoordinator(
            functools.partial(build_coordinator, self),
            lambda: self.cluster.get(TRANSACTION_STATE_TOPIC) is not None,
        )
        # Share groups (KIP-932): membership, in-flight records and their durable state in
        # the replicated __share_group_state topic, at the group.share.* settings.
        self.share_state, self.share = build_share_coordinator(
            config, self.cluster, self.replicas, self.off_loop
        )
        # The SASL APIs are the connection's (see connection.py); listed here so that
        # ApiVersions advertises them, and answered ILLEGAL_SASL_STATE on other listeners.
        self.handlers: dict[int, Handler] = dict(HANDLERS)
        self.handlers.update(dict.fromkeys(SASL_API_KEYS, handle_sasl_without_sasl))
        self._stopped = asyncio.Event()
        # Listeners, TLS, SASL and the connection limits: a bad key raises a ValueError
        # (TlsError, ConfigError) naming it.
        self.acceptor = Acceptor(
            config,
            RequestDispatcher(self, self.metrics),
            self.scram_credentials,
            self.off_loop,
            # In a cluster a produce may wait for followers (acks=-1); a single broker's never.
            produce_may_wait=not config.standalone,
            stopping=self._stopped.is_set,
        )
        self._joined = False
        self._shutdown_step = "not shutting down"
        self.controlled_shutdown = ControlledShutdown(
            config.controlled_shutdown_enable,
            config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms,
        )
        #: how long a signalled shutdown may take before the process ends regardless
        self.shutdown_bound_s = self.controlled_shutdown.budget_s + SHUTDOWN_GRACE

    # -- services and callbacks -------------------------------------------------------------

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
        config = self.topics.log_config(topic)
        partition_log = self.log_manager.get_or_create_log(topic, partition, config)
        partition_log.config = config  # a log loaded at startup gets the topic's overrides
        return partition_log

    def _reconfigure(self, config: BrokerConfig) -> None:
        """Swap in ``config``, the static one with the dynamic broker configs applied: every
        log takes its new settings now, new topics and partitions get them, and so does the
        default ``min.insync.replicas`` (reference swaps only: called on any thread)."""
        self.config = config
        self.topics = TopicAdmin(config.log, self.cluster)
        self.replicas.default_min_insync_replicas = config.min_insync_replicas
        for tp, partition_log in self.log_manager.logs().items():
            partition_log.config = self.topics.log_config(tp.topic)

    def _on_role_change(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        self.group_coordination.on_role_change(tp, role, partition_log)
        self.share_state.on_role_change(tp, role, partition_log)

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
                OFFSETS_TOPIC, self.offsets.num_partitions, 1, {"cleanup.policy": "compact"},
                internal=True,
            )  # fmt: skip
        self.dynamic_config.load()
        if self.zk is not None:
            self.dynamic_config.watch(self.zk)
        self.authorizer, self._acl_watcher = start_authorizer(self.config, self.zk)
        self.log_manager.start_background()
        log.info(
            "broker %d loaded %d partitions in %.2fs (%d bytes cut by recovery)",
            self.config.broker_id, len(self.log_manager.logs()), time.monotonic() - started,
            self.log_manager.recovered_bytes_cut,
        )  # fmt: skip

    async def serve(self) -> None:
        """Listen until :meth:`stop`; then shut everything down cleanly.

        Raises ``OSError`` if the listener or the metrics port cannot be bound — after
        closing the logs it had loaded, so the next start needs no recovery.
        """
        loop = asyncio.get_running_loop()
        guard = ShutdownGuard(
            self.shutdown_bound_s,
            on_first=self.stop,
            flush=functools.partial(best_effort_flush, self.log_manager),
            describe=lambda: self._shutdown_step,
        )
        guard.install(loop)  # SIGTERM, SIGINT: a bounded stop; a second one: at once
        await loop.run_in_executor(None, self.startup)
        reaper: asyncio.Task[None] | None = None
        try:
            bound: dict[str, int] = {}
            for listener in self.config.listeners:
                server = await self.acceptor.bind(listener)
                bound[listener.name] = server.sockets[0].getsockname()[1]
                if listener.name == self.config.listener.name:
                    self.port = bound[listener.name]
            # Every listener as clients are told of it (port 0: the one bound), registered.
            self.cluster.endpoints = tuple(
                (a.name, a.security_protocol, a.host, a.port or bound[a.name])
                for a in self.config.advertised_listeners
            )
            await self._join()
            # Share-group state files of an earlier Sluice move into __share_group_state.
            await self.share_state.migrate_state_files(self.config.log_dirs[0])
            # Where transactions were ever used, the coordinator loads its state partitions now,
            # so transactions a crash left prepared are finished without waiting for a
            # transactional client (like Kafka, __transaction_state itself is created on the
            # first transactional request, not at every start).
            await self.transactions.get_if_used()
            await self.acceptor.start_serving()
            reaper = asyncio.create_task(
                self.acceptor.close_idle_connections(), name="idle-connections"
            )
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
                        f"bind {host}:{self.config.metrics_port}: {reason(exc)}",
                    ) from None
            log.info(
                "broker %d listening on %s (%s, log dirs %s)", self.config.broker_id,
                ", ".join(str(listener) for listener in self.config.listeners),
                "standalone" if self.zk is None else f"cluster {self.config.zookeeper_connect}",
                ",".join(self.config.log_dirs),
            )  # fmt: skip
            await self._stopped.wait()
        finally:
            if reaper is not None:
                reaper.cancel()
            await self._shutdown()
            guard.stopped_cleanly()  # and hands the signals back unless one was received

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
        await self.acceptor.close(CONNECTIONS_CLOSE_TIMEOUT)
        self.groups.close()
        self.consumer_groups.close()
        self.transactions.close()
        await self.share_state.close()
        self._shutdown_step = "stopping the replicas"
        try:
            await asyncio.wait_for(self.replicas.stop(), REPLICAS_STOP_TIMEOUT)
        except TimeoutError:
            log.warning(
                "the replica fetchers did not stop within %.0fs; going on", REPLICAS_STOP_TIMEOUT
            )
        cluster_stopped = await self._leave_cluster()
        self.dynamic_config.stop()
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
