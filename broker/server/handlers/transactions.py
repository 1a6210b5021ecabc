"""The transaction APIs (KIP-98): InitProducerId (v0–4; an idempotent producer's id without
a transactional id, a transactional producer's from the coordinator with one),
AddPartitionsToTxn (v0–3), AddOffsetsToTxn (v0–3), EndTxn (v0–3), TxnOffsetCommit (v0–3)
and WriteTxnMarkers (v1). FindCoordinator for transactions is ``find_coordinator``'s.

The coordinator (``sluice.broker.transactions.coordinator``) is one per broker, reached as
``ctx.transactions`` (``sluice.broker.server.lazy_transaction_coordinator``): built on the
first request that needs it, and by the broker at start where ``__transaction_state``
exists. Its host on the broker — state writes, marker routes, :func:`write_marker` — is
``sluice.broker.server.transaction_host``.

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
import time
from collections.abc import Sequence
from typing import Any

from sluice.broker.cluster.topic_metadata import MetadataUnavailableError
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import CommittedOffset, OffsetCommitFailedError
from sluice.broker.log.errors import InvalidProducerEpochError, StorageError
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, allowed_any, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import code_for, coordinator_code_for
from sluice.broker.server.responses import respond
from sluice.broker.server.transaction_host import write_marker
from sluice.broker.transactions.marker_channel import TxnMarker


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
        return await _init_idempotent_producer_id(ctx, request)
    if not _txn_writable(ctx, body.transactional_id):
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "producer_id": -1, "producer_epoch": -1,
        })  # fmt: skip
    try:
        coordinator = await ctx.transactions.get()
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


async def _init_idempotent_producer_id(ctx: BrokerContext, request: Request) -> bytes:
    """InitProducerId without a transactional id: a new producer id at epoch 0."""
    # KafkaApis (Kafka 3, KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
    if not cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) and not allowed_any(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return respond(
            request,
            {"throttle_time": 0, "error_code": Errors.CLUSTER_AUTHORIZATION_FAILED,
             "producer_id": -1, "producer_epoch": -1},
        )  # fmt: skip
    try:
        producer_id = await ctx.off_loop(ctx.cluster.next_producer_id)
    except MetadataUnavailableError as exc:
        return respond(
            request,
            {"throttle_time": 0, "error_code": coordinator_code_for(exc), "producer_id": -1,
             "producer_epoch": -1},
        )  # fmt: skip
    return respond(
        request,
        {"throttle_time": 0, "error_code": Errors.NONE, "producer_id": producer_id,
         "producer_epoch": 0},
    )  # fmt: skip


async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body  # v0-3: the client's request (v4+ batches are broker-to-broker)
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    results = _add_partitions_refusal(ctx, body.v3_and_below_transactional_id, wanted)
    if results is None:
        coordinator = await ctx.transactions.get()
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
    coordinator = await ctx.transactions.get()
    code = await coordinator.add_offsets(
        body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
    )
    return respond(request, {"throttle_time": 0, "error_code": _fenced(code, request, 2)})


async def handle_end_txn(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not _txn_writable(ctx, body.transactional_id):
        code = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return respond(request, {"throttle_time": 0, "error_code": code})
    coordinator = await ctx.transactions.get()
    code = await coordinator.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed
    )
    return respond(request, {"throttle_time": 0, "error_code": _fenced(code, request, 2)})


async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    coordinator = await ctx.transactions.get()
    group_error = Errors.NONE
    if not _txn_writable(ctx, body.transactional_id):
        group_error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        group_error = Errors.GROUP_AUTHORIZATION_FAILED
    elif not ctx.offsets.coordinates(body.group_id):
        group_error = Errors.NOT_COORDINATOR
    else:
        # Kafka's validateOffsetCommit(isTransactional = true): member, then generation.
        group_error = ctx.groups.validate_commit(
            body.group_id,
            getattr(body, "generation_id", -1),
            getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None),
            transactional=True,
        )
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
