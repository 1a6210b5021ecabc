"""ShareFetch (v1–2) and ShareAcknowledge (v1–2): records handed out to a share group's members
one acquisition at a time, and their acknowledgements (KIP-932).

A ShareFetch, in order:

1. its share session (``share_session_epoch``: 0 opens one, -1 closes it — such a request may
   only acknowledge —, otherwise the session's next epoch; ``ShareSession``), with the
   partitions it names added and ``forgotten_topics_data`` removed;
2. the acknowledgements it carries (piggybacked), applied per partition — an error there is
   the partition's ``acknowledge_error_code``, never the fetch's;
3. for each partition of the session that this broker leads: the share-partition's first
   AVAILABLE record (or its end) is read from the log as whole batches, and the records in
   them that may be handed out are acquired for the member for the lock duration
   (``SharePartition.acquire``), at most ``max_records`` in all. A share-partition whose state
   cannot be read from ``__share_group_state`` yet (the topic just created, its partition's
   leader moving) gives no records and **no error**, as Kafka's ``SharePartitionManager``
   answers a share-partition that is not initialized yet ("the fetch request will be retried
   in the next poll"): librdkafka's share consumer raises LEADER_NOT_AVAILABLE there to the
   application instead of retrying it;
4. if nothing was acquired and ``max_wait`` is not up, it waits for an append to one of its
   partitions, or a quarter second (records released or whose lock expired come back without
   an append, and a state not readable before is tried again), and tries again.

The answer carries each partition's record bytes (whole batches from the log; the client
keeps the offsets in ``acquired_records``) and acquired ranges with their delivery counts,
and ``acquisition_lock_timeout``. Records are read into memory rather than sent with
``sendfile``: at most one read per partition and ``max_bytes`` in all.

ShareAcknowledge applies acknowledgements the same way (epoch 0 is refused: a session must
exist), and -1 closes the session after applying them. After acknowledgements the
share-partitions' state is written and committed in ``__share_group_state``
(``ShareCoordinator.persist``, then ``flush``) before the answer.

Acknowledge types: 0 GAP and 3 REJECT archive, 1 ACCEPT acknowledges, 2 RELEASE makes the
record available again (archived once it has been delivered ``share.delivery.count.limit``
times), 4 RENEW (v2) extends the lock.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Iterable
from typing import Any

from sluice.broker.log.errors import OffsetOutOfRangeError
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond
from sluice.broker.server.share_access import is_coordinator, now_ms, share_partition
from sluice.broker.share.share_partition import InvalidRecordStateError, LogBatch
from sluice.broker.share.share_session import (
    FINAL_EPOCH,
    OPEN_EPOCH,
    InvalidShareSessionEpochError,
    ShareSession,
    ShareSessionLimitError,
    ShareSessionNotFoundError,
)
from sluice.broker.share.share_state_log import ShareStateUnavailableError
from sluice.common.topic_partition import TopicPartition

#: How long a waiting ShareFetch sleeps at most between two looks (module docstring, 4).
_RECHECK_S = 0.25
#: max_records when the client sends none.
_DEFAULT_MAX_RECORDS = 500
# A record batch's header: base offset (int64), batch length (int32), partition leader epoch
# (int32), magic (int8), crc (uint32), attributes (int16), last offset delta (int32).
_BATCH_HEADER = struct.Struct(">qiibIhi")
_CONTROL = 0x20


def _code(name: str) -> int:
    """A share error code once the registry has it (INVALID_RECORD_STATE 121,
    SHARE_SESSION_NOT_FOUND 122, INVALID_SHARE_SESSION_EPOCH 123,
    SHARE_SESSION_LIMIT_REACHED 133); until then INVALID_REQUEST,
    which the client reports the same way (the acknowledgement or fetch failed)."""
    return int(getattr(Errors, name, Errors.INVALID_REQUEST))


def batches(data: bytes) -> list[LogBatch]:
    """The complete record batches in ``data`` (a log read: whole batches, the last maybe
    cut by the size limit)."""
    out = []
    pos = 0
    while pos + _BATCH_HEADER.size <= len(data):
        base, length, _epoch, _magic, _crc, attributes, delta = _BATCH_HEADER.unpack_from(data, pos)
        if pos + 12 + length > len(data):
            break
        out.append(LogBatch(base, base + delta, bool(attributes & _CONTROL)))
        pos += 12 + length
    return out


def _names(ctx: BrokerContext) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in ctx.cluster.topics().items()}


def _session(ctx: BrokerContext, body: Any, *, fetch: bool) -> ShareSession | int:
    """The request's session, or the top-level error code."""
    epoch = body.share_session_epoch
    if epoch == FINAL_EPOCH:
        found = ctx.share.sessions.get((body.group_id, body.member_id))
        return found if found is not None else _code("SHARE_SESSION_NOT_FOUND")
    if epoch == OPEN_EPOCH and not fetch:
        return _code("INVALID_SHARE_SESSION_EPOCH")
    try:
        return ctx.share.session(body.group_id, body.member_id, epoch, now_ms())
    except ShareSessionLimitError:
        return _code("SHARE_SESSION_LIMIT_REACHED")
    except ShareSessionNotFoundError:
        return _code("SHARE_SESSION_NOT_FOUND")
    except InvalidShareSessionEpochError:
        return _code("INVALID_SHARE_SESSION_EPOCH")


