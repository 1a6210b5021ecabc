"""The transaction coordinator as a broker hosts it: :func:`build_coordinator` (what
``ctx.transactions`` builds on first use), :class:`BrokerHost` (the coordinator's
``CoordinatorHost``: producer ids, state writes, markers, offsets, over a
:class:`~sluice.broker.server.context.BrokerContext`), :class:`BrokerRoutes` (where markers
go) and :func:`write_marker` (the leader's part of one marker, which WriteTxnMarkers also
uses).

Building the coordinator creates ``__transaction_state`` (compacted;
``transaction.state.log.num.partitions``, replication min(3, live brokers)) as the first
FindCoordinator creates the offsets topic.

Markers go through the coordinator's ``TransactionMarkerChannel``: written here to the
partitions this broker leads (standalone: all of them), sent as WriteTxnMarkers to the
leaders of the others. Either way :func:`write_marker` does the leader's part: append the
marker, then wait until the ISR has it (acks=all: a marker the ISR lost in a failover would
leave the partition's transaction open forever).

Thread-safety: none; everything here runs on the broker's event loop (ZooKeeper calls
through ``ctx.off_loop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from sluice.broker.cluster.topic_metadata import TopicExistsError
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import CommittedOffset, OffsetCommitFailedError
from sluice.broker.log.errors import InvalidProducerEpochError, StorageError
from sluice.broker.log.log import Log
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.partition import Partition
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import code_for
from sluice.broker.transactions.coordinator import TopicPartitionKey, TransactionCoordinator
from sluice.broker.transactions.marker_channel import TransactionMarkerChannel, TxnMarker
from sluice.broker.transactions.transaction_log import TOPIC as TXN_TOPIC
from sluice.broker.transactions.transaction_state_manager import TransactionStateWriteError
from sluice.common.topic_partition import TopicPartition

STATE_WRITE_TIMEOUT_MS = 5_000
#: How long a leader waits for its ISR to have a marker (Kafka: the request timeout).
MARKER_WRITE_TIMEOUT_MS = 10_000


async def build_coordinator(ctx: BrokerContext) -> TransactionCoordinator:
    """Create ``__transaction_state`` if it does not exist, then build and start the
    coordinator over it. Raises ``MetadataUnavailableError`` when ZooKeeper is."""
    config = ctx.config.transactions
    cluster = ctx.cluster
    if cluster.get(TXN_TOPIC) is None:
        replication = min(config.state_log_replication_factor, len(cluster.brokers()))
        with contextlib.suppress(TopicExistsError):  # another broker created it meanwhile
            await ctx.off_loop(
                cluster.create_topic, TXN_TOPIC, config.state_log_num_partitions,
                max(replication, 1), {"cleanup.policy": "compact"}, internal=True,
            )  # fmt: skip
    info = cluster.get(TXN_TOPIC)
    partitions = info.partitions if info is not None else config.state_log_num_partitions
    coordinator = TransactionCoordinator(BrokerHost(ctx, partitions), config, partitions)
    await coordinator.start()
    return coordinator


class BrokerHost:
    """:class:`~sluice.broker.transactions.coordinator.CoordinatorHost` over a broker's
    context."""

    def __init__(self, ctx: BrokerContext, num_partitions: int) -> None:
        self.ctx = ctx
        self.num_partitions = num_partitions
        self.channel = TransactionMarkerChannel(BrokerRoutes(ctx), connector=ctx.replicas.connector)

    async def next_producer_id(self) -> int:
        return await self.ctx.off_loop(self.ctx.cluster.next_producer_id)

    async def append_state(self, partition: int, batch: bytes) -> None:
        result = await self.ctx.replicas.append(
            TXN_TOPIC, partition, batch, acks=-1, timeout_ms=STATE_WRITE_TIMEOUT_MS,
            min_insync_replicas=1,
        )  # fmt: skip
        if result.error != Errors.NONE:
            raise TransactionStateWriteError(
                f"{TXN_TOPIC}-{partition}: expected the record to be written, found "
                f"{result.error.name}: {result.message or ''}"
            )

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        return await self.channel.write(marker, partitions)

    def group_partition(self, group: str) -> TopicPartitionKey:
        return OFFSETS_TOPIC, self.ctx.offsets.partition_for(group)

    async def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int, int, str | None]]
    ) -> None:
        now = int(time.time() * 1000)
        try:
            await self.ctx.offsets.commit(
                group, [(t, p, CommittedOffset(o, e, m, now)) for t, p, o, e, m in offsets]
            )
        except OffsetCommitFailedError as exc:
            raise TransactionStateWriteError(str(exc)) from None

    def partition_exists(self, topic: str, partition: int) -> bool:
        info = self.ctx.cluster.get(topic)
        return info is not None and 0 <= partition < info.partitions

    def led_state_partitions(self) -> dict[int, tuple[Log, int]]:
        led = {}
        for partition in range(self.num_partitions):
            leading = self.ctx.replicas.leader_partition(TXN_TOPIC, partition)
            if leading is not None:
                led[partition] = (leading.log, leading.leader_epoch)
        return led


class BrokerRoutes:
    """:class:`~sluice.broker.transactions.marker_channel.MarkerRoutes` over a broker's
    context: leaders from its cluster view, local writes through :func:`write_marker`."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    @property
    def broker_id(self) -> int:
        return self.ctx.config.broker_id

    def leader(self, topic: str, partition: int) -> int | Errors:
        info = self.ctx.cluster.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if self.ctx.replicas.leader_partition(topic, partition) is not None:
            return self.broker_id
        state = self.ctx.cluster.partition_state(topic, partition)
        if state is None or state.leader < 0:
            return Errors.LEADER_NOT_AVAILABLE
        return state.leader

    def address(self, broker_id: int) -> tuple[str, int] | None:
        found = self.ctx.cluster.brokers().get(broker_id)
        return None if found is None else (found.host, found.port)

    async def write_local(
        self, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        codes = await asyncio.gather(
            *(write_marker(self.ctx, topic, p, marker) for topic, p in partitions)
        )
        return dict(zip(partitions, codes, strict=True))


async def write_marker(
    ctx: BrokerContext, topic: str, partition: int, marker: TxnMarker,
    timeout_ms: int = MARKER_WRITE_TIMEOUT_MS,
) -> Errors:  # fmt: skip
    """The leader's part of one marker: append it, wake the fetches waiting on it (the last
    stable offset may have moved), and answer once the ISR has it — NONE, or
    NOT_LEADER_OR_FOLLOWER if leadership moved meanwhile, REQUEST_TIMED_OUT if the ISR did
    not catch up within ``timeout_ms`` (the coordinator resends either way). In a
    ``__consumer_offsets`` partition, a replicated marker then commits or drops the producer's
    pending transactional offsets (see the module docstring)."""
    leading, error = ctx.replicas.leader_or_error(topic, partition)
    if leading is None:
        return error
    try:
        info = leading.log.append_marker(
            marker.producer_id, marker.producer_epoch, commit=marker.commit,
            coordinator_epoch=marker.coordinator_epoch, leader_epoch=leading.leader_epoch,
        )  # fmt: skip
    except InvalidProducerEpochError:
        # The partition already saw a newer epoch of this producer: a later transaction's
        # marker fenced this one there, so there is nothing left to end.
        return Errors.NONE
    except (StorageError, OSError) as exc:
        return code_for(exc)
    leading.maybe_advance_hw()
    ctx.purgatory.notify(TopicPartition(topic, partition))
    code = await _replicated(ctx, leading, info.last_offset + 1, timeout_ms)
    if code == Errors.NONE and topic == OFFSETS_TOPIC:
        # Kafka's handleTxnCompletion: only once the ISR has the marker (a reload finds it).
        ctx.offsets.complete_txn(partition, marker.producer_id, marker.commit)
    return code


async def _replicated(ctx: BrokerContext, leading: Partition, end: int, timeout_ms: int) -> Errors:
    """Wait until the partition's high watermark reaches ``end`` while this broker still
    leads it at the same epoch. (Polled: the replica manager's acks=all waiters serve
    ``append`` only, and a marker is appended by the log's own path.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    topic, partition = leading.tp.topic, leading.tp.partition
    epoch = leading.leader_epoch
    while not leading.committed(end):
        if (
            ctx.replicas.leader_partition(topic, partition) is not leading
            or leading.leader_epoch != epoch
        ):
            return Errors.NOT_LEADER_OR_FOLLOWER
        if loop.time() >= deadline:
            return Errors.REQUEST_TIMED_OUT
        await asyncio.sleep(0.01)
    return Errors.NONE
