"""ConsumerGroupHeartbeat (v0–1) and ConsumerGroupDescribe (v0–1): the KIP-848 consumer group
protocol (``group.protocol=consumer``), thin adapters onto
``sluice.broker.groups.consumer_coordinator``.

Assignments travel by topic id (the ids of ``ctx.cluster``'s topics); a member's owned
partitions naming an id the broker does not know are dropped, as Kafka's coordinator ignores
them. Subscriptions resolve against the non-internal topics. A broker that does not lead the
group's ``__consumer_offsets`` partition answers NOT_COORDINATOR; the member APIs need READ
on the group, describe DESCRIBE, as in Kafka's ``KafkaApis``. A heartbeat is answered once
its changes are in ``__consumer_offsets``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sluice.broker.groups.consumer_assignors import Assignment
from sluice.broker.groups.consumer_group import ConsumerGroup
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import CURRENT_PEER, BrokerContext
from sluice.broker.server.error_mapping import coordinator_code_for
from sluice.broker.server.responses import respond

log = logging.getLogger(__name__)

#: ConsumerGroupDescribe's member_type: -1 unknown, 0 classic, 1 consumer (KIP-1099).
_CONSUMER_MEMBER = 1


def _topics(ctx: BrokerContext) -> tuple[dict[str, int], dict[str, uuid.UUID]]:
    """The non-internal topics' partition counts and ids."""
    counts: dict[str, int] = {}
    ids: dict[str, uuid.UUID] = {}
    for name, info in ctx.cluster.topics().items():
        if not info.internal:
            counts[name], ids[name] = info.partitions, info.topic_id
    return counts, ids


def _by_id(
    assignment: Assignment, ids: dict[str, uuid.UUID], names: bool = False
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for topic, parts in sorted(assignment.items()):
        if topic in ids:
            entry: dict[str, Any] = {"topic_id": ids[topic], "partitions": sorted(parts)}
            if names:
                entry["topic_name"] = topic
            out.append(entry)
    return out


async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    interval = ctx.consumer_groups.heartbeat_interval_ms
    refused = not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    if refused or not ctx.offsets.coordinates(body.group_id):
        code = Errors.GROUP_AUTHORIZATION_FAILED if refused else Errors.NOT_COORDINATOR
        return respond(request, {"throttle_time": 0, "error_code": code, "member_id": None,
                                 "member_epoch": -1, "heartbeat_interval": interval})  # fmt: skip
    counts, ids = _topics(ctx)
    names = {topic_id: name for name, topic_id in ids.items()}
    owned = None
    if body.topic_partitions is not None:
        owned = {
            names[tp.topic_id]: frozenset(int(p) for p in tp.partitions)
            for tp in body.topic_partitions
            if tp.topic_id in names and tp.partitions
        }
    timeout = ms(body.rebalance_timeout)
    result = ctx.consumer_groups.heartbeat(
        body.group_id,
        body.member_id,
        int(body.member_epoch),
        topics=counts,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=timeout,
        subscribed_names=body.subscribed_topic_names,
        subscribed_regex=getattr(body, "subscribed_topic_regex", None),
        server_assignor=body.server_assignor,
        owned=owned,
        client_id=request.header.client_id or "",
        client_host=CURRENT_PEER.get(),
        client_member_id=request.api_version >= 1,
    )
    try:
        # Answered once durable, as Kafka's coordinator answers after its records' write.
        await ctx.consumer_groups.persist(body.group_id)
    except OffsetCommitFailedError as exc:
        return respond(request, {"throttle_time": 0, "error_code": coordinator_code_for(exc),
                                 "member_id": result.member_id, "member_epoch": -1,
                                 "heartbeat_interval": interval})  # fmt: skip
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": _by_id(result.assignment, ids)}
    # At DEBUG, one line per heartbeat with what it asked and what it was answered: a
    # client's reconciliation can be followed from the broker without the client's own debug
    # output, which changes its timing.
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "heartbeat group=%s member=%s epoch=%s names=%s regex=%r rebalance_timeout=%s"
            " owned=%s -> error=%s epoch=%s assignment=%s",
            body.group_id, body.member_id, body.member_epoch,
            None if body.subscribed_topic_names is None else sorted(body.subscribed_topic_names),
            getattr(body, "subscribed_topic_regex", None), timeout,
            None if owned is None else {t: sorted(p) for t, p in sorted(owned.items())},
            result.error.name, result.member_epoch,
            None if result.assignment is None
            else {t: sorted(p) for t, p in sorted(result.assignment.items())},
        )  # fmt: skip
    return respond(
        request,
        {
            "throttle_time": 0,
            "error_code": result.error,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": interval,
            "assignment": assignment,
        },
    )


def _described(group_id: str, group: ConsumerGroup, ids: dict[str, uuid.UUID]) -> dict[str, Any]:
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_names),
            "subscribed_topic_regex": m.subscribed_regex,
            "assignment": {"topic_partitions": _by_id(m.assigned, ids, names=True)},
            "target_assignment": {
                "topic_partitions": _by_id(group.target.get(m.member_id, {}), ids, names=True)
            },
            "member_type": _CONSUMER_MEMBER,
        }
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    ]
    return {
        "error_code": Errors.NONE,
        "group_id": group_id,
        "group_state": group.state(),
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.target_epoch,
        "assignor_name": group.assignor,
        "members": members,
        "authorized_operations": -(2**31),
    }


async def handle_consumer_group_describe(ctx: BrokerContext, request: Request) -> bytes:
    _, ids = _topics(ctx)
    groups: list[dict[str, Any]] = []
    for group_id in request.body.group_ids:
        empty = {"group_id": group_id, "group_state": "", "group_epoch": -1,
                 "assignment_epoch": -1, "assignor_name": "", "members": [],
                 "authorized_operations": -(2**31)}  # fmt: skip
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({**empty, "error_code": Errors.GROUP_AUTHORIZATION_FAILED})
        elif not ctx.offsets.coordinates(group_id):
            groups.append({**empty, "error_code": Errors.NOT_COORDINATOR})
        else:
            group = ctx.consumer_groups.describe(group_id)
            if group is None:
                # Kafka: a classic group, or none, is not a consumer group.
                message = f"Group {group_id} not found."
                groups.append({**empty, "error_code": Errors.GROUP_ID_NOT_FOUND,
                               "error_message": message})  # fmt: skip
            else:
                groups.append(_described(group_id, group, ids))
    return respond(request, {"throttle_time": 0, "groups": groups})
