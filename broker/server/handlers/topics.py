"""CreateTopics (v2–6), DeleteTopics (v1–5), CreatePartitions (v0–3): v6 and v5 (Kafka 2.7's) may
answer KIP-599's THROTTLING_QUOTA_EXCEEDED, which Sluice has no quota for; DeleteTopics v5's
error message stays null, as Kafka's ZooKeeper mode answers.

Create and delete go through the broker's ``ctx.topics`` (``TopicAdmin``; off the event loop
where they talk to ZooKeeper); a refused topic gets the code ``error_mapping`` gives its
exception. A topic's config is checked first as Kafka checks it: every topic config Kafka
defines is accepted (``sluice.broker.cluster.topic_config``), an unknown one is INVALID_CONFIG.
A topic's partitions get their logs on the brokers that hold its replicas — standalone, this
one, before the answer is sent. Internal topics cannot be deleted (INVALID_REQUEST, as Kafka).

CreateTopics takes a replica assignment (``assignments``) as given, each partition's replicas
in order, once it passes Kafka's checks. CreatePartitions grows a topic through the cluster
view: standalone at once; in a cluster the new partitions' replicas are assigned over the
live brokers as for a new topic (or as the request assigns them) and the controller gives
them leaders. Kafka never shrinks a topic: a
count not above the current one is INVALID_PARTITIONS.

Both answer once every new partition has a leader in this broker's view (Kafka's
DelayedCreatePartitions), so a client's Metadata right after the answer finds them led — or,
if the request's ``timeout`` passes first, REQUEST_TIMED_OUT for the topics still waiting
(the topic exists; its leaders come later). A timeout of 0 or less, or ``validate_only``,
answers at once, as Kafka. The other brokers see the leaders from the same ZooKeeper writes,
in practice within a few milliseconds of this one.

Kafka sets no limit on the partitions of one topic, nor does Sluice; what a request may not do
is exhaust the broker's file descriptors (``check_file_descriptors``: each partition is three
open files), which also refuses an int32's worth of partitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import ADMIN_ERRORS, code_for
from sluice.broker.server.file_descriptors import check_file_descriptors
from sluice.broker.server.responses import NO_TOPIC_ID, respond
from sluice.broker.server.topic_config_check import check_topic_config

log = logging.getLogger(__name__)

#: How often (s) a CreateTopics/CreatePartitions waiting for leaders looks at the view.
LEADER_POLL_SECONDS = 0.02


async def _until_led(
    ctx: BrokerContext, created: dict[str, range], timeout_ms: int, results: dict[str, Any]
) -> None:
    """Wait until every partition in ``created`` (topic → new partition numbers) has a leader
    in this broker's view; the topics still waiting at ``timeout_ms`` get REQUEST_TIMED_OUT."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = {topic: list(partitions) for topic, partitions in created.items() if partitions}
    while pending:
        for topic in list(pending):
            left = [
                p for p in pending[topic]
                if (state := ctx.cluster.partition_state(topic, p)) is None or state.leader < 0
            ]  # fmt: skip
            if left:
                pending[topic] = left
            else:
                del pending[topic]
        if not pending or time.monotonic() >= deadline:
            break
        await asyncio.sleep(LEADER_POLL_SECONDS)
    for topic, left in pending.items():
        results[topic]["error_code"] = Errors.REQUEST_TIMED_OUT
        results[topic]["error_message"] = (
            f"expected leaders for its new partitions within {timeout_ms} ms, "
            f"found {len(left)} without one yet"
        )


