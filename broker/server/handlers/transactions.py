"""The transaction APIs (KIP-98): InitProducerId with a transactional id (v0–4),
FindCoordinator for transactions (key type 1), AddPartitionsToTxn (v0–3), AddOffsetsToTxn
(v0–3), EndTxn (v0–3), TxnOffsetCommit (v0–3) and WriteTxnMarkers (v1).

The coordinator (``sluice.broker.transactions.coordinator``) is one per broker. Until the
broker builds it at startup (see ``attach_coordinator``) it is built on the first request
that needs it: any of these APIs, and — where ``__transaction_state`` exists — a
``read_committed`` Fetch or ListOffsets (``attach_coordinator_if_used``), so that, after a
restart, the transactions left open are resolved (Prepare* finished, timeouts run) before a
``read_committed`` reader waits on them. Building it creates ``__transaction_state``
(compacted; ``transaction.state.log.num.partitions``, replication min(3, live brokers)) as
the first FindCoordinator creates the offsets topic; a reader never does (see
``attach_coordinator_if_used``).

Markers go through the coordinator's ``TransactionMarkerChannel``: written here to the
partitions this broker leads (standalone: all of them), sent as WriteTxnMarkers to the
leaders of the others. Either way :func:`write_marker` does the leader's part: append the
marker, then wait until the ISR has it (acks=all: a marker the ISR lost in a failover would
leave the partition's transaction open forever).

Transactional offsets are durable as in Kafka: TxnOffsetCommit, at the group's coordinator,
appends them to the group's ``__consumer_offsets`` partition as a transactional batch of the
producer (acks=all, ``offsets.commit.timeout.ms``) and the offset store holds them as pending;
the marker is appended there like anywhere else, and once the ISR has it the offset store
commits or drops them (``OffsetStore.complete_txn``). A coordinator that loads the partition
— after a restart, or a failover to another broker — rebuilds the pending offsets and applies
the markers from the log, so a group coordinator that dies between TxnOffsetCommit and the
marker loses nothing: the transaction's coordinator resends the marker to the new leader.

A fenced producer gets PRODUCER_FENCED from the request versions of KIP-588 on, and
INVALID_PRODUCER_EPOCH from older ones (Kafka's rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Sequence
from typing import Any

from sluice.broker.cluster.topic_metadata import MetadataUnavailableError, TopicExistsError
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import CommittedOffset, OffsetCommitFailedError
from sluice.broker.log.errors import InvalidProducerEpochError, StorageError
from sluice.broker.log.log import Log
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.partition import Partition
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext, client_endpoint
from sluice.broker.server.error_mapping import code_for, coordinator_code_for
from sluice.broker.server.handlers import offsets, produce
from sluice.broker.server.responses import respond
from sluice.broker.transactions.coordinator import TopicPartitionKey, TransactionCoordinator
from sluice.broker.transactions.marker_channel import TransactionMarkerChannel, TxnMarker
from sluice.broker.transactions.transaction_config import TransactionConfig
from sluice.broker.transactions.transaction_log import TOPIC as TXN_TOPIC
from sluice.broker.transactions.transaction_log import partition_for
from sluice.broker.transactions.transaction_state_manager import TransactionStateWriteError
from sluice.common.topic_partition import TopicPartition

STATE_WRITE_TIMEOUT_MS = 5_000
#: How long a leader waits for its ISR to have a marker (Kafka: the request timeout).
MARKER_WRITE_TIMEOUT_MS = 10_000
TRANSACTION_KEY_TYPE = 1

# -- the coordinator of each broker --------------------------------------------------------


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


_coordinators: weakref.WeakKeyDictionary[Any, asyncio.Task[TransactionCoordinator]] = (
    weakref.WeakKeyDictionary()
)


def transaction_config(ctx: BrokerContext) -> TransactionConfig:
    """The broker's ``transaction.*`` settings (defaults until ``BrokerConfig`` holds them)."""
    config = getattr(ctx.config, "transactions", None)
    return config if isinstance(config, TransactionConfig) else TransactionConfig()


async def _build(ctx: BrokerContext) -> TransactionCoordinator:
    config = transaction_config(ctx)
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


async def attach_coordinator(ctx: BrokerContext) -> TransactionCoordinator:
    """The broker's transaction coordinator, built and started on the first call."""
    task = _coordinators.get(ctx)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = asyncio.get_running_loop().create_task(_build(ctx))
        _coordinators[ctx] = task
    return await asyncio.shield(task)


