"""ElectLeaders (v0–2), AlterPartitionReassignments (v0–1), ListPartitionReassignments (v0).

All three are answered by the controller (Kafka's ``KafkaApis`` hands them to
``KafkaController``): ``ctx.cluster.partition_admin``, called off the event loop. A broker that
is not the controller answers NOT_CONTROLLER (per partition for ElectLeaders, at the top for the
reassignment APIs) and clients ask the controller again; standalone, the broker is the
controller.

**ElectLeaders** (KIP-460): ``election_type`` 0 preferred, 1 unclean (v0 has no field: preferred);
null ``topic_partitions`` means every partition, and then, as Kafka, partitions whose leader
is already right (ELECTION_NOT_NEEDED) are left out of the answer. The per-partition errors are
Kafka's: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. Like Kafka's ``DelayedElectLeader``, a successful election is
answered once this broker's view shows the new leader, or REQUEST_TIMED_OUT at ``timeout_ms``.

**AlterPartitionReassignments** (KIP-455): a replica list starts (or replaces) a reassignment, a
null one cancels it (NO_REASSIGNMENT_IN_PROGRESS if none); the answer comes once the
controller has recorded it — the data moves afterwards. v1's
``allow_replication_factor_change`` false refuses a target of another size
(INVALID_REPLICATION_FACTOR), as Kafka 3.7. **ListPartitionReassignments** lists the
reassignments in progress (replicas, adding, removing) among the partitions asked for (null:
all).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from sluice.broker.cluster.leader_election import ElectionOutcome, ElectionType
from sluice.broker.cluster.partition_admin import TopicPartitionKey
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import CONTROLLER_ERRORS, controller_code_for
from sluice.broker.server.responses import respond

LEADER_POLL_SECONDS = 0.05


def _seconds(timeout: Any) -> float:
    """A kio ``i32Timedelta`` (or plain milliseconds) as seconds, at least 1 ms."""
    if isinstance(timeout, timedelta):
        return max(timeout.total_seconds(), 0.001)
    return max(int(timeout) / 1000, 0.001)


def _by_topic(items: Iterable[tuple[TopicPartitionKey, dict[str, Any]]]) -> dict[str, list[Any]]:
    topics: dict[str, list[Any]] = {}
    for (topic, _), entry in sorted(items, key=lambda item: item[0]):
        topics.setdefault(topic, []).append(entry)
    return topics


async def _until_leaders_seen(
    ctx: BrokerContext, outcomes: dict[TopicPartitionKey, ElectionOutcome], deadline: float
) -> None:
    """Wait until this broker's view shows each elected leader; REQUEST_TIMED_OUT otherwise."""
    pending = {tp: o.target[0] for tp, o in outcomes.items() if o.target is not None}
    while pending:
        for tp, leader in list(pending.items()):
            state = ctx.cluster.partition_state(*tp)
            if state is not None and state.leader == leader:
                del pending[tp]
        if not pending or time.monotonic() >= deadline:
            break
        await asyncio.sleep(LEADER_POLL_SECONDS)
    for tp in pending:
        outcomes[tp] = ElectionOutcome(Errors.REQUEST_TIMED_OUT, "Leader election timed out")


async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    raw_type = getattr(body, "election_type", ElectionType.PREFERRED)  # v0: preferred only
    partitions: list[TopicPartitionKey] | None = None
    if body.topic_partitions is not None:
        partitions = [(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    if raw_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        return respond(request, {"throttle_time": 0, "error_code": Errors.INVALID_REQUEST,
                                 "replica_election_results": []})  # fmt: skip
    timeout = _seconds(body.timeout)
    deadline = time.monotonic() + timeout
    try:
        outcomes = await ctx.off_loop(
            ctx.cluster.partition_admin.elect_leaders, ElectionType(raw_type), partitions, timeout
        )
    except CONTROLLER_ERRORS as exc:
        error = controller_code_for(exc)
        outcomes = {tp: ElectionOutcome(error, str(exc)) for tp in partitions or []}
    await _until_leaders_seen(ctx, outcomes, deadline)
    if partitions is None:
        outcomes = {
            tp: o for tp, o in outcomes.items() if o.error is not Errors.ELECTION_NOT_NEEDED
        }
    entries = (
        (tp, {"partition_id": tp[1], "error_code": o.error,
              "error_message": None if o.error is Errors.NONE else o.message})
        for tp, o in outcomes.items()
    )  # fmt: skip
    results = [
        {"topic": topic, "partition_result": entries_}
        for topic, entries_ in _by_topic(entries).items()
    ]
    return respond(
        request,
        {"throttle_time": 0, "error_code": Errors.NONE, "replica_election_results": results},
    )


async def handle_alter_partition_reassignments(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    allow_rf_change = getattr(body, "allow_replication_factor_change", True)
    targets: dict[TopicPartitionKey, tuple[int, ...] | None] = {}
    refused: dict[TopicPartitionKey, tuple[Errors, str | None]] = {}
    for t in body.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            target = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            current = ctx.cluster.replicas(*tp)
            if (
                not allow_rf_change
                and target is not None
                and current
                and (len(target) != len(current))
            ):
                refused[tp] = (
                    Errors.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(current)} to {len(target)}",
                )
            else:
                targets[tp] = target
    try:
        answers = await ctx.off_loop(
            ctx.cluster.partition_admin.alter_reassignments, targets, _seconds(body.timeout)
        )
    except CONTROLLER_ERRORS as exc:
        error = controller_code_for(exc)
        return respond(request, {"throttle_time": 0, "error_code": error,
                                 "error_message": str(exc), "responses": []})  # fmt: skip
    answers.update(refused)
    entries = (
        (tp, {"partition_index": tp[1], "error_code": error, "error_message": message})
        for tp, (error, message) in answers.items()
    )
    responses = [{"name": topic, "partitions": ps} for topic, ps in _by_topic(entries).items()]
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE,
                             "error_message": None, "responses": responses})  # fmt: skip


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    partitions: list[TopicPartitionKey] | None = None
    if body.topics is not None:
        partitions = [(t.name, p) for t in body.topics for p in t.partition_indexes]
    try:
        ongoing = await ctx.off_loop(
            ctx.cluster.partition_admin.list_reassignments, partitions, _seconds(body.timeout)
        )
    except CONTROLLER_ERRORS as exc:
        error = controller_code_for(exc)
        return respond(request, {"throttle_time": 0, "error_code": error,
                                 "error_message": str(exc), "topics": []})  # fmt: skip
    entries = (
        (tp, {"partition_index": tp[1], "replicas": list(a.replicas),
              "adding_replicas": list(a.adding), "removing_replicas": list(a.removing)})
        for tp, a in ongoing.items()
    )  # fmt: skip
    topics = [{"name": topic, "partitions": ps} for topic, ps in _by_topic(entries).items()]
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE,
                             "error_message": None, "topics": topics})  # fmt: skip
