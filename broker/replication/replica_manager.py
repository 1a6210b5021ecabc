"""``ReplicaManager``: this broker's replicas (Kafka's ReplicaManager), in either mode.

Roles come from the :class:`~sluice.broker.cluster.cluster_view.ClusterView`: in cluster mode
from ZooKeeper through watches (the choice design.md leaves open), standalone from a cluster of
one in which this broker leads every partition. The view calls back on every partition-state
change, and the manager makes each local replica leader or follower to match — no
controller-to-broker RPC. Followers are grouped into one ``ReplicaFetcher`` per leader broker.
Standalone, every replica is a leader with an ISR of one, so there are no fetchers and every
append is committed as it is written.

**Clients** are served by a partition's leader only: :meth:`leader_or_error` answers the
partition, or UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition in the cluster) or
NOT_LEADER_OR_FOLLOWER (it exists, but this broker does not lead it).

**Produce** goes through :meth:`append`: only the leader accepts it (else the error above);
with ``acks=-1`` an ISR smaller than ``min.insync.replicas`` refuses it before the append
(NOT_ENOUGH_REPLICAS), and the response is a delayed operation completed when the high
watermark passes the batch — or failed at the request timeout (REQUEST_TIMED_OUT), or with
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum meanwhile. The append
wakes the fetches waiting on the partition at once (``on_high_watermark``, the broker's fetch
purgatory, is called after every local append, when the high watermark moves and when the
replica's role changes, which also marks it changed in the fetch sessions holding it): the
followers take the batch without waiting out their fetch's ``max_wait``, and their next
fetches move the high watermark, as in Kafka.

**Leader epochs** are written off the event loop (:class:`EpochWriter`): a new leader writes
its epoch as it takes over, and the first produce of the epoch waits for that write, so the
append itself finds the epoch on disk and does no I/O.

**New replicas' logs** are created off the event loop too (:class:`LogCreator`) when the
change comes from the cluster's metadata worker: a replica new here becomes a partition — leads,
follows, serves — only once its log exists; until then it is not on this broker (clients get
NOT_LEADER_OR_FOLLOWER, as while the change was on its way), and changes to it meanwhile are
applied, as they stand then, when its log is made. A change made on the event loop itself (a
single broker's CreateTopics) still creates the log at once, so it exists when the call that
made the change returns.

**ISR**: a follower's fetch moves its LEO (and maybe the HW); the follower that fetched joins
the ISR if it has caught up and its broker is registered (never another follower, judged on
the LEO of an older fetch); a periodic check drops followers that lagged
``replica.lag.time.max.ms``. Each change is written by the leader to the partition's state
znode, conditional on its version, off the event loop.

**ZooKeeper session** (cluster mode; a :class:`ControllerLink`): while the broker's session
is not known to be intact — from a suspended connection until the same session is back, or a
new one has re-registered and re-read its leaderships — no ``acks=0``/``acks=1`` produce is
accepted as leader (NOT_LEADER_OR_FOLLOWER). A leader cut off from ZooKeeper may already be
deposed; this is what narrows Kafka's documented ``acks=1`` loss to the time kazoo takes to
notice the disconnect (``cluster.broker_registration``). ``acks=all`` needs no such fence —
a deposed leader cannot move its high watermark, since the ISR member that replaced it no
longer fetches from it — so it stays available while ZooKeeper restarts, as in Kafka.

**Offline log dirs** (cluster mode, Kafka's ``ReplicaManager.handleLogDirFailure``): when the
log manager's :class:`LogDirFailureChannel` takes a dir offline, every local replica in it goes
offline — it stops leading and following, pending ``acks=all`` produces fail, clients get
KAFKA_STORAGE_ERROR for it — and the broker reports its offline replicas to the controller
(``ControllerLink.report_offline_replicas``), which moves their leadership to an in-sync
replica elsewhere and drops them from the ISRs. When the dir comes back (a retryable failure
whose probe passed) the replicas are reported online again and follow their leaders. A
standalone broker has no other replica: it does not subscribe, and keeps serving reads.

Runs on the broker's event loop. A metadata callback made on the loop's own thread (a single
broker's topic change) is applied at once, so the topic's replicas exist when the call that
changed it returns; one from another thread (the cluster's metadata worker) is handed over with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.log.errors import LogDirFailureError
from sluice.broker.log.log import AppendInfo, Log
from sluice.broker.log.log_dir_failure_channel import LogDirFailure, LogDirFailureChannel
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.broker_client import PLAINTEXT, BrokerConnector
from sluice.broker.replication.epoch_writer import EpochWriter
from sluice.broker.replication.log_creator import Created, LogCreator
from sluice.broker.replication.partition import Partition, Role
from sluice.broker.replication.replica_fetcher import ReplicaFetcher
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)


#: Seconds between attempts to report offline replicas while ZooKeeper refuses the write.
OFFLINE_REPORT_RETRY_S = 1.0
#: New replicas whose logs one LogCreator job makes, and whose roles one callback then applies:
#: a burst of thousands applied in one callback would hold the event loop for a second or so.
CREATE_STEP = 100


@runtime_checkable
class ControllerLink(Protocol):
    """What a ZooKeeper-coordinated cluster view adds for the replica manager (see the module
    docstring); a single broker's view has neither."""

    def session_intact(self) -> bool: ...

    def report_offline_replicas(self, partitions: frozenset[tuple[str, int]]) -> None: ...