async def attach_coordinator_if_used(ctx: BrokerContext) -> None:
    """For a ``read_committed`` read: the coordinator, built if transactions were ever used
    in the cluster (``__transaction_state`` exists), so that those a restart left open get
    resolved before the reader waits on them. Without that topic no transaction can be open
    (InitProducerId with a transactional id creates it before any transaction begins), so a
    reader must not create it: librdkafka reads ``read_committed`` by default, and creating
    the topic's partitions (50 by default) held a standalone broker's event loop, where topic
    creation runs inline, for 0.3-0.4 s on its first consumer, every connection waiting."""
    if ctx.cluster.get(TXN_TOPIC) is not None:
        await attach_coordinator(ctx)


def detach_coordinator(ctx: BrokerContext) -> None:
    """Stop the broker's coordinator (its background task), if it was built."""
    task = _coordinators.pop(ctx, None)
    if task is not None and task.done() and not task.cancelled() and task.exception() is None:
        task.result().close()


# -- handlers -------------------------------------------------------------------------------


def _fenced(code: Errors, request: Request, first_version: int) -> Errors:
    """KIP-588: PRODUCER_FENCED only for versions >= ``first_version``."""
    if code == Errors.PRODUCER_FENCED and request.api_version < first_version:
        return Errors.INVALID_PRODUCER_EPOCH
    return code


def _txn_writable(ctx: BrokerContext, transactional_id: str) -> bool:
    """KafkaApis: every transactional request needs WRITE on its transactional id."""
    return allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if body.transactional_id is None:
        return await produce.handle_init_producer_id(ctx, request)
    if not _txn_writable(ctx, body.transactional_id):
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "producer_id": -1, "producer_epoch": -1,
        })  # fmt: skip
    try:
        coordinator = await attach_coordinator(ctx)
    except MetadataUnavailableError as exc:
        code, pid, epoch = coordinator_code_for(exc), -1, -1
    else:
        code, pid, epoch = await coordinator.init_producer_id(
            body.transactional_id,
            ms(body.transaction_timeout),
            getattr(body, "producer_id", -1),
            getattr(body, "producer_epoch", -1),
        )
    return respond(
        request,
        {"throttle_time": 0, "error_code": _fenced(code, request, 4), "producer_id": pid,
         "producer_epoch": epoch},
    )  # fmt: skip


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> bytes:
    if getattr(request.body, "key_type", 0) != TRANSACTION_KEY_TYPE:
        return await offsets.handle_find_coordinator(ctx, request)
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.body.key):
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "error_message": None, "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    found = None
    endpoint: tuple[str, int] | None = None
    try:
        coordinator = await attach_coordinator(ctx)
        partition = partition_for(request.body.key, coordinator.state.num_partitions)
        state = ctx.cluster.partition_state(TXN_TOPIC, partition)
        if state is not None and state.leader >= 0:
            found = ctx.cluster.brokers().get(state.leader)
        endpoint = None if found is None else client_endpoint(found)
        if endpoint is None:
            found = None  # no leader yet, or one without the client's listener
        error = Errors.NONE if found is not None else Errors.COORDINATOR_NOT_AVAILABLE
    except MetadataUnavailableError as exc:
        error = coordinator_code_for(exc)
    if found is None:
        return respond(request, {
            "throttle_time": 0, "error_code": error,
            "error_message": "the transactional id's state partition has no leader yet",
            "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    assert endpoint is not None  # found only with an endpoint
    return respond(
        request,
        {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
         "node_id": found.broker_id, "host": endpoint[0], "port": endpoint[1]},
    )  # fmt: skip


async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body  # v0-3: the client's request (v4+ batches are broker-to-broker)
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    results = _add_partitions_refusal(ctx, body.v3_and_below_transactional_id, wanted)
    if results is None:
        coordinator = await attach_coordinator(ctx)
        results = await coordinator.add_partitions(
            body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, wanted,
        )  # fmt: skip
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": _fenced(code, request, 2)}
        )
    out = [{"name": t, "results_by_partition": r} for t, r in by_topic.items()]
    return respond(request, {"throttle_time": 0, "results_by_topic_v3_and_below": out})


def _add_partitions_refusal(
    ctx: BrokerContext, transactional_id: str, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], Errors] | None:
    """KafkaApis: without WRITE on the transactional id every partition is refused; with a
    topic not writable, or unknown, nothing is added (the others OPERATION_NOT_ATTEMPTED)."""
    if ctx.authorizer is None:
        return None
    if not _txn_writable(ctx, transactional_id):
        return dict.fromkeys(wanted, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused = {t for t, _ in wanted if not allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, t)}
    if not refused:
        return None
    return {
        (t, p): Errors.TOPIC_AUTHORIZATION_FAILED if t in refused
        else Errors.OPERATION_NOT_ATTEMPTED
        for t, p in wanted
    }  # fmt: skip