def _leader(ctx: BrokerContext, topic: str, partition: int) -> dict[str, int]:
    leading, _ = ctx.replicas.leader_or_error(topic, partition)
    if leading is None:
        state = ctx.cluster.partition_state(topic, partition)
        return {"leader_id": state.leader if state else -1,
                "leader_epoch": state.leader_epoch if state else -1}  # fmt: skip
    return {"leader_id": ctx.config.broker_id, "leader_epoch": leading.leader_epoch}


async def _acknowledge(
    ctx: BrokerContext, body: Any, topics: Iterable[Any], names: dict[uuid.UUID, str]
) -> dict[tuple[str, int], int]:
    """Apply the acknowledgements in ``topics``; (topic, partition) -> error code. Writes
    the state of the share-partitions that changed and waits until it is committed; if it
    cannot be, their code is COORDINATOR_NOT_AVAILABLE (the client sees the acknowledgement
    fail; the state is written again with the next write)."""
    results: dict[tuple[str, int], int] = {}
    changed = []
    for t in topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            if name is None:
                results[(str(t.topic_id), p.partition_index)] = Errors.UNKNOWN_TOPIC_ID
                continue
            key = (name, p.partition_index)
            sp = await share_partition(ctx, body.group_id, name, p.partition_index)
            if isinstance(sp, int):
                results[key] = sp
                continue
            acks = [(b.first_offset, b.last_offset, b.acknowledge_types)
                    for b in p.acknowledgement_batches]  # fmt: skip
            try:
                ctx.share.acknowledge(body.group_id, body.member_id, sp, acks)
                results[key] = Errors.NONE
            except (InvalidRecordStateError, ValueError):
                results[key] = _code("INVALID_RECORD_STATE")
            changed.append(key)
    ctx.share.persist(body.group_id, changed)
    try:
        await ctx.share.flush()
    except ShareStateUnavailableError:
        for key in changed:
            if results[key] == Errors.NONE:
                results[key] = Errors.COORDINATOR_NOT_AVAILABLE
    return results


async def _acquire(
    ctx: BrokerContext, body: Any, session: ShareSession, answers: dict[tuple[str, int], Any]
) -> int:
    """One pass over the session's partitions (module docstring, 3); how many acquired."""
    budget = body.max_records if body.max_records > 0 else _DEFAULT_MAX_RECORDS
    remaining = max(body.max_bytes, 0)
    acquired = 0
    for topic, partition in session.partitions:
        if budget <= 0 or remaining <= 0:
            break
        answer = answers.setdefault((topic, partition), {})
        if answer.get("acquired_records"):
            continue
        # One try: the wait below tries again until max_wait is up.
        sp = await share_partition(ctx, body.group_id, topic, partition, attempts=1)
        if sp == Errors.LEADER_NOT_AVAILABLE:
            continue  # the state is not readable yet: no records and no error (module doc, 3)
        if isinstance(sp, int):
            answer["error_code"] = sp
            continue
        leading, _ = ctx.replicas.leader_or_error(topic, partition)
        assert leading is not None  # share_partition checked, with no await since
        now = now_ms()
        offset = sp.next_fetch_offset(now)
        try:
            info = leading.log.read(offset, remaining, min_one_batch=acquired == 0)
        except OffsetOutOfRangeError:
            continue
        if info.slice is None:
            continue
        data = info.slice.read()
        ranges = sp.acquire(
            body.member_id, batches(data), high_watermark=info.high_watermark,
            max_records=budget, now_ms=now,
        )  # fmt: skip
        if not ranges:
            continue
        answer["records"] = data
        answer["acquired_records"] = [
            {"first_offset": r.first, "last_offset": r.last, "delivery_count": r.delivery_count}
            for r in ranges
        ]
        count = sum(r.last - r.first + 1 for r in ranges)
        acquired += count
        budget -= count
        remaining -= len(data)
        ctx.metrics.record_bytes_out(topic, len(data))
    return acquired


