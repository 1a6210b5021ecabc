"""DescribeShareGroupOffsets (v0–1), AlterShareGroupOffsets (v0) and DeleteShareGroupOffsets
(v0): a share group's share-partition start offsets as Kafka 4.2's admin client sees them
(``kafka-share-groups.sh --describe --offsets``, ``--reset-offsets``, ``--delete-offsets``).

Describe answers each share-partition's start offset and (v1) its lag: the records between
the start and the high watermark not yet done with. Alter and delete refuse a group with
members (NON_EMPTY_GROUP), as Kafka does; alter moves a share-partition's start to the given
offset, forgetting what was in flight, and delete drops the topic's share-partitions, so the
group starts it again by ``share.auto.offset.reset``. Both are committed in
``__share_group_state`` before the answer (COORDINATOR_NOT_AVAILABLE if they cannot be).
"""

from __future__ import annotations

from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond
from sluice.broker.server.share_access import is_coordinator, share_partition
from sluice.broker.share.share_partition import DONE
from sluice.broker.share.share_state_log import ShareStateUnavailableError


def _lag(ctx: BrokerContext, group_id: str, topic: str, partition: int, start: int) -> int:
    leading, _ = ctx.replicas.leader_or_error(topic, partition)
    if leading is None:
        return -1
    sp = ctx.share.partitions.get((group_id, topic, partition))
    done = 0 if sp is None else sum(1 for r in sp.records.values() if r.state in DONE)
    return max(leading.log.high_watermark - start - done, 0)


def _leader_epoch(ctx: BrokerContext, topic: str, partition: int) -> int:
    state = ctx.cluster.partition_state(topic, partition)
    return state.leader_epoch if state is not None else -1


async def handle_describe_share_group_offsets(ctx: BrokerContext, request: Request) -> bytes:
    topics = ctx.cluster.topics()
    groups = []
    for g in request.body.groups:
        group: dict[str, Any] = {"group_id": g.group_id, "topics": [], "error_code": Errors.NONE}
        groups.append(group)
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            group["error_code"] = Errors.GROUP_AUTHORIZATION_FAILED
            continue
        if not is_coordinator(ctx, g.group_id):
            group["error_code"] = Errors.NOT_COORDINATOR
            continue
        starts = ctx.share.start_offsets(g.group_id)
        wanted = (
            {t: sorted(p for tt, p in starts if tt == t) for t, _ in starts}
            if g.topics is None
            else {t.topic_name: list(t.partitions) for t in g.topics}
        )
        for name, partitions in sorted(wanted.items()):
            info = topics.get(name)
            entries = []
            for p in partitions:
                start = starts.get((name, p), -1)
                entries.append({
                    "partition_index": p, "start_offset": start,
                    "leader_epoch": _leader_epoch(ctx, name, p),
                    "lag": _lag(ctx, g.group_id, name, p, start) if start >= 0 else -1,
                    "error_code": Errors.NONE if info is not None
                    else Errors.UNKNOWN_TOPIC_OR_PARTITION,
                })  # fmt: skip
            group["topics"].append({"topic_name": name, "partitions": entries,
                                    "topic_id": info.topic_id if info else None})  # fmt: skip
    return respond(request, {"throttle_time": 0, "groups": groups})


async def _flushed(ctx: BrokerContext) -> bool:
    """Whether the queued share-group state was committed in ``__share_group_state``."""
    try:
        await ctx.share.flush()
    except ShareStateUnavailableError:
        return False
    return True


def _group_error(ctx: BrokerContext, group_id: str) -> int:
    if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return Errors.GROUP_AUTHORIZATION_FAILED
    if not is_coordinator(ctx, group_id):
        return Errors.NOT_COORDINATOR
    if not ctx.share.is_empty(group_id):
        return Errors.NON_EMPTY_GROUP
    return Errors.NONE


async def handle_alter_share_group_offsets(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    top = _group_error(ctx, body.group_id)
    if top != Errors.NONE:
        return respond(request, {"throttle_time": 0, "error_code": top, "responses": []})
    topics = ctx.cluster.topics()
    responses = []
    changed = []
    for t in body.topics:
        info = topics.get(t.topic_name)
        partitions = []
        for p in t.partitions:
            sp = await share_partition(ctx, body.group_id, t.topic_name, p.partition_index)
            if isinstance(sp, int):
                partitions.append({"partition_index": p.partition_index, "error_code": sp})
                continue
            sp.reset_start(p.start_offset)
            changed.append((t.topic_name, p.partition_index))
            partitions.append({"partition_index": p.partition_index, "error_code": Errors.NONE})
        responses.append({"topic_name": t.topic_name, "partitions": partitions,
                          "topic_id": info.topic_id if info else None})  # fmt: skip
    ctx.share.persist(body.group_id, changed)
    if not await _flushed(ctx):
        return respond(request, {"throttle_time": 0, "responses": [],
                                 "error_code": Errors.COORDINATOR_NOT_AVAILABLE})  # fmt: skip
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE,
                             "responses": responses})  # fmt: skip


async def handle_delete_share_group_offsets(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    top = _group_error(ctx, body.group_id)
    if top != Errors.NONE:
        return respond(request, {"throttle_time": 0, "error_code": top, "responses": []})
    topics = ctx.cluster.topics()
    responses = []
    for t in body.topics:
        info = topics.get(t.topic_name)
        had = ctx.share.forget(body.group_id, t.topic_name)
        code = Errors.NONE if had or info is not None else Errors.UNKNOWN_TOPIC_OR_PARTITION
        responses.append({"topic_name": t.topic_name, "error_code": code,
                          "topic_id": info.topic_id if info else None})  # fmt: skip
    if not await _flushed(ctx):
        return respond(request, {"throttle_time": 0, "responses": [],
                                 "error_code": Errors.COORDINATOR_NOT_AVAILABLE})  # fmt: skip
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE,
                             "responses": responses})  # fmt: skip
