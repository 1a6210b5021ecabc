"""Fetch (v4–11; v0–3 arrive up-converted to v4 and their responses are down-converted to
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

Sessions (KIP-227): Sluice answers with session id 0, "no session", so clients keep sending
full fetch requests; librdkafka never opens sessions anyway.

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
from sluice.common.topic_partition import TopicPartition


def _refused(ctx: BrokerContext, body: Any) -> set[str]:
    """The topics the fetch may not read (TOPIC_AUTHORIZATION_FAILED): for a follower all
    of them unless it has CLUSTER_ACTION on the cluster, for a consumer those without READ
    (KafkaApis.handleFetchRequest)."""
    if ctx.authorizer is None:
        return set()
    names = {t.topic for t in body.topics}
    if body.replica_id >= 0:
        return set() if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION) else names
    return {n for n in names if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, n)}


def _read_all(
    ctx: BrokerContext, request: Request, refused: set[str], *, first: bool
) -> tuple[list[FetchTopic], int, bool]:
    """Read every partition of the request. ``first``: this is the read on the request's
    arrival, the only one that records a follower's position (a re-read after a long-poll
    wait must not: the ISR may have changed meanwhile, and a follower that has since died or
    been dropped would be put back with the position it had half a second ago)."""
    body = request.body
    read_committed = getattr(body, "isolation_level", 0) == 1 and body.replica_id < 0
    upper = "log_end" if body.replica_id >= 0 else "high_watermark"
    if read_committed:
        upper = "last_stable"
    remaining = max(body.max_bytes, 0)
    total = 0
    has_error = False
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            out = FetchPartition(partition_index=p.partition, records=b"")
            partitions.append(out)
            if t.topic in refused:
                out.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                has_error = True
                continue
            leading, error = ctx.replicas.leader_or_error(t.topic, p.partition)
            if leading is not None:
                error = _check_leader_epoch(leading, p)
            if error == Errors.NONE and body.replica_id >= 0 and first:
                # A follower: its fetch offset is its log end; the leader's HW may move.
                error = ctx.replicas.record_follower_fetch(
                    body.replica_id, t.topic, p.partition, p.fetch_offset
                )
            if leading is None or error != Errors.NONE:
                out.error_code = error
                has_error = True
                continue
            partition_log = leading.log
            limit = min(p.partition_max_bytes, remaining)
            try:
                info = partition_log.read(
                    p.fetch_offset,
                    max(limit, 0),
                    upper_bound=upper,
                    min_one_batch=total == 0,
                )
            except OffsetOutOfRangeError as exc:
                out.error_code = code_for(exc)
                has_error = True
                info = None
            out.high_watermark = partition_log.high_watermark
            lso = partition_log.last_stable_offset
            out.last_stable_offset = lso
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
                total += info.size
                remaining -= info.size
        topics.append(FetchTopic(topic=t.topic, partitions=partitions))
    return topics, total, has_error


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
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(body.max_wait) / 1000
    watched = [TopicPartition(t.topic, p.partition) for t in body.topics for p in t.partitions]
    first = True
    refused = _refused(ctx, body)
    while True:
        topics, total, has_error = _read_all(ctx, request, refused, first=first)
        first = False
        if total >= body.min_bytes or has_error or total >= body.max_bytes:
            break
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        if not await ctx.purgatory.wait(watched, remaining):
            topics, total, has_error = _read_all(ctx, request, refused, first=False)
            break
    for topic in topics:
        sent = sum(p.records.size for p in topic.partitions if isinstance(p.records, FileSlice))
        if sent:
            ctx.metrics.record_bytes_out(topic.topic, sent)
    return encode_fetch_response(request.header, topics, session_id=0)