async def handle_add_offsets_to_txn(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not _txn_writable(ctx, body.transactional_id):
        code = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return respond(request, {"throttle_time": 0, "error_code": code})
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return respond(
            request, {"throttle_time": 0, "error_code": Errors.GROUP_AUTHORIZATION_FAILED}
        )
    coordinator = await attach_coordinator(ctx)
    code = await coordinator.add_offsets(
        body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
    )
    return respond(request, {"throttle_time": 0, "error_code": _fenced(code, request, 2)})


async def handle_end_txn(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not _txn_writable(ctx, body.transactional_id):
        code = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return respond(request, {"throttle_time": 0, "error_code": code})
    coordinator = await attach_coordinator(ctx)
    code = await coordinator.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed
    )
    return respond(request, {"throttle_time": 0, "error_code": _fenced(code, request, 2)})


async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    coordinator = await attach_coordinator(ctx)
    group_error = Errors.NONE
    if not _txn_writable(ctx, body.transactional_id):
        group_error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        group_error = Errors.GROUP_AUTHORIZATION_FAILED
    elif not ctx.offsets.coordinates(body.group_id):
        group_error = Errors.NOT_COORDINATOR
    elif getattr(body, "generation_id", -1) >= 0:
        group_error = ctx.groups.validate_commit(body.group_id, body.generation_id, body.member_id)
    accepted = []
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            code = group_error
            info = ctx.cluster.get(t.name)
            if code == Errors.NONE and not allowed(
                ctx, AclOperation.READ, ResourceType.TOPIC, t.name
            ):
                code = Errors.TOPIC_AUTHORIZATION_FAILED
            elif code == Errors.NONE and (
                info is None or not 0 <= p.partition_index < info.partitions
            ):
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif code == Errors.NONE:
                epoch = getattr(p, "committed_leader_epoch", -1)
                accepted.append(
                    (t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata)
                )
            partitions.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": partitions})
    if group_error == Errors.NONE:
        code = coordinator.txn_offset_commit(
            body.transactional_id, body.group_id, body.producer_id, body.producer_epoch, accepted
        )
        if code in (Errors.NONE, Errors.NOT_COORDINATOR):
            # NOT_COORDINATOR: the transaction's coordinator is another broker. Either way the
            # group's coordinator (this broker) makes the offsets durable in the transaction.
            code = await _append_txn_offsets(
                ctx, body.group_id, body.producer_id, body.producer_epoch, accepted
            )
        if code == Errors.PRODUCER_FENCED:
            code = Errors.INVALID_PRODUCER_EPOCH
        for topic in topics:
            for p in topic["partitions"]:
                if p["error_code"] == Errors.NONE:
                    p["error_code"] = code
    return respond(request, {"throttle_time": 0, "topics": topics})


async def _append_txn_offsets(
    ctx: BrokerContext, group: str, producer_id: int, producer_epoch: int,
    offsets: Sequence[tuple[str, int, int, int, str | None]],
) -> Errors:  # fmt: skip
    """Append the offsets to the group's partition as a transactional batch of the producer
    (acks=all) and hold them as pending there (``OffsetStore.commit_txn``)."""
    now = int(time.time() * 1000)
    partition = ctx.offsets.partition_for(group)
    leading = ctx.replicas.leader_partition(OFFSETS_TOPIC, partition)
    if leading is None:
        return Errors.NOT_COORDINATOR
    try:
        await ctx.offsets.commit_txn(
            group, producer_id, producer_epoch,
            [(t, p, CommittedOffset(o, e, m, now)) for t, p, o, e, m in offsets],
        )  # fmt: skip
    except InvalidProducerEpochError:
        return Errors.PRODUCER_FENCED
    except OffsetCommitFailedError as exc:
        return coordinator_code_for(exc)
    except (StorageError, OSError) as exc:
        return code_for(exc)
    return Errors.NONE


async def handle_write_txn_markers(ctx: BrokerContext, request: Request) -> bytes:
    """Every partition of every marker written concurrently (each waits for its ISR)."""
    markers = []
    for m in request.body.markers:
        marker = TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result,
                           m.coordinator_epoch)  # fmt: skip
        wanted = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes = await asyncio.gather(*(write_marker(ctx, t, p, marker) for t, p in wanted))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), code in zip(wanted, codes, strict=True):
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "error_code": code}
            )
        topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        markers.append({"producer_id": m.producer_id, "topics": topics})
    return respond(request, {"markers": markers})
