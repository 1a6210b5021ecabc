"""ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1): share-group membership (KIP-932).

The share coordinator's groups live on the broker that serves them (``ctx.share``, a
:class:`~sluice.broker.share.share_coordinator.ShareCoordinator`). A share consumer finds its
coordinator with FindCoordinator (key type 0, as a group), which answers the leader of the
group's ``__consumer_offsets`` partition; a heartbeat to any other broker is answered
NOT_COORDINATOR. The assignment names topics by id, every partition of every subscribed topic
that exists (``ShareGroup``'s assignor); a subscribed topic that does not exist is left out
until it does. The share-partitions of an assignment that this broker leads are created with it
(``share_partition``: from their state in ``__share_group_state``, else at the position
``share.auto.offset.reset`` names, committed before the answer).
"""

from __future__ import annotations

from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import CURRENT_PEER, BrokerContext
from sluice.broker.server.responses import respond
from sluice.broker.server.share_access import is_coordinator, now_ms, share_partition
from sluice.broker.share.share_group import (
    FencedShareMemberError,
    ShareGroup,
    UnknownShareMemberError,
)

#: Kafka's share groups use the simple assignor (the name ShareGroupDescribe reports).
ASSIGNOR = "simple"


def fenced_code() -> int:
    """FENCED_MEMBER_EPOCH (110) once the error registry has it; until then UNKNOWN_MEMBER_ID,
    which makes the client rejoin at epoch 0 just the same."""
    return int(getattr(Errors, "FENCED_MEMBER_EPOCH", Errors.UNKNOWN_MEMBER_ID))


async def handle_share_group_heartbeat(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    group_id = body.group_id

    def error(code: int, message: str | None = None) -> bytes:
        return respond(request, {
            "throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": body.member_id, "member_epoch": -1, "heartbeat_interval": 0,
            "assignment": None,
        })  # fmt: skip

    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return error(Errors.GROUP_AUTHORIZATION_FAILED)
    if not is_coordinator(ctx, group_id):
        return error(Errors.NOT_COORDINATOR)
    if not body.member_id:
        return error(Errors.INVALID_REQUEST, "a share member sends its own member id (KIP-1082)")
    topics = ctx.cluster.topics()
    subscribed = body.subscribed_topic_names
    if subscribed is not None:
        subscribed = [t for t in subscribed if allowed(ctx, AclOperation.DESCRIBE,
                                                       ResourceType.TOPIC, t)]  # fmt: skip
    partitions = {name: info.partitions for name, info in topics.items() if not info.internal}
    try:
        member = ctx.share.heartbeat(
            group_id, body.member_id, body.member_epoch, subscribed, partitions, now_ms(),
            client_id=request.header.client_id, client_host=CURRENT_PEER.get(),
            rack=body.rack_id,
        )  # fmt: skip
    except UnknownShareMemberError as exc:
        return error(Errors.UNKNOWN_MEMBER_ID, str(exc))
    except FencedShareMemberError as exc:
        return error(fenced_code(), str(exc))
    if member is not None:
        # Kafka initialises a share-partition's state when the group is first assigned it
        # (InitializeShareGroupState), so "latest" means the log end at assignment, not at
        # the member's first fetch. Here: the partitions this broker leads.
        for topic, assigned in member.assignment.items():
            for p in assigned:
                # An error: the fetch says it. Once: a heartbeat must not wait on the state.
                await share_partition(ctx, group_id, topic, p, attempts=1)
    if member is None:  # left
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.NONE, "member_id": body.member_id,
            "member_epoch": -1, "heartbeat_interval": 0, "assignment": None,
        })  # fmt: skip
    assignment = {
        "topic_partitions": [
            {"topic_id": topics[t].topic_id, "partitions": list(ps)}
            for t, ps in member.assignment.items()
            if t in topics
        ]
    }
    return respond(request, {
        "throttle_time": 0, "error_code": Errors.NONE, "member_id": member.member_id,
        "member_epoch": member.epoch, "heartbeat_interval": ctx.share.heartbeat_interval_ms,
        "assignment": assignment,
    })  # fmt: skip


async def handle_share_group_describe(ctx: BrokerContext, request: Request) -> bytes:
    groups = []
    topics = ctx.cluster.topics()
    for group_id in request.body.group_ids:
        described: dict[str, Any] = {
            "error_code": Errors.NONE, "group_id": group_id, "group_state": "Dead",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": ASSIGNOR, "members": [],
        }  # fmt: skip
        groups.append(described)
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described["error_code"] = Errors.GROUP_AUTHORIZATION_FAILED
            continue
        if not is_coordinator(ctx, group_id):
            described["error_code"] = Errors.NOT_COORDINATOR
            continue
        ctx.share.expire_members(now_ms())
        group = ctx.share.group(group_id)
        if group is None:
            described["error_code"] = Errors.GROUP_ID_NOT_FOUND
            described["error_message"] = f"share group {group_id} does not exist"
            continue
        described.update(_describe(group, topics))
    return respond(request, {"throttle_time": 0, "groups": groups})


def _describe(group: ShareGroup, topics: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_state": group.state,
        "group_epoch": group.epoch,
        "assignment_epoch": group.epoch,
        "members": [
            {
                "member_id": m.member_id,
                "rack_id": m.rack,
                "member_epoch": m.epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed),
                "assignment": {
                    "topic_partitions": [
                        {"topic_id": topics[t].topic_id, "topic_name": t, "partitions": list(ps)}
                        for t, ps in m.assignment.items()
                        if t in topics
                    ]
                },
            }  # fmt: skip
            for m in group.members.values()
        ],
    }
