"""DeleteRecords (v0–2): move partitions' log start offsets forward (Kafka's
``ReplicaManager.deleteRecords``).

Answered by each partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere): offset -1 means the
high watermark, an offset beyond it is OFFSET_OUT_OF_RANGE. The answer's ``low_watermark`` is
the leader's new log start offset; a consumer fetching below it gets OFFSET_OUT_OF_RANGE, and
ListOffsets(earliest) answers it. Followers move their own log start as they fetch (the fetch
response carries the leader's); the segments below it are deleted by the next retention pass.
Kafka also waits until every follower has moved (a DelayedDeleteRecords); Sluice answers once
the leader has.
"""

from __future__ import annotations

from sluice.broker.log.errors import StorageError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import code_for
from sluice.broker.server.responses import respond


async def handle_delete_records(ctx: BrokerContext, request: Request) -> bytes:
    topics = []
    for t in request.body.topics:
        partitions = []
        deletable = allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            try:
                if not deletable:
                    low, error = -1, Errors.TOPIC_AUTHORIZATION_FAILED
                else:
                    low, error = ctx.replicas.delete_records(t.name, p.partition_index, p.offset)
            except StorageError as exc:
                low, error = -1, code_for(exc)
            partitions.append(
                {"partition_index": p.partition_index, "low_watermark": low, "error_code": error}
            )
        topics.append({"name": t.name, "partitions": partitions})
    return respond(request, {"throttle_time": 0, "topics": topics})
