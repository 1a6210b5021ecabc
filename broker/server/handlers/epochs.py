"""OffsetForLeaderEpoch (v2–3): where a leader epoch ended in this leader's log.

A follower that starts following a new leader asks where its own latest epoch ended there
and truncates to that (KIP-101); librdkafka asks the same to validate a consumer position
after a leader change (KIP-320). The answer is the largest epoch <= the one asked and the
offset where it ended (the log end for the current epoch); -1/-1 for an epoch older than
any this log knows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.broker.protocol import Request
from sluice.broker.server import error_codes as ec
from sluice.broker.server.responses import respond

if TYPE_CHECKING:
    from sluice.broker.server.broker import Broker


async def handle_offset_for_leader_epoch(broker: Broker, request: Request) -> bytes:
    topics = []
    for t in request.body.topics:
        partitions: list[dict[str, Any]] = []
        for p in t.partitions:
            out = {"error_code": ec.NONE, "partition": p.partition, "leader_epoch": -1,
                   "end_offset": -1}  # fmt: skip
            partitions.append(out)
            partition_log, error = broker.leader_log(t.topic, p.partition)
            if partition_log is None:
                out["error_code"] = error
                continue
            if broker.replicas is not None and p.current_leader_epoch >= 0:
                leading = broker.replicas.leader_partition(t.topic, p.partition)
                ours = leading.leader_epoch if leading is not None else -1
                if p.current_leader_epoch < ours:
                    out["error_code"] = ec.FENCED_LEADER_EPOCH
                    continue
                if p.current_leader_epoch > ours:
                    out["error_code"] = ec.UNKNOWN_LEADER_EPOCH
                    continue
            out["leader_epoch"], out["end_offset"] = partition_log.end_offset_for_epoch(
                p.leader_epoch
            )
        topics.append({"topic": t.topic, "partitions": partitions})
    return respond(request, {"throttle_time": 0, "topics": topics})
