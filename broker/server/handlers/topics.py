"""CreateTopics (v2–4), DeleteTopics (v1–3), CreatePartitions (v0–3).

Create and delete go through the broker's ``ctx.topics`` (``TopicAdmin``; off the event loop
where they talk to ZooKeeper); a refused topic gets the code ``error_mapping`` gives its
exception. A topic's config is checked first as Kafka checks it: every topic config Kafka
defines is accepted (``sluice.broker.cluster.topic_config``), an unknown one is INVALID_CONFIG.
A topic's partitions get their logs on the brokers that hold its replicas — standalone, this
one, before the answer is sent. Internal topics cannot be deleted (INVALID_REQUEST, as Kafka).

CreatePartitions grows a topic through the cluster view: standalone at once; in a cluster the
new partitions' replicas are assigned over the live brokers as for a new topic (or as the
request assigns them) and the controller gives them leaders. Kafka never shrinks a topic: a
count not above the current one is INVALID_PARTITIONS.
"""

from __future__ import annotations

import logging
from typing import Any

from sluice.broker.cluster.topic_metadata import InvalidPartitionsError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import ADMIN_ERRORS, code_for
from sluice.broker.server.responses import respond
from sluice.broker.server.topic_admin import MAX_PARTITIONS_PER_TOPIC
from sluice.broker.server.topic_config_check import check_topic_config

log = logging.getLogger(__name__)


async def handle_create_topics(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    cfg = ctx.config
    results: list[dict[str, Any]] = []
    # KafkaApis: CREATE on the cluster allows every topic, else CREATE on each topic.
    on_cluster = cluster_allowed(ctx, AclOperation.CREATE)
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": Errors.NONE,
                                  "error_message": None}  # fmt: skip
        results.append(result)
        if not on_cluster and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            result["error_code"] = Errors.TOPIC_AUTHORIZATION_FAILED
            result["error_message"] = "Authorization failed."
            continue
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
            check_topic_config(ctx, config)
            await ctx.off_loop(
                ctx.topics.create,
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
        if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            # KafkaApis: a topic one may describe but that does not exist is unknown.
            describable = allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            code = (
                Errors.UNKNOWN_TOPIC_OR_PARTITION
                if describable and info is None
                else Errors.TOPIC_AUTHORIZATION_FAILED
            )
        elif info is not None and info.internal:
            code = Errors.INVALID_REQUEST  # Kafka refuses to delete internal topics too
        else:
            try:
                await ctx.off_loop(ctx.topics.delete, name)
            except ADMIN_ERRORS as exc:
                code = code_for(exc)
        results.append({"name": name, "error_code": code})
    return respond(request, {"throttle_time": 0, "responses": results})


async def handle_create_partitions(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    results = []
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": Errors.NONE,
                                  "error_message": None}  # fmt: skip
        results.append(result)
        if not allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            result["error_code"] = Errors.TOPIC_AUTHORIZATION_FAILED
            result["error_message"] = "Authorization failed."
            continue
        assignment = (
            None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        )
        try:
            # The limit of a new topic (TopicAdmin's): one int32 in a request must not make
            # a broker create millions of logs on its event loop.
            if topic.count > MAX_PARTITIONS_PER_TOPIC:
                raise InvalidPartitionsError(
                    f"expected at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic, "
                    f"found {topic.count}"
                )
            await ctx.off_loop(
                ctx.cluster.create_partitions,
                topic.name, topic.count, assignment, validate_only=body.validate_only,
            )  # fmt: skip
        except ADMIN_ERRORS as exc:
            result["error_code"] = code_for(exc)
            result["error_message"] = str(exc)
    return respond(request, {"throttle_time": 0, "results": results})