def _explicit_assignment(topic: Any) -> tuple[int, str | None, list[list[int]] | None]:
    """A CreateTopics topic's ``assignments`` as each partition's replicas in partition order,
    checked as Kafka's ``ZkAdminManager.createTopics`` and ``AdminZkClient`` check it: counts
    given beside it are INVALID_REQUEST; an empty or duplicated replica list, replication
    factors that differ, or partition ids that are not 0..n-1 are INVALID_REPLICA_ASSIGNMENT.
    (code, message, the assignment or None.) The topic's replicas are then taken as given
    (the cluster view refuses brokers that are not live: INVALID_REPLICA_ASSIGNMENT)."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        return Errors.INVALID_REQUEST, (
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time."
        ), None  # fmt: skip
    by_partition = {
        int(a.partition_index): [int(b) for b in a.broker_ids] for a in topic.assignments
    }
    replicas = list(by_partition.values())
    if len(by_partition) != len(topic.assignments) or sorted(by_partition) != list(
        range(len(by_partition))
    ):
        message = "partitions should be a consecutive 0-based integer sequence"
    elif any(not r for r in replicas):
        message = "every partition needs at least one replica"
    elif len({len(r) for r in replicas}) != 1:
        message = "All partitions should have the same number of replicas"
    elif any(len(set(r)) != len(r) for r in replicas):
        message = f"Duplicate replica assignment found: {by_partition}"
    else:
        return Errors.NONE, None, [by_partition[p] for p in range(len(by_partition))]
    return Errors.INVALID_REPLICA_ASSIGNMENT, message, None


async def handle_create_topics(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    cfg = ctx.config
    results: list[dict[str, Any]] = []
    created: dict[str, range] = {}
    # KafkaApis: CREATE on the cluster allows every topic, else CREATE on each topic.
    on_cluster = cluster_allowed(ctx, AclOperation.CREATE)
    for topic in body.topics:
        # v5+ (KIP-525): the created topic's counts and configs; null configs on an error.
        # v7+ (KIP-516): its topic id, all zeros unless it was created.
        result: dict[str, Any] = {"name": topic.name, "error_code": Errors.NONE,
                                  "error_message": None, "configs": None,
                                  "topic_id": NO_TOPIC_ID}  # fmt: skip
        results.append(result)
        if not on_cluster and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            result["error_code"] = Errors.TOPIC_AUTHORIZATION_FAILED
            result["error_message"] = "Authorization failed."
            continue
        partitions = topic.num_partitions
        replication = topic.replication_factor
        assignment: list[list[int]] | None = None
        if topic.assignments:
            code, message, assignment = _explicit_assignment(topic)
            if code != Errors.NONE:
                result["error_code"], result["error_message"] = code, message
                continue
            assert assignment is not None
            partitions, replication = len(assignment), len(assignment[0])
        if partitions == -1:
            partitions = cfg.num_partitions
        if replication == -1:
            replication = cfg.default_replication_factor
        config = {c.name: c.value for c in topic.configs if c.value is not None}
        try:
            check_topic_config(ctx, config)
            info = await ctx.off_loop(
                ctx.topics.create,
                topic.name, partitions, replication, config,
                validate_only=body.validate_only, assignment=assignment,
            )  # fmt: skip
            created[topic.name] = range(info.partitions)
            if not body.validate_only:
                result["topic_id"] = info.topic_id
            result["num_partitions"] = info.partitions
            result["replication_factor"] = info.replication_factor
            # The topic's own settings (DYNAMIC_TOPIC_CONFIG, source 1); Kafka also lists
            # every default, which DescribeConfigs gives here.
            result["configs"] = [
                {"name": k, "value": v, "read_only": False, "config_source": 1,
                 "is_sensitive": False}
                for k, v in sorted(info.config.items())
            ]  # fmt: skip
        except ADMIN_ERRORS as exc:
            result["error_code"] = code_for(exc)
            result["error_message"] = str(exc)
    timeout_ms = ms(body.timeout)
    if created and timeout_ms > 0 and not body.validate_only:
        await _until_led(ctx, created, timeout_ms, {r["name"]: r for r in results})
    return respond(request, {"throttle_time": 0, "topics": results})


def _named(ctx: BrokerContext, body: Any) -> list[tuple[str | None, uuid.UUID, bool]]:
    """The topics a DeleteTopics names, as (name, topic id, named by id): by name up to v5
    (``topic_names``); from v6 (KIP-516) each by name or by id (``topics``), the other
    filled in where the cluster knows the topic (else None / all zeros)."""
    if not hasattr(body, "topics"):
        return [
            (name, info.topic_id if (info := ctx.cluster.get(name)) else NO_TOPIC_ID, False)
            for name in body.topic_names
        ]
    by_id = {info.topic_id: name for name, info in ctx.cluster.topics().items()}
    named: list[tuple[str | None, uuid.UUID, bool]] = []
    for t in body.topics:
        if t.name is not None:
            info = ctx.cluster.get(t.name)
            named.append((t.name, info.topic_id if info is not None else NO_TOPIC_ID, False))
        else:
            named.append((by_id.get(t.topic_id), t.topic_id or NO_TOPIC_ID, True))
    return named


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> bytes:
    results: list[dict[str, Any]] = []
    for name, topic_id, by_id in _named(ctx, request.body):
        if name is None:  # an id no topic has (Kafka: UNKNOWN_TOPIC_ID)
            results.append({"name": None, "topic_id": topic_id,
                            "error_code": Errors.UNKNOWN_TOPIC_ID})  # fmt: skip
            continue
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
        # Named by id and refused: the name stays unsaid, as Kafka answers.
        hidden = by_id and code == Errors.TOPIC_AUTHORIZATION_FAILED
        results.append({"name": None if hidden else name, "topic_id": topic_id,
                        "error_code": code})  # fmt: skip
    return respond(request, {"throttle_time": 0, "responses": results})


async def handle_create_partitions(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    results = []
    created: dict[str, range] = {}
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
        existing = ctx.cluster.get(topic.name)
        before = existing.partitions if existing is not None else 0
        try:
            # As for a new topic: one int32 in a request must not make a broker try to open
            # more logs than it has descriptors for.
            check_file_descriptors(max(topic.count - before, 0))
            await ctx.off_loop(
                ctx.cluster.create_partitions,
                topic.name, topic.count, assignment, validate_only=body.validate_only,
            )  # fmt: skip
            created[topic.name] = range(before, topic.count)
        except ADMIN_ERRORS as exc:
            result["error_code"] = code_for(exc)
            result["error_message"] = str(exc)
    timeout_ms = ms(body.timeout)
    if created and timeout_ms > 0 and not body.validate_only:
        await _until_led(ctx, created, timeout_ms, {r["name"]: r for r in results})
    return respond(request, {"throttle_time": 0, "results": results})
