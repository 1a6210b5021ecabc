"""JoinGroup (v0–7), SyncGroup (v0–5), Heartbeat (v0–4), LeaveGroup (v0–4), ListGroups
(v0–5), DescribeGroups (v0–6): thin adapters onto ``sluice.broker.groups.coordinator``.

JoinGroup v7 answers the group's protocol type, SyncGroup v5 its protocol type and name
(KIP-559; null with an error, as Kafka's). A SyncGroup v5 must name both, and what it names
must be the group's, else INCONSISTENT_GROUP_PROTOCOL (Kafka's KafkaApis and
GroupCoordinator.doSyncGroup).

JoinGroup v0 has no rebalance timeout: the session timeout stands in, as in Kafka. Before
v4 a member may join without an id and gets one at once; from v4 it is asked to rejoin
with the id it was given (MEMBER_ID_REQUIRED). LeaveGroup v0–2 names one member; v3+ a list.
A broker that does not lead the group's ``__consumer_offsets`` partition answers
NOT_COORDINATOR (a standalone broker leads them all). An id a consumer group (KIP-848) holds
with members is refused to JoinGroup (INCONSISTENT_GROUP_PROTOCOL), listed by ListGroups with
its state, and Dead to DescribeGroups, as Kafka answers.

ListGroups lists the classic groups (type ``classic``), the consumer groups (``consumer``) and
the share groups (``share``, KIP-932) this broker coordinates, each with its state (v4+) and
type (v5+); v4's states filter (KIP-518) and v5's types filter (KIP-848) keep those whose
state / type is named, case-insensitively (an empty filter keeps all). DescribeGroups gives
each member's ``group.instance.id`` (v4+) and, asked for (v3+), the authorized operations on
the group (READ, DESCRIBE, DELETE bits; KIP-430); v6 answers GROUP_ID_NOT_FOUND where v0–5
say Dead.
"""

from __future__ import annotations

from typing import Any

from sluice.broker.groups.coordinator import GroupState
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.authorized_operations import authorized_operations
from sluice.broker.server.context import CURRENT_PEER, BrokerContext
from sluice.broker.server.responses import respond
from sluice.broker.server.share_access import is_coordinator


def _client(request: Request) -> str:
    return request.header.client_id or ""


def _readable(ctx: BrokerContext, group_id: str) -> bool:
    """KafkaApis: the member APIs (join, sync, heartbeat, leave) need READ on the group."""
    return allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id)


