"""Fetch (v4–12; v0–3 arrive up-converted to v4 and their responses are down-converted to
message sets of magic 0/1 by ``sluice.broker.protocol.fetch_response``), with long polling and
zero-copy record bytes.

Every partition is read as a slice of whole batches of its segment file; the response is
encoded around the slices (``encode_fetch_response``) and the server sends them with
``sendfile``. The first partition that has data may exceed ``max_bytes`` by one batch (so a
batch larger than the limit still gets through, as KIP-74); the rest share what is left.

If the response would hold less than ``min_bytes`` and ``max_wait`` is not up, the fetch waits
in the purgatory until an append to one of its partitions, then reads again.

Each partition is read from its leader only (``ctx.replicas.leader_or_error``), after the
KIP-320 leader-epoch check; a follower's fetch (``replica_id >= 0``) reads up to the log end
and records the follower's position, which may move the high watermark.

Diverging epochs (KIP-320, Fetch v12+): a fetch that names the epoch of the last record it
fetched (``last_fetched_epoch``) is checked against this log's epochs first, as Kafka's
``Partition.readRecords`` does. Where that epoch (or the largest before it) ended before the
fetch offset, or a smaller epoch is all this log has, the log diverged from what the client
read: the partition is answered at once with no records and ``diverging_epoch`` = (that epoch,
its end offset), and the client truncates there. An epoch older than this log's first is
placed at the first epoch's start (``LeaderEpochCache.end_offset_for``); an epoch this log
cannot place, or a fetch offset below the log start, is OFFSET_OUT_OF_RANGE.

Sessions (KIP-227, ``sluice.broker.server.fetch_session``): a request with epoch 0 opens a
session and is answered with its id; later requests in it name only what changed, and are
answered with only the partitions that have something new (records, an error, a moved high
watermark, last stable or log start offset). Such a fetch reads the partitions it names and
those the session has marked changed since they were last at rest — not every partition it
follows — and waits on its session, which every append, high-watermark move and role change of
one of its partitions wakes. The replica fetchers use sessions; librdkafka (up to 2.14) never
opens one (it sends session id 0, epoch -1), kafka-python and the Java client do.

A follower's session also renews, once per ``_TOUCH_MS`` (at most an eighth of
``replica.lag.time.max.ms``), the caught-up time of the partitions its fetches did not read:
each was at rest at the leader's log end when last read and nothing was appended since, so
its follower is still caught up, as Kafka records on every fetch. A partition whose log start
or high watermark moved without a notification (retention moves the log start) is marked
changed then, so the follower follows it.

Isolation (KIP-98): every answer carries the partition's last stable offset. A
``read_committed`` fetch (``isolation_level`` 1) reads only up to it, and gets the aborted
transactions overlapping what it may read (``aborted_transactions``, from the transaction
indexes), so the client drops their batches; ``read_uncommitted`` gets null there. The first
``read_committed`` fetch starts the transaction coordinator if nothing has yet and
transactions were ever used (``ctx.transactions.get_if_used``), so transactions left open by a
restart get resolved; on a broker that never saw one it creates nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sluice.broker.log.errors import OffsetOutOfRangeError
from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse, FetchPartition, FetchTopic, Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.protocol.fetch_response import encode_fetch_response
from sluice.broker.replication.partition import Partition
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import code_for
from sluice.broker.server.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    ContextKind,
    FetchSession,
)
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: At most how often (ms) a follower's session renews its unread partitions' caught-up time.
_TOUCH_MS = 1000.0


def _refused(ctx: BrokerContext, replica_id: int, names: Iterable[str]) -> set[str]:
    """The topics the fetch may not read (TOPIC_AUTHORIZATION_FAILED): for a follower all
    of them unless it has CLUSTER_ACTION on the cluster, for a consumer those without READ
    (KafkaApis.handleFetchRequest). ``names`` is consumed only with an authorizer."""
    if ctx.authorizer is None:
        return set()
    topics = set(names)
    if replica_id >= 0:
        return set() if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION) else topics
    return {n for n in topics if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, n)}


def _requested(body: Any) -> list[CachedPartition]:
    return [
        CachedPartition(
            TopicPartition(t.topic, p.partition),
            p.fetch_offset,
            p.partition_max_bytes,
            getattr(p, "current_leader_epoch", -1),
            getattr(p, "log_start_offset", -1),
            getattr(p, "last_fetched_epoch", -1),
        )  # fmt: skip
        for t in body.topics
        for p in t.partitions
    ]


def _forgotten(body: Any) -> list[TopicPartition]:
    return [
        TopicPartition(t.topic, p)
        for t in getattr(body, "forgotten_topics_data", ()) or ()
        for p in t.partitions
    ]


@dataclass
class _Read:
    """One pass over some partitions of a fetch: what each answered, and whether it is at
    rest (no error, fetch offset at the end of what this fetch may read)."""

    answers: dict[TopicPartition, FetchPartition] = field(default_factory=dict)
    at_rest: dict[TopicPartition, bool] = field(default_factory=dict)
    total: int = 0
    has_error: bool = False
    diverged: bool = False  # a partition answered with a diverging epoch: answer at once


def _read_all(
    ctx: BrokerContext,
    body: Any,
    partitions: Iterable[CachedPartition],
    refused: set[str],
    *,
    first: bool,
) -> _Read:
    """Read ``partitions``. ``first``: this is the read on the request's arrival, the only
    one that records a follower's position (a re-read after a long-poll wait must not: the
    ISR may have changed meanwhile, and a follower that has since died or been dropped would
    be put back with the position it had half a second ago)."""
    read_committed = getattr(body, "isolation_level", 0) == 1 and body.replica_id < 0
    upper = "log_end" if body.replica_id >= 0 else "high_watermark"
    if read_committed:
        upper = "last_stable"
    remaining = max(body.max_bytes, 0)
    result = _Read()
    for p in partitions:
        tp = p.tp
        out = FetchPartition(partition_index=tp.partition, records=b"")
        result.answers[tp] = out
        result.at_rest[tp] = False
        if tp.topic in refused:
            out.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
            result.has_error = True
            continue
        leading, error = ctx.replicas.leader_or_error(tp.topic, tp.partition)
        if leading is not None:
            error = _check_leader_epoch(leading, p)
        if leading is not None and error == Errors.NONE and body.replica_id >= 0 and first:
            # A follower: its fetch offset is its log end; the leader's HW may move.
            error = ctx.replicas.follower_fetched(leading, body.replica_id, p.fetch_offset)
        if leading is None or error != Errors.NONE:
            out.error_code = error
            result.has_error = True
            continue
        partition_log = leading.log
        diverging = _diverging_epoch(partition_log, p) if p.last_fetched_epoch >= 0 else None
        limit = min(p.max_bytes, remaining)
        info = None
        if isinstance(diverging, tuple):
            out.diverging_epoch = diverging
            result.diverged = True
        elif diverging is not None:
            out.error_code = diverging
            result.has_error = True
        else:
            try:
                info = partition_log.read(
                    p.fetch_offset, max(limit, 0), upper_bound=upper,
                    min_one_batch=result.total == 0,
                )  # fmt: skip
            except OffsetOutOfRangeError as exc:
                out.error_code = code_for(exc)
                result.has_error = True
        hw = out.high_watermark = partition_log.high_watermark
        lso = out.last_stable_offset = partition_log.last_stable_offset
        out.log_start_offset = partition_log.log_start_offset
        if read_committed and info is not None and info.slice is not None:
            out.aborted_transactions = [
                (txn.producer_id, txn.first_offset)
                for txn in partition_log.collect_aborted_transactions(p.fetch_offset, lso)
            ]
        elif read_committed:
            out.aborted_transactions = []
        if info is not None and info.slice is not None:
            out.records = info.slice
            result.total += info.size
            remaining -= info.size
        elif info is not None:
            end = {"log_end": partition_log.log_end_offset, "high_watermark": hw}.get(upper, lso)
            result.at_rest[tp] = p.fetch_offset >= end
    return result


def _diverging_epoch(partition_log: Any, p: CachedPartition) -> tuple[int, int] | Errors | None:
    """KIP-320 (module docstring): (epoch, end offset) where the log diverged from what the
    client fetched, OFFSET_OUT_OF_RANGE when this log cannot place its last fetched epoch or
    the fetch offset is below the log start (whether or not the epochs diverge, as Kafka's
    ``Partition.readRecords``), else None."""
    epoch, end_offset = partition_log.end_offset_for_epoch(p.last_fetched_epoch)
    if epoch < 0 or end_offset < 0 or p.fetch_offset < partition_log.log_start_offset:
        return Errors.OFFSET_OUT_OF_RANGE
    if epoch < p.last_fetched_epoch or end_offset < p.fetch_offset:
        return epoch, end_offset
    return None


def _check_leader_epoch(leading: Partition, p: Any) -> Errors:
    """KIP-320: a client that knows a newer epoch than ours talks to a stale leader
    (UNKNOWN_LEADER_EPOCH); one with an older epoch has stale metadata (FENCED_LEADER_EPOCH).
    -1 (or Fetch before v9) skips the check."""
    current = getattr(p, "current_leader_epoch", -1)
    if current < 0:
        return Errors.NONE
    if current < leading.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if current > leading.leader_epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    return Errors.NONE


async def handle_fetch(ctx: BrokerContext, request: Request) -> EncodedFetchResponse:
    body = request.body
    if getattr(body, "isolation_level", 0) == 1:
        await ctx.transactions.get_if_used()
    requested = _requested(body)
    context = ctx.purgatory.sessions.context(
        getattr(body, "session_id", INVALID_SESSION_ID),
        getattr(body, "session_epoch", FINAL_EPOCH),
        requested,
        _forgotten(body),
        privileged=body.replica_id >= 0,
    )
    if context.kind is ContextKind.ERROR:
        return encode_fetch_response(request.header, [], error_code=context.error)
    session_id = INVALID_SESSION_ID
    if context.kind is ContextKind.INCREMENTAL:
        assert context.session is not None
        answers = await _fetch_incremental(ctx, body, context.session, context.named)
        session_id = context.session.id
    else:
        read = await _fetch_full(ctx, body, requested)
        answers = [(cp.tp, read.answers[cp.tp]) for cp in requested]
        if context.kind is ContextKind.FULL:
            session_id = _open_session(ctx, body, requested, read)
    topics: dict[str, list[FetchPartition]] = {}
    for tp, out in answers:
        topics.setdefault(tp.topic, []).append(out)
    for topic, partitions in topics.items():
        sent = sum(p.records.size for p in partitions if isinstance(p.records, FileSlice))
        if sent:
            ctx.metrics.record_bytes_out(topic, sent)
    return encode_fetch_response(
        request.header,
        [FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        session_id=session_id,
    )


def _enough(body: Any, read: _Read) -> bool:
    return (
        read.total >= body.min_bytes
        or read.has_error
        or read.diverged
        or read.total >= body.max_bytes
    )


async def _fetch_full(ctx: BrokerContext, body: Any, requested: list[CachedPartition]) -> _Read:
    """A full fetch: every requested partition, waiting in the purgatory on each of them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(body.max_wait) / 1000
    refused = _refused(ctx, body.replica_id, (t.topic for t in body.topics))
    read = _read_all(ctx, body, requested, refused, first=True)
    waited = expired = False
    while not _enough(body, read):
        remaining = deadline - loop.time()
        if remaining <= 0:
            expired = waited
            break
        waited = True
        woken = await ctx.purgatory.wait([cp.tp for cp in requested], remaining)
        read = _read_all(ctx, body, requested, refused, first=False)
        if not woken:
            expired = True
            break
    _count_delayed(ctx, body, waited, expired)
    return read


