"""CreateTopics (v2–4) and DeleteTopics (v1–3).

Both go through the broker's ``create_topic``/``delete_topic`` (off the event loop where they
talk to ZooKeeper); a refused topic gets the code ``error_mapping`` gives its exception. A
topic's partitions get their logs on the brokers that hold its replicas — standalone, this one,
before the answer is sent. Internal topics cannot be deleted (INVALID_REQUEST, as Kafka).
"""

from __future__ import annotations

import logging
from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import ADMIN_ERRORS, code_for
from sluice.broker.server.responses import respond

log = logging.getLogger(__name__)


async def handle_create_topics(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    cfg = ctx.config
    results: list[dict[str, Any]] = []
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": Errors.NONE,
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
            await ctx.off_loop(
                ctx.create_topic,
                topic.name, partitions, replication, config, validate_only=body.validate_only,
            )  # fmt: skip
        except ADMIN_ERRORS as exc:
            result["error_code"] = code_for(exc)
            result["error_message"] = str(exc)
    return respond(request, {"throttle_time": 0, "topics": results})


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> bytes:
    results = []
    for name in request.body.topic_names:
        code = Errors.NONE
        info = ctx.cluster.get(name)
        if info is not None and info.internal:
            code = Errors.INVALID_REQUEST  # Kafka refuses to delete internal topics too
        else:
            try:
                await ctx.off_loop(ctx.delete_topic, name)
            except ADMIN_ERRORS as exc:
                code = code_for(exc)
        results.append({"name": name, "error_code": code})
    return respond(request, {"throttle_time": 0, "responses": results})
