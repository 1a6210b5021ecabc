"""OffsetForLeaderEpoch (v2–4, v4 being v3 made flexible): where a leader epoch ended in
this leader's log.

A follower that starts following a new leader asks where its own latest epoch ended there
and truncates to that (KIP-101); librdkafka asks the same to validate a consumer position
after a leader change (KIP-320). The answer is the largest epoch <= the one asked and the
offset where it ended (the log end for the current epoch); -1/-1 for an epoch older than
any this log knows. A ``current_leader_epoch`` older than this leader's is FENCED_LEADER_EPOCH,
a newer one UNKNOWN_LEADER_EPOCH (-1 skips the check); standalone the leader epoch is 0.
"""

from __future__ import annotations

from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond


async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: Request) -> bytes:
    topics = []
    # KafkaApis: CLUSTER_ACTION (a follower truncating), else DESCRIBE on each topic (KIP-320).
    replica = cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    for t in request.body.topics:
        partitions: list[dict[str, Any]] = []
        described = replica or allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
        for p in t.partitions:
            out = {"error_code": Errors.NONE, "partition": p.partition, "leader_epoch": -1,
                   "end_offset": -1}  # fmt: skip
            partitions.append(out)
            if not described:
                out["error_code"] = Errors.TOPIC_AUTHORIZATION_FAILED
                continue
            leading, error = ctx.replicas.leader_or_error(t.topic, p.partition)
            if leading is None:
                out["error_code"] = error
                continue
            if 0 <= p.current_leader_epoch < leading.leader_epoch:
                out["error_code"] = Errors.FENCED_LEADER_EPOCH
                continue
            if p.current_leader_epoch > leading.leader_epoch:
                out["error_code"] = Errors.UNKNOWN_LEADER_EPOCH
                continue
            out["leader_epoch"], out["end_offset"] = leading.log.end_offset_for_epoch(
                p.leader_epoch
            )
        topics.append({"topic": t.topic, "partitions": partitions})
    return respond(request, {"throttle_time": 0, "topics": topics})
