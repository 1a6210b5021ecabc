"""ListOffsets (v1–5): -1 latest (the high watermark, which is also the last stable offset),
-2 earliest (the log start offset), otherwise the first offset whose record timestamp is at
or after the one asked, through the time index; -1/-1 when there is none. Answered by the
partition's leader, with its leader epoch (0 standalone)."""

from __future__ import annotations

from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond

LATEST = -1
EARLIEST = -2


async def handle_list_offsets(ctx: BrokerContext, request: Request) -> bytes:
    topics = []
    for t in request.body.topics:
        partitions: list[dict[str, Any]] = []
        for p in t.partitions:
            out = {"partition_index": p.partition_index, "error_code": Errors.NONE,
                   "timestamp": -1, "offset": -1, "leader_epoch": -1}  # fmt: skip
            partitions.append(out)
            leading, error = ctx.replicas.leader_or_error(t.name, p.partition_index)
            if leading is None:
                out["error_code"] = error
                continue
            partition_log = leading.log
            out["leader_epoch"] = leading.leader_epoch
            if p.timestamp == LATEST:
                out["offset"] = partition_log.high_watermark
            elif p.timestamp == EARLIEST:
                out["offset"] = partition_log.log_start_offset
            elif p.timestamp < 0:
                out["error_code"] = Errors.INVALID_REQUEST
            else:
                found = partition_log.offset_for_timestamp(p.timestamp)
                if found is not None:
                    out["offset"], out["timestamp"] = found
        topics.append({"name": t.name, "partitions": partitions})
    return respond(request, {"throttle_time": 0, "topics": topics})
