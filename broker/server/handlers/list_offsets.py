"""ListOffsets (v0–8): -1 latest (the high watermark; with ``read_committed``, v2+, the last
stable offset), -2 earliest (the log start offset), -3 max timestamp (v7, KIP-734: the first
record carrying the partition's largest timestamp, with that timestamp), -4 earliest local
(v8, KIP-405: the log start offset, as there is no tiered storage), otherwise the first offset
whose record timestamp is at or after the one asked, through the time index. A record found by
timestamp counts only below the high watermark (the last stable offset with
``read_committed``), as Kafka's ``Partition.fetchOffsetForTimestamp`` filters it; -1/-1 when
there is none. v6 is v5 in the flexible encoding. Answered by the partition's leader, with
its leader epoch (0 standalone).

v0 answers with a list of offsets, newest first, at most ``max_num_offsets`` (Kafka's
``fetchOffsetsBefore``): latest gives the high watermark then the segments' base offsets,
earliest the log start offset, a timestamp the base offsets of the segments whose records are
all older than it.

v1+ answers are written by ``list_offsets_response`` (by hand: a wide load's plan asks for
hundreds of partitions at once, and kio's dataclasses and generic encoder were most of the
time of such a request); v0 goes through kio's ``respond``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.broker.log.log import Log
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.protocol.list_offsets_response import (
    PartitionOffset,
    encode_list_offsets_response,
)
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond

if TYPE_CHECKING:
    from sluice.broker.replication.partition import Partition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


def _max_timestamp(partition_log: Log) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with the log's largest timestamp (Kafka's
    ``UnifiedLog.fetchOffsetByTimestamp`` for MAX_TIMESTAMP since KAFKA-16310: the segment
    with the largest timestamp, first of them on a tie, then the first record of it carrying
    that timestamp), at or after the log start; None when no record carries a timestamp. The
    segments keep their largest timestamp, so only the batches of one segment are read."""
    segments = [s for s in partition_log.segments() if s.size > 0 and s.max_timestamp >= 0]
    if not segments:
        return None
    newest = max(segments, key=lambda s: s.max_timestamp)  # max keeps the first on a tie
    return newest.find_offset_by_timestamp(newest.max_timestamp, partition_log.log_start_offset)


def _old_style_offsets(partition_log: Log, timestamp: int, max_num: int) -> list[int]:
    start = partition_log.log_start_offset
    bases = [max(s.base_offset, start) for s in partition_log.segments()]
    if timestamp == LATEST:
        offsets = [partition_log.high_watermark, *reversed(bases)]
    elif timestamp == EARLIEST:
        offsets = [start]
    else:
        old = [
            max(s.base_offset, start)
            for s in partition_log.segments()
            if s.largest_timestamp() <= timestamp
        ]
        offsets = list(reversed(old))
    unique = list(dict.fromkeys(offsets))
    return unique[: max(max_num, 0)]


def _leader(
    ctx: BrokerContext, topic: str, index: int, described: bool
) -> tuple[Partition | None, int]:
    """(the partition, NONE) where the client may describe the topic and this broker leads
    the partition; else (None, the error code to answer)."""
    if not described:
        return None, Errors.TOPIC_AUTHORIZATION_FAILED
    return ctx.replicas.leader_or_error(topic, index)


def _lookup(partition_log: Log, timestamp: int, read_committed: bool) -> tuple[int, int, int]:
    """(error code, timestamp, offset) answering a v1+ ``timestamp`` from a led partition's log
    (module docstring); -1 for a timestamp or offset there is none of."""
    if timestamp == LATEST:
        latest = (
            partition_log.last_stable_offset if read_committed else partition_log.high_watermark
        )
        return Errors.NONE, -1, latest
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return Errors.NONE, -1, partition_log.log_start_offset
    if timestamp < MAX_TIMESTAMP:
        return Errors.INVALID_REQUEST, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = _max_timestamp(partition_log)
    else:
        found = partition_log.offset_for_timestamp(timestamp)
    fetchable = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
    if found is not None and found[0] < fetchable:
        offset, found_timestamp = found
        return Errors.NONE, found_timestamp, offset
    return Errors.NONE, -1, -1


def _v0_topics(ctx: BrokerContext, request: Request) -> list[dict[str, Any]]:
    """The v0 answer's topics as kio's ``list_offsets_v0`` builds them: old-style offsets."""
    topics = []
    for t in request.body.topics:
        partitions: list[dict[str, Any]] = []
        described = allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            out = {"partition_index": p.partition_index, "error_code": Errors.NONE,
                   "timestamp": -1, "offset": -1, "leader_epoch": -1,
                   "old_style_offsets": []}  # fmt: skip
            partitions.append(out)
            leading, error = _leader(ctx, t.name, p.partition_index, described)
            if leading is None:
                out["error_code"] = error
                continue
            out["leader_epoch"] = leading.leader_epoch
            if p.timestamp < EARLIEST:
                out["error_code"] = Errors.INVALID_REQUEST
            else:
                out["old_style_offsets"] = _old_style_offsets(
                    leading.log, p.timestamp, p.max_num_offsets
                )
        topics.append({"name": t.name, "partitions": partitions})
    return topics


async def handle_list_offsets(ctx: BrokerContext, request: Request) -> bytes:
    read_committed = getattr(request.body, "isolation_level", 0) == 1  # v2+
    if read_committed:
        await ctx.transactions.get_if_used()  # resolves transactions a restart left open
    if request.api_version == 0:
        return respond(request, {"throttle_time": 0, "topics": _v0_topics(ctx, request)})
    topics: list[tuple[str, list[PartitionOffset]]] = []
    for t in request.body.topics:
        answers: list[PartitionOffset] = []
        described = allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            index = p.partition_index
            leading, error = _leader(ctx, t.name, index, described)
            if leading is None:
                answers.append(PartitionOffset(index, error, -1, -1, -1))
                continue
            error, timestamp, offset = _lookup(leading.log, p.timestamp, read_committed)
            answers.append(PartitionOffset(index, error, timestamp, offset, leading.leader_epoch))
        topics.append((t.name, answers))
    # The handler's version is the client's: ListOffsets is handled from v0 (handler_min 0,
    # no up-conversion), and v1+ answers are written by hand, never down-converted by kio.
    return encode_list_offsets_response(request.correlation_id, request.api_version, topics)
