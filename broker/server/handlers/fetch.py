"""Fetch (v4–11), with long polling and zero-copy record bytes.

Every partition is read as a slice of whole batches of its segment file; the response is
encoded around the slices (``encode_fetch_response``) and the server sends them with
``sendfile``. The first partition that has data may exceed ``max_bytes`` by one batch (so a
batch larger than the limit still gets through, as KIP-74); the rest share what is left.

If the response would hold less than ``min_bytes`` and ``max_wait`` is not up, the fetch waits
in the purgatory until an append to one of its partitions, then reads again.

Sessions (KIP-227): Sluice answers with session id 0, "no session", so clients keep sending
full fetch requests; librdkafka never opens sessions anyway.
Transactions are not supported, so the last stable offset is the high watermark.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sluice.broker.log.errors import OffsetOutOfRangeError
from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse, FetchPartition, FetchTopic, Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.fetch_response import encode_fetch_response
from sluice.broker.server import error_codes as ec
from sluice.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from sluice.broker.server.broker import Broker


def _read_all(
    broker: Broker, request: Request, *, first: bool
) -> tuple[list[FetchTopic], int, bool]:
    """Read every partition of the request. ``first``: this is the read on the request's
    arrival, the only one that records a follower's position (a re-read after a long-poll
    wait must not: the ISR may have changed meanwhile, and a follower that has since died or
    been dropped would be put back with the position it had half a second ago)."""
    body = request.body
    upper = "log_end" if body.replica_id >= 0 else "high_watermark"
    remaining = max(body.max_bytes, 0)
    total = 0
    has_error = False
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            out = FetchPartition(partition_index=p.partition, records=b"")
            partitions.append(out)
            partition_log, error = broker.leader_log(t.topic, p.partition)
            if partition_log is not None:
                error = _check_leader_epoch(broker, t.topic, p)
            if error == ec.NONE and body.replica_id >= 0 and broker.replicas is not None and first:
                # A follower: its fetch offset is its log end; the leader's HW may move.
                error = broker.replicas.record_follower_fetch(
                    body.replica_id, t.topic, p.partition, p.fetch_offset
                )
            if partition_log is None or error != ec.NONE:
                out.error_code = error
                has_error = True
                continue
            limit = min(p.partition_max_bytes, remaining)
            try:
                info = partition_log.read(
                    p.fetch_offset,
                    max(limit, 0),
                    upper_bound=upper,
                    min_one_batch=total == 0,
                )
            except OffsetOutOfRangeError:
                out.error_code = ec.OFFSET_OUT_OF_RANGE
                has_error = True
                info = None
            hw = partition_log.high_watermark
            out.high_watermark = hw
            out.last_stable_offset = hw
            out.log_start_offset = partition_log.log_start_offset
            if info is not None and info.slice is not None:
                out.records = info.slice
                total += info.size
                remaining -= info.size
        topics.append(FetchTopic(topic=t.topic, partitions=partitions))
    return topics, total, has_error


def _check_leader_epoch(broker: Broker, topic: str, p: Any) -> int:
    """KIP-320: a client that knows a newer epoch than ours talks to a stale leader
    (UNKNOWN_LEADER_EPOCH); one with an older epoch has stale metadata (FENCED_LEADER_EPOCH).
    -1 (or Fetch before v9) skips the check."""
    current = getattr(p, "current_leader_epoch", -1)
    if current < 0 or broker.replicas is None:
        return ec.NONE
    leading = broker.replicas.leader_partition(topic, p.partition)
    if leading is None:
        return ec.NOT_LEADER_OR_FOLLOWER
    if current < leading.leader_epoch:
        return ec.FENCED_LEADER_EPOCH
    if current > leading.leader_epoch:
        return ec.UNKNOWN_LEADER_EPOCH
    return ec.NONE


async def handle_fetch(broker: Broker, request: Request) -> EncodedFetchResponse:
    body = request.body
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(body.max_wait) / 1000
    watched = [TopicPartition(t.topic, p.partition) for t in body.topics for p in t.partitions]
    first = True
    while True:
        topics, total, has_error = _read_all(broker, request, first=first)
        first = False
        if total >= body.min_bytes or has_error or total >= body.max_bytes:
            break
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        if not await broker.purgatory.wait(watched, remaining):
            topics, total, has_error = _read_all(broker, request, first=False)
            break
    for topic in topics:
        sent = sum(p.records.size for p in topic.partitions if isinstance(p.records, FileSlice))
        if sent:
            broker.metrics.bytes_out.labels(topic.topic).inc(sent)
    return encode_fetch_response(request.header, topics, session_id=0)
