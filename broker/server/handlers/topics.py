"""CreateTopics (v2–4) and DeleteTopics (v1–3)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.broker.cluster.topic_metadata import TopicError
from sluice.broker.log.errors import StorageError
from sluice.broker.protocol import Request
from sluice.broker.server import error_codes as ec
from sluice.broker.server.responses import respond

if TYPE_CHECKING:
    from sluice.broker.server.broker import Broker

log = logging.getLogger(__name__)


async def handle_create_topics(broker: Broker, request: Request) -> bytes:
    body = request.body
    cfg = broker.config
    results: list[dict[str, Any]] = []
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": ec.NONE,
                                  "error_message": None}  # fmt: skip
        results.append(result)
        partitions = topic.num_partitions
        replication = topic.replication_factor
        if topic.assignments:
            partitions = len(topic.assignments)
            replication = len(topic.assignments[0].broker_ids)
        if partitions == -1:
            partitions = cfg.num_partitions
        if replication == -1:
            replication = cfg.default_replication_factor
        config = {c.name: c.value for c in topic.configs if c.value is not None}
        try:
            await broker.off_loop(
                broker.create_topic,
                topic.name, partitions, replication, config, validate_only=body.validate_only,
            )  # fmt: skip
        except (TopicError, StorageError, OSError) as exc:
            result["error_code"] = ec.code_for(exc)
            result["error_message"] = str(exc)
    return respond(request, {"throttle_time": 0, "topics": results})


async def handle_delete_topics(broker: Broker, request: Request) -> bytes:
    results = []
    for name in request.body.topic_names:
        code = ec.NONE
        info = broker.metadata.get(name)
        if info is not None and info.internal:
            code = ec.INVALID_REQUEST  # Kafka refuses to delete internal topics too
        else:
            try:
                await broker.off_loop(broker.delete_topic, name)
            except (TopicError, StorageError) as exc:
                code = ec.code_for(exc)
        results.append({"name": name, "error_code": code})
    return respond(request, {"throttle_time": 0, "responses": results})
