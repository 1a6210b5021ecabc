"""DeleteGroups (v0–2) and OffsetDelete (v0): group administration on the group's coordinator
(NOT_COORDINATOR elsewhere; a standalone broker coordinates every group).

DeleteGroups removes a group and its committed offsets (tombstones in ``__consumer_offsets``):
refused with NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND for a group with
neither members nor offsets — classic and consumer (KIP-848) groups alike. OffsetDelete
removes some of a group's committed offsets; a partition of a topic the group's members
subscribe to is GROUP_SUBSCRIBED_TO_TOPIC (Kafka's ``GroupCoordinator.handleDeleteOffsets``).
Either may raise what a commit raises (``OffsetCommitFailedError``), answered with the
coordinator's codes.
"""

from __future__ import annotations

from typing import Any

from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import coordinator_code_for
from sluice.broker.server.responses import respond


def _known(ctx: BrokerContext, group_id: str) -> bool:
    return (
        ctx.groups.describe(group_id) is not None
        or ctx.consumer_groups.describe(group_id) is not None
        or bool(ctx.offsets.committed(group_id))
    )


async def handle_delete_groups(ctx: BrokerContext, request: Request) -> bytes:
    results = []
    for group_id in request.body.groups_names:
        code = Errors.NONE
        if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            code = Errors.GROUP_AUTHORIZATION_FAILED
        elif not ctx.offsets.coordinates(group_id):
            code = Errors.NOT_COORDINATOR
        elif not _known(ctx, group_id):
            code = Errors.GROUP_ID_NOT_FOUND
        else:
            code = ctx.groups.delete_group(group_id)
            if code == Errors.NONE:
                code = ctx.consumer_groups.delete_group(group_id)
            if code == Errors.NONE:
                try:
                    await ctx.consumer_groups.persist(group_id)  # a consumer group's tombstones
                    await ctx.offsets.delete(group_id, list(ctx.offsets.committed(group_id)))
                except OffsetCommitFailedError as exc:
                    code = coordinator_code_for(exc)
        results.append({"group_id": group_id, "error_code": code})
    return respond(request, {"throttle_time": 0, "results": results})


async def handle_offset_delete(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    group_id = body.group_id
    top = Errors.NONE
    if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        top = Errors.GROUP_AUTHORIZATION_FAILED
    elif not ctx.offsets.coordinates(group_id):
        top = Errors.NOT_COORDINATOR
    elif not _known(ctx, group_id):
        top = Errors.GROUP_ID_NOT_FOUND
    topics: list[dict[str, Any]] = []
    if top != Errors.NONE:
        return respond(request, {"throttle_time": 0, "error_code": top, "topics": []})
    subscribed = ctx.groups.subscribed_topics(group_id)
    subscribed |= ctx.consumer_groups.subscribed_topics(group_id)
    doomed: list[tuple[str, int]] = []
    for t in body.topics:
        partitions = []
        readable = allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            code = Errors.GROUP_SUBSCRIBED_TO_TOPIC if t.name in subscribed else Errors.NONE
            if not readable:
                code = Errors.TOPIC_AUTHORIZATION_FAILED
            if code == Errors.NONE:
                doomed.append((t.name, p.partition_index))
            partitions.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": partitions})
    try:
        await ctx.offsets.delete(group_id, doomed)
    except OffsetCommitFailedError as exc:
        top, topics = coordinator_code_for(exc), []
    return respond(request, {"throttle_time": 0, "error_code": top, "topics": topics})
