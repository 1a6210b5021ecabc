"""OffsetCommit (v2–9), OffsetFetch (v1–5). (FindCoordinator is ``find_coordinator``'s.)

A group's coordinator is the leader of its ``__consumer_offsets`` partition (a standalone
broker leads them all); another broker answers NOT_COORDINATOR. Commits are stored durably in
``__consumer_offsets`` (see ``sluice.broker.groups.offset_store``) before they are acknowledged.
Commits are checked against the group coordinator's generations (Kafka's rules: a member
commits for its current generation; ``assign()`` consumers commit with generation -1 while
the group has no members). A consumer group's (KIP-848) members commit with their member
epoch through v9 (``ConsumerGroupCoordinator.validate_commit``); v8 is v7 made flexible.
"""

from __future__ import annotations

import time
from typing import Any

from sluice.broker.groups.offset_store import CommittedOffset, OffsetCommitFailedError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import coordinator_code_for
from sluice.broker.server.responses import respond

MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes


def _exists(ctx: BrokerContext, topic: str, partition: int) -> bool:
    """Whether the partition exists in the cluster (the coordinator need not host it)."""
    info = ctx.cluster.get(topic)
    return info is not None and 0 <= partition < info.partitions


async def handle_offset_commit(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    now = int(time.time() * 1000)
    accepted: list[tuple[str, int, CommittedOffset]] = []
    topics = []
    # Members of a managed group commit for their generation; assign() consumers with -1.
    # KafkaApis: READ on the group for all, then READ on each topic.
    group_readable = allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    if not group_readable:
        group_error = Errors.GROUP_AUTHORIZATION_FAILED
    elif not ctx.offsets.coordinates(body.group_id):
        group_error = Errors.NOT_COORDINATOR
    else:
        # A consumer group's (KIP-848) member commits with its member epoch; else classic.
        consumer_error = ctx.consumer_groups.validate_commit(
            body.group_id, body.member_id, body.generation_id_or_member_epoch,
            request.api_version,
        )  # fmt: skip
        group_error = (
            consumer_error
            if consumer_error is not None
            else ctx.groups.validate_commit(
                body.group_id,
                body.generation_id_or_member_epoch,
                body.member_id,
                getattr(body, "group_instance_id", None),
            )
        )
    for t in body.topics:
        partitions: list[dict[str, Any]] = []
        readable = allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            code = Errors.NONE
            if group_error == Errors.GROUP_AUTHORIZATION_FAILED:
                code = group_error
            elif not body.group_id:
                code = Errors.INVALID_GROUP_ID
            elif group_error != Errors.NONE:
                code = group_error
            elif not readable:
                code = Errors.TOPIC_AUTHORIZATION_FAILED
            elif not _exists(ctx, t.name, p.partition_index):
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.committed_metadata and len(p.committed_metadata) > MAX_METADATA_BYTES:
                code = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                epoch = getattr(p, "committed_leader_epoch", -1)
                accepted.append(
                    (t.name, p.partition_index,
                     CommittedOffset(p.committed_offset, epoch, p.committed_metadata, now))
                )  # fmt: skip
            partitions.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": partitions})
    try:
        await ctx.offsets.commit(body.group_id, accepted)
    except OffsetCommitFailedError as exc:
        # Not made durable (leadership moved, ISR too small): the client retries elsewhere.
        code = coordinator_code_for(exc)
        for t in topics:
            for p in t["partitions"]:
                if p["error_code"] == Errors.NONE:
                    p["error_code"] = code
    return respond(request, {"throttle_time": 0, "topics": topics})


def _offset_fetch_error(request: Request, code: Errors) -> bytes:
    """Every requested partition and the top-level code (v2+) carry ``code``."""
    topics = [
        {"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
             "metadata": "", "error_code": code}
            for p in t.partition_indexes
        ]}
        for t in request.body.topics or ()
    ]  # fmt: skip
    return respond(request, {"throttle_time": 0, "topics": topics, "error_code": code})


async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, body.group_id):
        return _offset_fetch_error(request, Errors.GROUP_AUTHORIZATION_FAILED)
    if not ctx.offsets.coordinates(body.group_id):
        return respond(request, {"throttle_time": 0, "topics": [],
                                 "error_code": Errors.NOT_COORDINATOR})  # fmt: skip
    if body.topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(ctx.offsets.committed(body.group_id)):
            # KafkaApis: asked for all, the topics one may not DESCRIBE are left out.
            if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in body.topics}
    stable = getattr(body, "require_stable", False)  # v7+ (KIP-447)
    topics = []
    for topic, partitions in wanted.items():
        out = []
        described = allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        for partition in partitions:
            if not described:
                out.append({"partition_index": partition, "committed_offset": -1,
                            "committed_leader_epoch": -1, "metadata": "",
                            "error_code": Errors.TOPIC_AUTHORIZATION_FAILED})  # fmt: skip
                continue
            if stable and ctx.offsets.has_pending_txn(body.group_id, topic, partition):
                # KIP-447: a transaction holds an offset for it that is not committed yet.
                out.append({"partition_index": partition, "committed_offset": -1,
                            "committed_leader_epoch": -1, "metadata": "",
                            "error_code": Errors.UNSTABLE_OFFSET_COMMIT})  # fmt: skip
                continue
            c = ctx.offsets.fetch(body.group_id, topic, partition)
            out.append(
                {"partition_index": partition,
                 "committed_offset": c.offset if c else -1,
                 "committed_leader_epoch": c.leader_epoch if c else -1,
                 "metadata": (c.metadata if c else "") or "",
                 "error_code": Errors.NONE}
            )  # fmt: skip
        topics.append({"name": topic, "partitions": out})
    return respond(request, {"throttle_time": 0, "topics": topics, "error_code": Errors.NONE})