def _count_delayed(ctx: BrokerContext, body: Any, waited: bool, expired: bool) -> None:
    """Count a follower's fetch that waited: completed by a change to its partitions (an
    append wakes it) or expired at ``max_wait`` (``ReplicaManager.follower_fetch_done``)."""
    if waited and body.replica_id >= 0:
        ctx.replicas.follower_fetch_done(expired=expired)


def _open_session(
    ctx: BrokerContext, body: Any, requested: list[CachedPartition], read: _Read
) -> int:
    """Open a session over a full fetch's partitions, recording what it answered (so the next
    incremental fetch answers only what changes); its id, or 0 if the cache has no slot."""
    for cp in requested:
        out = read.answers[cp.tp]
        cp.must_respond(
            has_records=False, error=out.error_code, hw=out.high_watermark,
            lso=out.last_stable_offset, log_start=out.log_start_offset,
        )  # fmt: skip
    session = ctx.purgatory.sessions.create(body.replica_id >= 0, requested)
    if session is None:
        return INVALID_SESSION_ID
    log.log(
        logging.INFO if body.replica_id >= 0 else logging.DEBUG,
        "fetch session %d opened for %s over %d partitions",
        session.id, f"follower {body.replica_id}" if body.replica_id >= 0 else "a consumer",
        len(requested),
    )  # fmt: skip
    session.dirty = {tp for tp, rest in read.at_rest.items() if not rest}
    session.touched_ms = _loop_ms()
    return session.id