async def handle_share_fetch(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    names = _names(ctx)
    session = _session(ctx, body, fetch=True)
    if isinstance(session, int):
        return _fetch_error(request, session)
    # Membership is known only to the group's coordinator, and only since members last
    # heartbeated to it (it is not persisted): elsewhere, or before any heartbeat, the fetch
    # is served on the member's word, as the share-partition's leader cannot check it.
    group = ctx.share.groups.get(body.group_id)
    if (
        group is not None
        and group.members
        and body.member_id not in group.members
        and is_coordinator(ctx, body.group_id)
    ):
        return _fetch_error(request, Errors.UNKNOWN_MEMBER_ID)
    for t in body.forgotten_topics_data:
        for p in t.partitions:
            session.partitions.pop((names.get(t.topic_id, ""), p), None)
    answers: dict[tuple[str, int], dict[str, Any]] = {}
    for t in body.topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            if name is None:
                answers[(str(t.topic_id), p.partition_index)] = {
                    "error_code": Errors.UNKNOWN_TOPIC_ID
                }
            elif body.share_session_epoch != FINAL_EPOCH:
                session.partitions.setdefault((name, p.partition_index))
    for key, code in (await _acknowledge(ctx, body, body.topics, names)).items():
        answers.setdefault(key, {})["acknowledge_error_code"] = code
    if body.share_session_epoch == FINAL_EPOCH:
        ctx.share.close_session(body.group_id, body.member_id)
    elif not getattr(body, "is_renew_ack", False):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ms(body.max_wait) / 1000
        while not await _acquire(ctx, body, session, answers):
            left = deadline - loop.time()
            if left <= 0 or any(a.get("error_code") for a in answers.values()):
                break
            await ctx.purgatory.wait(
                [TopicPartition(t, p) for t, p in session.partitions], min(left, _RECHECK_S)
            )
    return _fetch_response(ctx, request, answers, names)


def _fetch_error(request: Request, code: int) -> bytes:
    return respond(request, {
        "throttle_time": 0, "error_code": code, "acquisition_lock_timeout": 0,
        "responses": [], "node_endpoints": [],
    })  # fmt: skip


def _fetch_response(
    ctx: BrokerContext,
    request: Request,
    answers: dict[tuple[str, int], dict[str, Any]],
    names: dict[uuid.UUID, str],
) -> bytes:
    ids = {name: topic_id for topic_id, name in names.items()}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), answer in answers.items():
        if not answer:
            continue
        topics.setdefault(topic, []).append({
            "partition_index": partition,
            "error_code": answer.get("error_code", Errors.NONE),
            "acknowledge_error_code": answer.get("acknowledge_error_code", Errors.NONE),
            "current_leader": _leader(ctx, topic, partition) if topic in ids else
                              {"leader_id": -1, "leader_epoch": -1},
            "records": answer.get("records", b""),
            "acquired_records": answer.get("acquired_records", []),
        })  # fmt: skip
    return respond(request, {
        "throttle_time": 0, "error_code": Errors.NONE,
        "acquisition_lock_timeout": ctx.share.lock_ms,
        "responses": [
            {"topic_id": ids.get(topic) or uuid.UUID(topic), "partitions": partitions}
            for topic, partitions in topics.items()
        ],
        "node_endpoints": [],
    })  # fmt: skip


async def handle_share_acknowledge(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    names = _names(ctx)
    session = _session(ctx, body, fetch=False)
    if isinstance(session, int):
        return respond(request, {"throttle_time": 0, "error_code": session,
                                 "responses": [], "node_endpoints": []})  # fmt: skip
    results = await _acknowledge(ctx, body, body.topics, names)
    if body.share_session_epoch == FINAL_EPOCH:
        ctx.share.close_session(body.group_id, body.member_id)
    ids = {name: topic_id for topic_id, name in names.items()}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in results.items():
        topics.setdefault(topic, []).append({
            "partition_index": partition, "error_code": code,
            "current_leader": _leader(ctx, topic, partition) if topic in ids else
                              {"leader_id": -1, "leader_epoch": -1},
        })  # fmt: skip
    return respond(request, {
        "throttle_time": 0, "error_code": Errors.NONE,
        "responses": [
            {"topic_id": ids.get(topic) or uuid.UUID(topic), "partitions": partitions}
            for topic, partitions in topics.items()
        ],
        "node_endpoints": [],
    })  # fmt: skip