async def handle_join_group(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    refused = not _readable(ctx, body.group_id)
    if refused or not ctx.offsets.coordinates(body.group_id):
        code = Errors.GROUP_AUTHORIZATION_FAILED if refused else Errors.NOT_COORDINATOR
        return respond(request, {"throttle_time": 0, "error_code": code,
                                 "generation_id": -1, "protocol_name": "", "leader": "",
                                 "member_id": body.member_id, "members": []})  # fmt: skip
    if not ctx.consumer_groups.claim_for_classic(body.group_id):
        # A consumer group (KIP-848) with members has the id: no classic member joins it
        # (Kafka's group.consumer.migration.policy=disabled).
        return respond(request, {"throttle_time": 0,
                                 "error_code": Errors.INCONSISTENT_GROUP_PROTOCOL,
                                 "generation_id": -1, "protocol_name": "", "leader": "",
                                 "member_id": body.member_id, "members": []})  # fmt: skip
    session_ms = ms(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)
    result = await ctx.groups.join(
        body.group_id,
        body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=_client(request),
        client_host=CURRENT_PEER.get(),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(rebalance) if rebalance is not None else session_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=request.api_version >= 4,
    )
    group = ctx.groups.describe(body.group_id) if result.error == Errors.NONE else None
    return respond(
        request,
        {
            "throttle_time": 0,
            "error_code": result.error,
            "generation_id": result.generation,
            # v7+: the group's type, set by its first member (null with an error).
            "protocol_type": group.protocol_type if group is not None else None,
            "protocol_name": result.protocol_name,
            "leader": result.leader,
            "member_id": result.member_id,
            "members": [
                {"member_id": m, "group_instance_id": i, "metadata": meta}
                for m, i, meta in result.members
            ],
        },
    )


async def handle_sync_group(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    refused = not _readable(ctx, body.group_id)
    if refused or not ctx.offsets.coordinates(body.group_id):
        code = Errors.GROUP_AUTHORIZATION_FAILED if refused else Errors.NOT_COORDINATOR
        return respond(request, {"throttle_time": 0, "error_code": code,
                                 "assignment": b""})  # fmt: skip
    protocol_type = getattr(body, "protocol_type", None)  # v5+
    protocol_name = getattr(body, "protocol_name", None)
    if request.api_version >= 5 and (protocol_type is None or protocol_name is None):
        # KafkaApis: from v5 both are mandatory.
        return respond(request, {"throttle_time": 0, "assignment": b"",
                                 "error_code": Errors.INCONSISTENT_GROUP_PROTOCOL})  # fmt: skip
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    result = await ctx.groups.sync(
        body.group_id, body.generation_id, body.member_id, assignments,
        getattr(body, "group_instance_id", None),
        protocol_type=protocol_type, protocol_name=protocol_name,
    )  # fmt: skip
    # The generation's type and name: a successful sync is answered once its generation is
    # complete, and the name changes only when the next generation's join completes, which
    # needs this member to rejoin first.
    group = ctx.groups.describe(body.group_id) if result.error == Errors.NONE else None
    return respond(
        request,
        {
            "throttle_time": 0,
            "error_code": result.error,
            "protocol_type": group.protocol_type if group is not None else None,
            "protocol_name": group.protocol_name if group is not None else None,
            "assignment": result.assignment,
        },
    )


async def handle_heartbeat(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not _readable(ctx, body.group_id):
        return respond(
            request, {"throttle_time": 0, "error_code": Errors.GROUP_AUTHORIZATION_FAILED}
        )
    error = (
        ctx.groups.heartbeat(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )  # fmt: skip
        if ctx.offsets.coordinates(body.group_id)
        else Errors.NOT_COORDINATOR
    )
    return respond(request, {"throttle_time": 0, "error_code": error})


async def handle_leave_group(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not _readable(ctx, body.group_id):
        return respond(
            request,
            {"throttle_time": 0, "error_code": Errors.GROUP_AUTHORIZATION_FAILED, "members": []},
        )
    if request.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    error, errors = ctx.groups.leave(
        body.group_id, [m for m, _ in members], [i for _, i in members]
    )
    if request.api_version < 3 and errors:
        error = errors[0]
    return respond(
        request,
        {
            "throttle_time": 0,
            "error_code": error,
            "members": [
                {"member_id": m, "group_instance_id": i, "error_code": e}
                for (m, i), e in zip(members, errors, strict=True)
            ],
        },
    )


def _listed(ctx: BrokerContext) -> list[tuple[str, str, str, str]]:
    """(group id, protocol type, state, group type) of every group this broker coordinates:
    classic groups (with those known by their offsets alone, Empty), consumer groups
    (KIP-848) and share groups (KIP-932) — their type as ListGroups v5 names it."""
    consumer = ctx.consumer_groups.list_groups()
    held = {g for g, _t, _s in consumer}
    classic = ctx.groups.list_groups(sorted(set(ctx.offsets.groups()) - held))
    share = ctx.share
    share_ids = sorted(set(share.groups) | set(share.store.groups()))
    shared = [
        (g, "share", group.state, "share")
        for g in share_ids
        if (group := share.group(g)) is not None and is_coordinator(ctx, g)
    ]
    return sorted(
        [(g, t, s, "classic") for g, t, s in classic]
        + [(g, t, s, "consumer") for g, t, s in consumer]
        + shared
    )


async def handle_list_groups(ctx: BrokerContext, request: Request) -> bytes:
    groups = _listed(ctx)
    # v4+ (KIP-518) and v5+ (KIP-848): an empty filter lists all; matched case-insensitively
    # as Kafka's GroupCoordinatorService does.
    states = {s.lower() for s in getattr(request.body, "states_filter", ())}
    types = {t.lower() for t in getattr(request.body, "types_filter", ())}
    groups = [
        g for g in groups if (not states or g[2].lower() in states) and (not types or g[3] in types)
    ]
    # KafkaApis: DESCRIBE on the cluster lists every group, else those one may DESCRIBE.
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        groups = [
            g for g in groups if allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g[0])
        ]
    return respond(
        request,
        {
            "throttle_time": 0,
            "error_code": Errors.NONE,
            "groups": [
                {"group_id": g, "protocol_type": t, "group_state": state, "group_type": kind}
                for g, t, state, kind in groups
            ],
        },
    )


def _absent(request: Request, group_id: str, state: str, *, classic: bool) -> dict[str, Any]:
    """A group with no classic members to describe: Empty if its offsets are all it is, else
    Dead — and from v6 (KIP-1043) GROUP_ID_NOT_FOUND for a group that is not there or not a
    classic group (a consumer or share group), with Kafka's messages."""
    code, message = Errors.NONE, None
    if request.api_version >= 6 and state == "Dead":
        code = Errors.GROUP_ID_NOT_FOUND
        message = (f"Group {group_id} not found." if classic
                   else f"Group {group_id} is not a classic group.")  # fmt: skip
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": state, "protocol_type": "", "protocol_data": "",
            "members": []}  # fmt: skip


async def handle_describe_groups(ctx: BrokerContext, request: Request) -> bytes:
    # v3+: the authorized operations on each group, when asked (KIP-430).
    with_operations = getattr(request.body, "include_authorized_operations", False)
    described: list[dict[str, Any]] = []
    for group_id in request.body.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append({"error_code": Errors.GROUP_AUTHORIZATION_FAILED,
                              "group_id": group_id, "group_state": "", "protocol_type": "",
                              "protocol_data": "", "members": []})  # fmt: skip
            continue
        group = ctx.groups.describe(group_id)
        if group is None:
            # A consumer group (KIP-848) or share group is no classic group: Dead, as Kafka
            # answers v0-5.
            other = bool(ctx.consumer_groups.describe(group_id)) or (
                ctx.share.group(group_id) is not None
            )
            known = group_id in ctx.offsets.groups() and not other
            state = GroupState.EMPTY.value if known else "Dead"
            entry = _absent(request, group_id, state, classic=not other)
        else:
            entry = {
                "error_code": Errors.NONE,
                "group_id": group_id,
                "group_state": group.state.value,
                "protocol_type": group.protocol_type,
                "protocol_data": group.protocol_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,  # v4+
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata_for(group.protocol_name),
                        "member_assignment": m.assignment,
                    }
                    for m in group.members.values()
                ],
            }
        if with_operations:
            entry["authorized_operations"] = authorized_operations(
                ctx, ResourceType.GROUP, group_id
            )
        described.append(entry)
    return respond(request, {"throttle_time": 0, "groups": described})
