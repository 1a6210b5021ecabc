"""``Broker``: one broker's components and lifecycle, shared by every request handler.

Startup: load (and if need be recover) the logs, make sure every partition of every known
topic has a log, open the committed-offset store, start the log manager's background threads,
then listen. Shutdown (SIGTERM or SIGINT): stop accepting, close connections, flush and close
every log, write the checkpoints and the clean-shutdown marker.

Everything here runs on the broker's asyncio loop except the log manager's background threads
and fsyncs, which run in the loop's default executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import resource
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from prometheus_client import start_http_server

from sluice.broker.cluster.cluster_metadata import ClusterMetadata
from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.topic_metadata import (
    InvalidConfigError,
    InvalidPartitionsError,
    MetadataStore,
    MetadataUnavailableError,
    TopicInfo,
)
from sluice.broker.config import BrokerConfig
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import OffsetCommitFailedError, OffsetStore
from sluice.broker.log.errors import StorageError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import (
    NEED_DATA,
    ApiKey,
    EncodedFetchResponse,
    FrameDecoder,
    RemoteProtocolError,
    UnsupportedVersion,
    decode_request,
    encode_unsupported_version,
)
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.server.metrics import BrokerMetrics
from sluice.broker.server.purgatory import FetchPurgatory
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")
Response = bytes | EncodedFetchResponse | None

# The client address of the connection a handler is serving (each connection runs in its
# own task, so its own context); DescribeGroups reports it as the member's host.
CURRENT_PEER: contextvars.ContextVar[str] = contextvars.ContextVar("CURRENT_PEER", default="")

# Every partition is a directory and three open files (the active segment's .log, .index and
# .timeindex), created on the event loop. Kafka sets no limit on partitions, but one int32 in a
# CreateTopics request must not make this broker try to create 2^31 - 1 of them: it would
# block the loop for minutes and run out of file descriptors. Out of descriptors, the broker
# can neither accept a connection nor close a log cleanly (closing writes a producer-state
# snapshot), so a topic that would leave fewer than FD_HEADROOM free is refused up front.
MAX_PARTITIONS_PER_TOPIC = 1000
FDS_PER_PARTITION = 3
FD_HEADROOM = 64

Handler = Callable[["Broker", Any], Awaitable[Response]]
_API_NAMES = {int(key): key.name.lower() for key in ApiKey}
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
_PRODUCE_KEY = int(ApiKey.PRODUCE).to_bytes(2, "big")


class FdFile:
    """What ``loop.sendfile`` needs of a file, over a segment's open fd: ``fileno`` and
    ``seek`` for the native ``os.sendfile`` path, and ``readinto`` (with a position kept by
    ``seek``) for asyncio's fallback, taken when the transport cannot sendfile natively —
    e.g. while it is closing. Reads use ``pread``, so the shared fd's offset never moves."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._position = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0:
            raise ValueError(f"expected an absolute seek (whence 0), found whence {whence}")
        self._position = offset
        return offset

    def readinto(self, buffer: memoryview | bytearray) -> int:
        read = os.preadv(self._fd, [buffer], self._position)
        self._position += read
        return read


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.zk: KazooClient | None = None
        self.cluster: ClusterMetadata | None = None
        self.metadata: MetadataStore
        if config.standalone:
            self.metadata = LocalMetadataStore(config.log_dirs[0], config.broker_id)
        else:
            # Cluster mode: topics, leaders and ISRs live in ZooKeeper (registered once the
            # listener is bound, so the advertised port is known).
            self.zk = KazooClient(
                hosts=config.zookeeper_connect, timeout=config.zookeeper_session_timeout_ms / 1000
            )
        self.log_manager = LogManager(
            config.log_dirs,
            config.log,
            topic_config=self.topic_log_config,
            flush_check_ms=config.flush_scheduler_interval_ms,
            retention_check_ms=config.retention_check_interval_ms,
            checkpoint_ms=config.checkpoint_interval_ms,
        )
        self.purgatory = FetchPurgatory()
        self.metrics = BrokerMetrics(self.log_manager.logs)
        self.offsets: OffsetStore | None = None
        self.replicas: ReplicaManager | None = None  # cluster mode only
        self.groups = GroupCoordinator(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
        )
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()
        self.port = config.listener.port
        from sluice.broker.server.handlers import HANDLERS  # handlers import this module

        self.handlers: dict[int, Handler] = HANDLERS

    # -- topics and partitions -------------------------------------------------------------

    def topic_log_config(self, topic: str) -> LogConfig:
        if self.zk is not None and self.cluster is None:
            # Loading logs before joining the cluster: broker defaults for now; the topic's
            # overrides are applied when the replica manager takes the partition on.
            return self.config.log
        info = self.metadata.get(topic)
        return self.config.log.with_overrides(info.config) if info else self.config.log

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's ``min.insync.replicas``, else the broker's."""
        info = self.metadata.get(topic)
        raw = info.config.get("min.insync.replicas") if info is not None else None
        return int(raw) if raw else self.config.min_insync_replicas

    def leader_log(self, topic: str, partition: int) -> tuple[Log | None, int]:
        """(the partition's log, 0) where this broker may serve clients from it, else
        (None, UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER). Standalone, every
        existing partition is served here (its log created on first use)."""
        info = self.metadata.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None, UNKNOWN_TOPIC_OR_PARTITION
        if self.replicas is None:
            existing = self.log_manager.get_log(topic, partition)
            return existing or self.log_manager.get_or_create_log(topic, partition), 0
        leading = self.replicas.leader_partition(topic, partition)
        if leading is None:
            return None, NOT_LEADER_OR_FOLLOWER
        return leading.log, 0

    def log_for(self, topic: str, partition: int) -> Log | None:
        """The partition's log where this broker serves it, else None."""
        return self.leader_log(topic, partition)[0]

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Register a topic and create its partitions' logs.

        Raises the metadata store's ``TopicError`` subclasses, and ``InvalidPartitionsError``
        beyond ``MAX_PARTITIONS_PER_TOPIC`` or the file descriptors left. If a log cannot be
        created (``OSError``, ``StorageError``) the topic is removed again before the error
        propagates, so that it is not left registered with partitions that have no log.
        """
        if partitions > MAX_PARTITIONS_PER_TOPIC:
            raise InvalidPartitionsError(
                f"expected at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic, "
                f"found {partitions}"
            )
        try:
            log_config = self.config.log.with_overrides(config)
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from None
        _check_file_descriptors(partitions)
        info = self.metadata.create_topic(
            name, partitions, replication_factor, config, validate_only=validate_only
        )
        if self.cluster is not None:
            return info  # each replica creates its log when the controller assigns it
        if not validate_only:
            try:
                for p in range(partitions):
                    self.log_manager.get_or_create_log(name, p, log_config)
            except (OSError, StorageError):
                log.exception("creating the logs of topic %s failed; removing it", name)
                try:
                    self.delete_topic(name)
                except (OSError, StorageError):
                    log.exception("removing the half-created topic %s failed", name)
                raise
            log.info("created topic %s with %d partitions", name, partitions)
        return info

    async def off_loop(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a metadata ``call`` (``create_topic``, ``next_producer_id``, …) — in cluster mode
        in the executor, because it talks to ZooKeeper and kazoo blocks while disconnected,
        which on the event loop would stall every connection for the whole outage. A
        ZooKeeper failure is raised as ``MetadataUnavailableError`` (a retriable error code).
        Standalone, the call runs inline, as it always did."""
        if self.zk is None:
            return call(*args, **kwargs)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, lambda: call(*args, **kwargs))
        except KazooException as exc:
            raise MetadataUnavailableError(f"ZooKeeper is unavailable: {exc!r}") from None

    def delete_topic(self, name: str) -> None:
        info = self.metadata.delete_topic(name)
        if self.cluster is not None:
            return  # the controller removes it; replicas delete their logs when it is gone
        for p in range(info.partitions):
            self.log_manager.delete_log(name, p)
        log.info("deleted topic %s", name)

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        started = time.monotonic()
        self.log_manager.startup()
        if self.zk is None:
            for info in self.metadata.topics().values():
                for p in range(info.partitions):
                    self.log_manager.get_or_create_log(info.name, p)
            self.offsets = OffsetStore.standalone(
                self.log_manager, self.metadata, self.config.offsets_topic_num_partitions
            )
        else:
            self.zk.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
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
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
                loop.add_signal_handler(sig, self.stop)
        await loop.run_in_executor(None, self.startup)
        try:
            listener = self.config.listener
            self._server = await asyncio.start_server(
                self._on_connection,
                listener.host,
                listener.port,
                limit=1 << 20,
                reuse_address=True,
                # Bound (so the port is known for the registration) but not yet listening:
                # in cluster mode, requests wait until the broker has joined (as Kafka starts
                # processing requests only after registering), so no client sees a broker
                # with an empty view of the cluster.
                start_serving=False,
            )
            self.port = self._server.sockets[0].getsockname()[1]
            if self.zk is not None:
                await self._join_cluster()
            await self._server.start_serving()
            if self.config.metrics_port is not None:
                start_http_server(
                    self.config.metrics_port,
                    self.config.metrics_host or "127.0.0.1",
                    registry=self.metrics.registry,
                )
            log.info(
                "broker %d listening on %s:%d (%s, log dirs %s)",
                self.config.broker_id,
                listener.host,
                self.port,
                "standalone" if self.zk is None else f"cluster {self.config.zookeeper_connect}",
                ",".join(self.config.log_dirs),
            )
            await self._stopped.wait()
        finally:
            await self._shutdown()

    async def _join_cluster(self) -> None:
        """Register in ZooKeeper, start the controller candidate and the replica manager."""
        assert self.zk is not None
        loop = asyncio.get_running_loop()
        cfg = self.config
        self.cluster = ClusterMetadata(
            self.zk,
            cfg.broker_id,
            listener_host=cfg.advertised.host,
            listener_port=cfg.advertised.port or self.port,
            default_replication_factor=cfg.default_replication_factor,
            num_partitions=cfg.num_partitions,
            unclean_leader_election=cfg.unclean_leader_election,
            # Restarted right after a crash, the broker finds its previous session's
            # registration still there until that session expires: wait that long, not less.
            registration_timeout=max(10.0, cfg.zookeeper_session_timeout_ms / 1000 + 5),
        )
        self.metadata = self.cluster

        async def append_offsets(partition: int, batch: bytes) -> None:
            assert self.replicas is not None
            result = await self.replicas.append(
                OFFSETS_TOPIC, partition, batch, acks=-1, timeout_ms=cfg.offsets_commit_timeout_ms,
                min_insync_replicas=1,
            )  # fmt: skip
            if result.error != 0:
                raise OffsetCommitFailedError(result.error, result.message or "")

        self.offsets = OffsetStore(cfg.offsets_topic_num_partitions, append_offsets)
        self.replicas = ReplicaManager(
            cfg.broker_id,
            self.cluster,
            self._replica_log,
            self._delete_log,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            on_high_watermark=self.purgatory.notify,
            on_role_change=self._on_role_change,
        )
        await loop.run_in_executor(None, self.cluster.start)
        self.replicas.start()

    def _replica_log(self, topic: str, partition: int) -> Log:
        config = self.topic_log_config(topic)
        partition_log = self.log_manager.get_or_create_log(topic, partition, config)
        partition_log.config = config  # a log loaded at startup gets the topic's overrides
        return partition_log

    def _delete_log(self, topic: str, partition: int) -> None:
        self.log_manager.delete_log(topic, partition)

    def _on_role_change(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        """Coordinate the groups of the offsets partitions this broker leads."""
        if tp.topic != OFFSETS_TOPIC or self.offsets is None:
            return
        if role is Role.LEADER and partition_log is not None:
            live = self.offsets.load_partition(tp.partition, partition_log)
            log.info("coordinating groups of %s (%d committed offsets)", tp, live)
        else:
            self.offsets.unload_partition(tp.partition)

    def is_coordinator(self, group_id: str) -> bool:
        """Whether this broker coordinates ``group_id`` (always, standalone)."""
        if self.replicas is None or self.offsets is None:
            return True
        partition = self.offsets.partition_for(group_id)
        return (
            partition in self.offsets.loaded
            and self.replicas.leader_partition(OFFSETS_TOPIC, partition) is not None
        )

    def stop(self) -> None:
        self._stopped.set()

    async def _shutdown(self) -> None:
        log.info("broker %d shutting down", self.config.broker_id)
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
        self.groups.close()
        loop = asyncio.get_running_loop()
        if self.replicas is not None:
            await self.replicas.stop()
        if self.cluster is not None:
            # Deregister first: the controller moves leadership away before the logs close.
            await loop.run_in_executor(None, self.cluster.stop)
        if self.zk is not None:
            await loop.run_in_executor(None, self.zk.stop)
            self.zk.close()
        await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
        log.info("broker %d stopped cleanly", self.config.broker_id)

    # -- connections -----------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        CURRENT_PEER.set(f"/{peer[0]}" if isinstance(peer, tuple) else "")
        decoder = FrameDecoder(self.config.socket_request_max_bytes)
        try:
            while True:
                data = await reader.read(1 << 18)
                decoder.receive_data(data)
                # Requests of one connection are handled one at a time, in order, as Kafka
                # does (it mutes the channel): a producer's pipelined batches are appended in
                # the order sent, which idempotence depends on.
                # Responses to pipelined requests go out in one write per chunk read (one
                # send syscall instead of one per response, which profiling showed costly
                # for a batch-of-1 producer); anything that may wait flushes them first.
                pending: list[bytes] = []
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes | bytearray | memoryview)
                    if pending and (frame[:2] != _PRODUCE_KEY or self.replicas is not None):
                        await self._flush(writer, pending)
                    response = await self.handle_frame(frame)
                    if isinstance(response, bytes):
                        pending.append(response)
                    elif response is not None:
                        await self._flush(writer, pending)
                        await self._write(writer, response)
                await self._flush(writer, pending)
                if not data:
                    break
        except RemoteProtocolError as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

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
        response = await handler(self, request)
        self.metrics.record_request(_API_NAMES[request.api_key], time.perf_counter() - started)
        return response

    @staticmethod
    async def _flush(writer: asyncio.StreamWriter, pending: list[bytes]) -> None:
        if not pending:
            return
        writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
        pending.clear()
        if writer.transport.get_write_buffer_size() > 1 << 20:
            await writer.drain()

    async def _write(
        self, writer: asyncio.StreamWriter, response: bytes | EncodedFetchResponse
    ) -> None:
        if isinstance(response, bytes):
            writer.write(response)
            if writer.transport.get_write_buffer_size() > 1 << 20:
                await writer.drain()
            return
        loop = asyncio.get_running_loop()
        for chunk in response.chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                writer.write(chunk)
            else:
                # Zero copy: the record bytes go from the segment file to the socket.
                assert isinstance(chunk, FileSlice)
                await writer.drain()
                await loop.sendfile(
                    writer.transport,
                    FdFile(chunk.fd),  # type: ignore[arg-type]  # file-like enough for sendfile
                    chunk.position,
                    chunk.size,
                )
        await writer.drain()

    def notify_append(self, tp: TopicPartition) -> None:
        self.purgatory.notify(tp)


def _check_file_descriptors(partitions: int) -> None:
    """Refuse ``partitions`` new logs if they would leave fewer than ``FD_HEADROOM`` file
    descriptors free (Linux: counted in /proc/self/fd; elsewhere not checked)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        return
    needed = partitions * FDS_PER_PARTITION
    if in_use + needed + FD_HEADROOM > soft:
        raise InvalidPartitionsError(
            f"{partitions} partitions need {needed} file descriptors and only "
            f"{soft - in_use - FD_HEADROOM} are free (ulimit -n {soft}, {in_use} in use, "
            f"{FD_HEADROOM} kept for connections); raise the limit or use fewer partitions"
        )