def _loop_ms() -> float:
    return asyncio.get_running_loop().time() * 1000


async def _fetch_incremental(
    ctx: BrokerContext, body: Any, session: FetchSession, named: list[TopicPartition]
) -> list[tuple[TopicPartition, FetchPartition]]:
    """An incremental fetch: the partitions the request names and those changed since they
    were last at rest (module docstring); answers only those that must be."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(body.max_wait) / 1000
    answers: dict[TopicPartition, FetchPartition] = {}
    to_read = dict.fromkeys(named)
    first = True
    waited = expired = False
    while True:
        session.wake.clear()
        to_read.update(dict.fromkeys(sorted(session.dirty)))
        partitions = [cp for tp in to_read if (cp := session.partitions.get(tp)) is not None]
        refused = _refused(ctx, body.replica_id, (cp.tp.topic for cp in partitions))
        read = _read_all(ctx, body, partitions, refused, first=first)
        if first and body.replica_id >= 0:
            _touch_idle(ctx, body.replica_id, session, read)
        first = False
        answers.update(read.answers)
        for tp, rest in read.at_rest.items():
            if rest:
                session.dirty.discard(tp)
            else:
                session.dirty.add(tp)
        remaining = deadline - loop.time()
        if _enough(body, read) or session.id not in ctx.purgatory.sessions.sessions:
            break
        if remaining <= 0:
            expired = waited
            break
        # Wait for a change to one of the session's partitions; then read what changed.
        to_read = {}
        waited = True
        # asyncio.timeout, not wait_for: no task made around the wait (wait_for made one per
        # wait, a tenth of an incremental fetch's cost under a 1,500-partition round).
        try:
            async with asyncio.timeout(remaining):
                await session.wake.wait()
        except TimeoutError:
            if not session.wake.is_set():
                expired = True
                break
            # Woken as the time ran out: read what changed before answering.
    _count_delayed(ctx, body, waited, expired)
    out = []
    for tp, answer in answers.items():
        cp = session.partitions.get(tp)
        if cp is None:
            continue
        # A diverging epoch is news as records are.
        has_records = isinstance(answer.records, FileSlice) or answer.diverging_epoch is not None
        if cp.must_respond(
            has_records=has_records, error=answer.error_code, hw=answer.high_watermark,
            lso=answer.last_stable_offset, log_start=answer.log_start_offset,
        ):  # fmt: skip
            out.append((tp, answer))
    return out


def _touch_idle(ctx: BrokerContext, replica_id: int, session: FetchSession, read: _Read) -> None:
    """Renew the caught-up time of the follower's partitions this fetch did not read (module
    docstring), once per ``_TOUCH_MS`` or an eighth of ``replica.lag.time.max.ms``."""
    now = _loop_ms()
    if now - session.touched_ms < min(_TOUCH_MS, ctx.replicas.max_lag_ms / 8):
        return
    session.touched_ms = now
    replicas = ctx.replicas
    read_now = read.answers
    for tp, cp in session.partitions.items():
        if tp in read_now:
            continue
        leading = replicas.led(tp)  # by the session's own key: no TopicPartition made
        if leading is not None:
            replicas.follower_fetched(leading, replica_id, cp.fetch_offset)
        # What moved without a notification (retention's log start) is answered too.
        if (
            leading is None
            or leading.log.log_start_offset != cp.log_start
            or leading.log.high_watermark != cp.high_watermark
        ):
            session.dirty.add(tp)
            session.wake.set()