@dataclass
class AppendResult:
    error: Errors
    info: AppendInfo | None = None
    message: str | None = None


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        cluster: ClusterView,
        get_log: Callable[[str, int], Log],
        delete_log: Callable[[str, int], None],
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        on_high_watermark: Callable[[TopicPartition], None] = lambda _tp: None,
        on_role_change: Callable[[TopicPartition, Role, Log | None], None] = lambda *_: None,
        dir_failures: LogDirFailureChannel | None = None,
        connector: BrokerConnector = PLAINTEXT,
    ) -> None:
        """``connector``: how followers reach their leaders (the inter-broker security)."""
        self.broker_id = broker_id
        self.connector = connector
        self.cluster = cluster
        self._get_log = get_log
        self._delete_log = delete_log
        self.default_min_insync_replicas = min_insync_replicas
        self.max_lag_ms = replica_lag_time_max_ms
        self._on_hw = on_high_watermark
        self._on_role = on_role_change
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[Errors]]]] = {}
        self._isr_writes: set[TopicPartition] = set()
        # The topic config each local replica's log was last configured with: a change (an
        # AlterConfigs) is applied live by asking for the log again, which reconfigures it.
        self._configs: dict[TopicPartition, dict[str, str]] = {}
        #: ISR changes this broker wrote as a leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        #: Followers' fetches that waited here (Kafka's DelayedFetchMetrics, fetcherType
        #: follower): completed by a change to their partitions — an append wakes them, which
        #: is what completes an acks=all produce in milliseconds — or expired at max_wait.
        self.follower_fetches_woken = 0
        self.follower_fetches_expired = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._link = cluster if isinstance(cluster, ControllerLink) else None
        self._dir_failures = dir_failures
        #: Local replicas on an offline log dir (cluster mode).
        self.offline: set[TopicPartition] = set()
        self._reporting = False  # a report task is running (it sends the latest set)
        self._reported: frozenset[tuple[str, int]] = frozenset()
        self.epochs = EpochWriter(dir_failures)
        # A leader's epoch being written (epoch, the write), until it is (see append).
        self._epoch_writes: dict[TopicPartition, tuple[int, asyncio.Future[None]]] = {}
        # New replicas of a change from the metadata worker get their logs here, off the
        # event loop, and become partitions once those exist (see _create_logs).
        self._log_creator = LogCreator(get_log)
        self._creating: set[TopicPartition] = set()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.cluster.add_listener(self._changed_from_any_thread)
        if self._link is not None and self._dir_failures is not None:
            self._dir_failures.add_listener(self._dir_event_from_any_thread)
        self.apply(None)
        self._tasks.append(self._loop.create_task(self._isr_expiry_loop()))

    async def stop(self) -> None:
        log.info(
            "follower fetches that waited here: %d completed by a change (an append), "
            "%d expired", self.follower_fetches_woken, self.follower_fetches_expired,
        )  # fmt: skip
        for task in self._tasks:
            task.cancel()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        for waiters in self._waiters.values():
            for _, future in waiters:
                if not future.done():
                    future.set_result(Errors.NOT_LEADER_OR_FOLLOWER)
        await self.epochs.close()
        await self._log_creator.close()

    def _changed_from_any_thread(self, changed: set[tuple[str, int]] | None) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.apply(changed)  # raises what creating a log raises, to the caller's change
        else:
            # The cluster's metadata worker: a burst of new replicas (a CreateTopics of
            # thousands of partitions) gets its logs made off the event loop.
            loop.call_soon_threadsafe(self.apply, changed, True)

    # -- roles -----------------------------------------------------------------------------

    def apply(
        self,
        changed: set[tuple[str, int]] | None,
        create_off_loop: bool = False,
        logs: dict[TopicPartition, Log] | None = None,
    ) -> None:
        """Bring local replicas in line with the cluster's view (all, or just ``changed``).

        ``create_off_loop``: a replica new here becomes a partition only once its log has been
        created by the :class:`LogCreator` (when it is applied again, with the ``logs`` made);
        else its log is created here, on the event loop, so it exists when this returns."""
        topics = self.cluster.topics()
        to_create: list[TopicPartition] = []
        if changed is None:
            wanted = {(t, p) for t, info in topics.items() for p in range(info.partitions)}
            wanted |= {(tp.topic, tp.partition) for tp in self.partitions}
        else:
            wanted = set(changed)
        for topic, p in sorted(wanted):
            tp = TopicPartition(topic, p)
            info = topics.get(topic)
            if info is None or p >= info.partitions:
                self._drop(tp, delete=True)
                continue
            replicas = self.cluster.replicas(topic, p)
            if self.broker_id not in replicas:
                self._drop(tp, delete=True)
                continue
            state = self.cluster.partition_state(topic, p)
            if state is None or tp in self.offline:
                continue
            partition = self.partitions.get(tp)
            if partition is None and (create_off_loop or tp in self._creating):
                # Its log is made off the loop; the latest state is applied once it exists.
                if tp not in self._creating:
                    self._creating.add(tp)
                    to_create.append(tp)
                continue
            if partition is None:
                made = logs.get(tp) if logs is not None else None
                partition = Partition(tp, made or self._get_log(topic, p), self.broker_id)
                self.partitions[tp] = partition
                self._configs[tp] = info.config
            elif self._configs.get(tp) != info.config:
                # Altered live: the log callback configures the log with the topic's settings.
                try:
                    self._get_log(topic, p)
                    log.info("%s: config now %s", tp, info.config)
                except Exception:  # the log keeps its settings; the others still change
                    log.exception("%s: cannot apply the config %s", tp, info.config)
                self._configs[tp] = info.config
            if state.leader == self.broker_id:
                if (
                    partition.role is not Role.LEADER
                    or partition.leader_epoch != state.leader_epoch
                ):
                    self._unfollow(tp)
                    partition.become_leader(
                        state.leader_epoch, replicas, state.isr, state.zk_version
                    )
                    self._write_leader_epoch(partition)
                    log.info("%s: leader at epoch %d, isr %s", tp, state.leader_epoch, state.isr)
                    self._role_changed(tp, Role.LEADER, partition.log)
                else:
                    # A reassignment changes the replicas under the same leader and epoch:
                    # replicas added start fetching (and may join the ISR), removed ones stop.
                    partition.update_state(state.isr, state.zk_version, replicas)
                self._completed_by_hw(tp, partition)
            elif state.leader >= 0:
                moved = partition.become_follower(
                    state.leader, state.leader_epoch, replicas, state.isr, state.zk_version
                )
                self._fail_waiters(tp)
                if moved:
                    self._follow(tp, partition, state.leader)
                    log.info("%s: following %d at epoch %d", tp, state.leader, state.leader_epoch)
                    self._role_changed(tp, Role.FOLLOWER, partition.log)
            else:
                partition.role = Role.NONE
                self._unfollow(tp)
                self._fail_waiters(tp)
                self._role_changed(tp, Role.NONE, partition.log)
        for i in range(0, len(to_create), CREATE_STEP):
            self._create_logs(to_create[i : i + CREATE_STEP])

    def _create_logs(self, tps: list[TopicPartition]) -> None:
        """Have the logs of new replicas ``tps`` created off the event loop, then apply their
        state as it is by then (a log whose replica was removed meanwhile is deleted)."""
        if self._loop is None or self._log_creator.closed:
            self._creating.difference_update(tps)
            return
        future = self._log_creator.create(tps)

        def done(f: asyncio.Future[Created]) -> None:
            self._creating.difference_update(tps)
            if f.cancelled() or self._log_creator.closed:
                return
            exc = f.exception()
            made = f.result() if exc is None else Created(failed=dict.fromkeys(tps, exc))
            for tp, error in made.failed.items():
                # A failed disk took its log dir offline, and was logged there.
                log.log(
                    logging.DEBUG if isinstance(error, LogDirFailureError) else logging.ERROR,
                    "%s: cannot create the replica's log: %r", tp, error,
                )  # fmt: skip
            self.apply({(tp.topic, tp.partition) for tp in made.logs}, logs=made.logs)
            for tp in made.logs:
                if tp not in self.partitions and not self._placed_here(tp):
                    self._delete_log(tp.topic, tp.partition)

        future.add_done_callback(done)

    def _placed_here(self, tp: TopicPartition) -> bool:
        """Whether the cluster places a replica of ``tp`` on this broker."""
        info = self.cluster.get(tp.topic)
        return (
            info is not None
            and 0 <= tp.partition < info.partitions
            and self.broker_id in self.cluster.replicas(tp.topic, tp.partition)
        )

    def _role_changed(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        self._on_role(tp, role, partition_log)
        # Fetches of ``tp`` now answer an error, or from a new leader epoch: wake them and
        # mark it changed in the fetch sessions that hold it (``on_high_watermark`` is the
        # fetch purgatory's notify).
        self._on_hw(tp)

    def _drop(self, tp: TopicPartition, delete: bool) -> None:
        self._configs.pop(tp, None)
        self.offline.discard(tp)
        if self.partitions.pop(tp, None) is None:
            return
        self._role_changed(tp, Role.NONE, None)
        self._unfollow(tp)
        self._fail_waiters(tp)
        if delete:
            self._delete_log(tp.topic, tp.partition)

    def _unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    def _follow(self, tp: TopicPartition, partition: Partition, leader_id: int) -> None:
        self._unfollow(tp)
        broker = self.cluster.brokers().get(leader_id)
        if broker is None:
            return  # the leader's registration will arrive with the next change
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None and not fetcher.serves(broker.host, broker.port):
            # The leader came back on another address (or the fetcher ended): start afresh,
            # moving whatever the old one still followed.
            stale = self.fetchers.pop(leader_id)
            assert self._loop is not None
            self._tasks.append(self._loop.create_task(stale.stop()))
            for moved in list(stale.partitions.values()):
                if moved.tp != tp:
                    self._follow(moved.tp, moved, leader_id)
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id, leader_id, broker.host, broker.port, self.connector, self.epochs
            )
            self.fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.add(partition)

    # -- the leader's side -----------------------------------------------------------------

    def leader_partition(self, topic: str, partition: int) -> Partition | None:
        return self.led(TopicPartition(topic, partition))

    def led(self, tp: TopicPartition) -> Partition | None:
        """The partition of ``tp`` if this broker leads it (for callers that hold the key
        already: a follower session's renewal looks up thousands)."""
        p = self.partitions.get(tp)
        return p if p is not None and p.role is Role.LEADER else None

    def leader_or_error(self, topic: str, partition: int) -> tuple[Partition | None, Errors]:
        """(the partition, NONE) where this broker leads it and may serve clients from it;
        else (None, UNKNOWN_TOPIC_OR_PARTITION) if the cluster has no such partition, or
        (None, NOT_LEADER_OR_FOLLOWER) if another broker leads it (or none yet)."""
        info = self.cluster.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None, Errors.UNKNOWN_TOPIC_OR_PARTITION
        if self.offline and TopicPartition(topic, partition) in self.offline:
            return None, Errors.KAFKA_STORAGE_ERROR
        leading = self.leader_partition(topic, partition)
        if leading is None:
            return None, Errors.NOT_LEADER_OR_FOLLOWER
        return leading, Errors.NONE

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's ``min.insync.replicas``, else the broker's."""
        info = self.cluster.get(topic)
        raw = info.config.get("min.insync.replicas") if info is not None else None
        return int(raw) if raw else self.default_min_insync_replicas

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, Errors]:
        """DeleteRecords as the partition's leader: move the log start offset to ``offset``
        (-1: the high watermark); returns ``(low watermark, NONE)`` or ``(-1, error)`` —
        OFFSET_OUT_OF_RANGE beyond the high watermark. Followers follow the leader's log start
        through their fetches; the segments below it go at the next retention pass."""
        p, error = self.leader_or_error(topic, partition)
        if p is None:
            return -1, error
        hw = p.log.high_watermark
        target = hw if offset == -1 else offset
        if not 0 <= target <= hw:
            return -1, Errors.OFFSET_OUT_OF_RANGE
        p.log.increment_log_start_offset(target)
        log.info("%s: log start offset now %d (DeleteRecords)", p.tp, p.log.log_start_offset)
        self._on_hw(p.tp)  # fetch sessions answer the new log start (followers follow it)
        return p.log.log_start_offset, Errors.NONE

    def under_replicated(self) -> int:
        """Partitions this broker leads whose ISR is smaller than their replica set (Kafka's
        UnderReplicatedPartitions)."""
        return sum(
            1
            for p in self.partitions.values()
            if p.role is Role.LEADER and len(p.isr) < len(p.replicas)
        )

    async def append(
        self,
        topic: str,
        partition: int,
        records: bytes | bytearray | memoryview,
        *,
        acks: int,
        timeout_ms: int,
        min_insync_replicas: int | None = None,
        coordinator: bool = False,
    ) -> AppendResult:
        """Append one batch as the partition's leader and wait as ``acks`` asks (see the module
        docstring). ``min_insync_replicas``: None for the topic's; ``coordinator``: a
        coordinator's own batch (``Log.append``). Raises the log's ``StorageError`` if the log
        refuses the batch."""
        p, error = self.leader_or_error(topic, partition)
        if p is not None and (
            p.tp in self._epoch_writes or p.log.leader_epochs.latest_epoch != p.leader_epoch
        ):
            # The epoch's first batch waits until the epoch is written (off the event loop);
            # the leadership may move meanwhile.
            await self._leader_epoch_written(p)
            p, error = self.leader_or_error(topic, partition)
        if p is None:
            message = (
                "this broker does not lead it" if error is Errors.NOT_LEADER_OR_FOLLOWER else None
            )
            return AppendResult(error, message=message)
        if acks != -1 and self._link is not None and not self._link.session_intact():
            return AppendResult(
                Errors.NOT_LEADER_OR_FOLLOWER,
                message="expected an intact ZooKeeper session to act as leader, found the "
                "connection suspended or the session lost: leadership may have moved",
            )
        if min_insync_replicas is None:
            min_insync_replicas = self.min_insync_replicas(topic)
        if acks == -1 and len(p.isr) < min_insync_replicas:
            return AppendResult(
                Errors.NOT_ENOUGH_REPLICAS,
                message=f"expected an ISR of at least {min_insync_replicas} "
                f"(min.insync.replicas), found {list(p.isr)}",
            )
        info = p.log.append(records, leader_epoch=p.leader_epoch, coordinator=coordinator)
        p.maybe_advance_hw()  # a single-replica ISR commits at once
        # Wake the fetches waiting on this partition now, the followers' above all (Kafka's
        # tryCompleteDelayedRequests after appendToLocalLog): they take the batch at once,
        # their next fetches move the high watermark, and that completes an acks=all wait.
        self._completed_by_hw(p.tp, p)
        if acks != -1 or p.committed(info.last_offset + 1):
            return AppendResult(Errors.NONE, info)
        future: asyncio.Future[Errors] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(p.tp, []).append((info.last_offset + 1, future))
        try:
            # (a timeout cancels the future, as wait_for did, without a task around it)
            async with asyncio.timeout(timeout_ms / 1000):
                error = await future
        except TimeoutError:
            return AppendResult(
                Errors.REQUEST_TIMED_OUT, info,
                f"not replicated to the ISR {list(p.isr)} within {timeout_ms} ms",
            )  # fmt: skip
        if error is Errors.NONE and len(p.isr) < min_insync_replicas:
            return AppendResult(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, info,
                                f"the ISR shrank to {list(p.isr)}")  # fmt: skip
        return AppendResult(error, info)

    def _write_leader_epoch(self, p: Partition) -> None:
        """Start writing ``p``'s leader epoch at its log end (this broker just took over), if
        its log does not have it yet."""
        if (
            self._loop is None
            or self.epochs.closed  # stopping: an append left writes its epoch itself
            or p.log.leader_epochs.latest_epoch == p.leader_epoch
        ):
            return
        epoch, tp = p.leader_epoch, p.tp
        pending = self._epoch_writes.get(tp)
        if pending is not None and pending[0] == epoch:
            return
        future = self.epochs.leader_epoch(p.log, epoch)
        self._epoch_writes[tp] = (epoch, future)

        def done(f: asyncio.Future[None]) -> None:
            if self._epoch_writes.get(tp, (None, None))[1] is f:
                del self._epoch_writes[tp]
            exc = None if f.cancelled() else f.exception()
            if exc is not None and not isinstance(exc, LogDirFailureError):
                # A failed disk took the log dir offline, and was logged there; anything else
                # (an epoch older than the log's) the append refuses as it always did.
                log.warning("%s: leader epoch %d not written: %s", tp, epoch, exc)

        future.add_done_callback(done)

    async def _leader_epoch_written(self, p: Partition) -> None:
        """Wait for ``p``'s leader epoch write (starting it if none runs); raises the
        ``StorageError`` of a write that failed."""
        pending = self._epoch_writes.get(p.tp)
        if pending is None or pending[0] != p.leader_epoch:
            self._write_leader_epoch(p)
            pending = self._epoch_writes.get(p.tp)
        if pending is not None:
            await asyncio.shield(pending[1])

    def _completed_by_hw(self, tp: TopicPartition, p: Partition) -> None:
        hw = p.log.high_watermark
        waiters = self._waiters.get(tp)
        if waiters:
            still = []
            for required, future in waiters:
                if future.done():
                    continue
                if hw >= required:
                    future.set_result(Errors.NONE)
                else:
                    still.append((required, future))
            self._waiters[tp] = still
        self._on_hw(tp)

    def _fail_waiters(
        self, tp: TopicPartition, error: Errors = Errors.NOT_LEADER_OR_FOLLOWER
    ) -> None:
        for _, future in self._waiters.pop(tp, []):
            if not future.done():
                future.set_result(error)

    # -- offline log dirs (cluster mode) ---------------------------------------------------

    def _dir_event_from_any_thread(self, log_dir: Path, failure: LogDirFailure | None) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_dir_event, log_dir, failure)

    def _on_dir_event(self, log_dir: Path, failure: LogDirFailure | None) -> None:
        """A log dir went offline (``failure``) or came back (None): see the module docstring."""
        in_dir = {tp for tp, p in self.partitions.items() if p.log.log_dir == log_dir}
        if failure is not None:
            for tp in sorted(in_dir - self.offline):
                partition = self.partitions[tp]
                self.offline.add(tp)
                self._unfollow(tp)
                self._fail_waiters(tp, Errors.KAFKA_STORAGE_ERROR)
                partition.role = Role.NONE
                self._role_changed(tp, Role.NONE, partition.log)
            log.warning("log dir %s offline: replicas %s offline", log_dir, _names(in_dir))
        else:
            back = in_dir & self.offline
            self.offline -= back
            for tp in back:  # a fresh start: the next apply makes it follow (or lead) again
                self.partitions[tp].role = Role.NONE
                self.partitions[tp].leader_epoch = -1
            log.info("log dir %s online: replicas %s back", log_dir, _names(back))
            self.apply({(tp.topic, tp.partition) for tp in back})
        if not self._reporting and self._loop is not None:
            self._reporting = True
            self._tasks.append(self._loop.create_task(self._report_offline()))

    async def _report_offline(self) -> None:
        """Send the offline set to the controller until what it has is the current set
        (retried while ZooKeeper refuses; ends with the replica manager)."""
        assert self._link is not None and self._loop is not None
        try:
            while True:
                current = frozenset((tp.topic, tp.partition) for tp in self.offline)
                if current == self._reported:
                    return
                try:
                    await self._loop.run_in_executor(
                        None, self._link.report_offline_replicas, current
                    )
                    self._reported = current
                except Exception as exc:  # disconnected: the session listener brings it back
                    log.warning("cannot report offline replicas yet (%r); retrying", exc)
                    await asyncio.sleep(OFFLINE_REPORT_RETRY_S)
        finally:
            self._reporting = False

    def follower_fetch_done(self, *, expired: bool) -> None:
        """A follower's fetch that waited for data has been answered: woken by a change to
        its partitions, or ``expired`` at its ``max_wait``."""
        if expired:
            self.follower_fetches_expired += 1
        else:
            self.follower_fetches_woken += 1

    def record_follower_fetch(
        self, replica_id: int, topic: str, partition: int, fetch_offset: int
    ) -> Errors:
        """A follower fetched; returns the error for that partition (NONE if fine)."""
        p = self.leader_partition(topic, partition)
        if p is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return self.follower_fetched(p, replica_id, fetch_offset)

    def follower_fetched(self, p: Partition, replica_id: int, fetch_offset: int) -> Errors:
        """:meth:`record_follower_fetch` of a partition this broker leads, already looked up
        (a follower's fetch reads and records thousands a second)."""
        if replica_id not in p.replicas:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if p.record_follower_fetch(replica_id, fetch_offset):
            self._completed_by_hw(p.tp, p)
        expanded = p.isr_to_expand(replica_id)
        # Only a registered broker joins (Kafka's isReplicaIsrEligible, KIP-841): one that has
        # shut down or lost its session may still have a fetch in flight, and would hold the
        # HW back once in.
        if expanded is not None and replica_id in self.cluster.brokers():
            self._write_isr(p, expanded)
        return Errors.NONE

    # -- ISR changes -----------------------------------------------------------------------

    async def _isr_expiry_loop(self) -> None:
        interval = max(self.max_lag_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            for p in list(self.partitions.values()):
                shrunk = p.isr_to_shrink(self.max_lag_ms)
                if shrunk is not None:
                    self._write_isr(p, shrunk)

    def _write_isr(self, p: Partition, isr: tuple[int, ...]) -> None:
        if p.tp in self._isr_writes or self._loop is None:
            return
        self._isr_writes.add(p.tp)
        epoch, version = p.leader_epoch, p.zk_version
        shrink = len(isr) < len(p.isr)
        log.info("%s: ISR %s -> %s", p.tp, list(p.isr), list(isr))

        async def write() -> None:
            try:
                assert self._loop is not None
                state = await self._loop.run_in_executor(
                    None, self.cluster.update_isr, p.tp.topic, p.tp.partition, epoch, isr, version
                )
                if state is not None and p.leader_epoch == epoch:
                    if shrink:
                        self.isr_shrinks += 1
                    else:
                        self.isr_expands += 1
                    p.update_state(state.isr, state.zk_version)
                    self._completed_by_hw(p.tp, p)
            except Exception:  # a failed write is retried by the next fetch or expiry pass
                log.exception("%s: ISR update failed", p.tp)
            finally:
                self._isr_writes.discard(p.tp)

        self._tasks.append(self._loop.create_task(write()))
        self._tasks = [t for t in self._tasks if not t.done()]


def _names(partitions: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)) or "none"
