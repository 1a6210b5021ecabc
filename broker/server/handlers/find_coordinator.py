"""FindCoordinator (v0–2), for a group (key type 0) and for a transactional id (key type 1).

A group's coordinator is the leader of its ``__consumer_offsets`` partition, which the first
FindCoordinator creates (replication min(3, live brokers), as Kafka does). A transactional
id's coordinator is the leader of its ``__transaction_state`` partition; asking for one
builds this broker's transaction coordinator (``ctx.transactions``), which creates that
topic on first use. Either way the answer is the leader's endpoint on the listener the
client connected to, or COORDINATOR_NOT_AVAILABLE (retriable) while there is none. Any other
key type is answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import contextlib

from sluice.broker.cluster.topic_metadata import MetadataUnavailableError, TopicExistsError
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext, client_endpoint
from sluice.broker.server.error_mapping import coordinator_code_for
from sluice.broker.server.responses import respond
from sluice.broker.transactions.transaction_log import TOPIC as TXN_TOPIC
from sluice.broker.transactions.transaction_log import partition_for

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> bytes:
    key_type = getattr(request.body, "key_type", 0)
    if key_type == TRANSACTION_KEY_TYPE:
        return await _find_transaction_coordinator(ctx, request)
    if key_type != GROUP_KEY_TYPE:
        return respond(request, {"throttle_time": 0,
                                 "error_code": Errors.COORDINATOR_NOT_AVAILABLE,
                                 "error_message": f"expected key type 0 or 1, found {key_type}",
                                 "node_id": -1, "host": "", "port": -1})  # fmt: skip
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.body.key):
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.GROUP_AUTHORIZATION_FAILED,
            "error_message": None, "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    try:
        found = await _coordinator(ctx, request.body.key)
        error = Errors.NONE if found is not None else Errors.COORDINATOR_NOT_AVAILABLE
    except MetadataUnavailableError as exc:
        found, error = None, coordinator_code_for(exc)
    if found is None:
        return respond(request, {
            "throttle_time": 0, "error_code": error,
            "error_message": "the group's offsets partition has no leader yet",
            "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    node, host, port = found
    return respond(
        request,
        {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
         "node_id": node, "host": host, "port": port},
    )  # fmt: skip


async def _coordinator(ctx: BrokerContext, group_id: str) -> tuple[int, str, int] | None:
    """The leader of the group's ``__consumer_offsets`` partition (creating the topic on
    first use, as Kafka does: replication min(3, live brokers)); None while it has none."""
    cluster = ctx.cluster
    if cluster.get(OFFSETS_TOPIC) is None:
        replication = min(3, len(cluster.brokers()))
        with contextlib.suppress(TopicExistsError):  # another broker created it meanwhile
            await ctx.off_loop(
                cluster.create_topic,
                OFFSETS_TOPIC, ctx.config.offsets_topic_num_partitions, replication,
                {"cleanup.policy": "compact"},
                internal=True,
            )  # fmt: skip
    state = cluster.partition_state(OFFSETS_TOPIC, ctx.offsets.partition_for(group_id))
    if state is None or state.leader < 0:
        return None
    leader = cluster.brokers().get(state.leader)
    endpoint = None if leader is None else client_endpoint(leader)
    if leader is None or endpoint is None:
        return None
    return leader.broker_id, endpoint[0], endpoint[1]


async def _find_transaction_coordinator(ctx: BrokerContext, request: Request) -> bytes:
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.body.key):
        return respond(request, {
            "throttle_time": 0, "error_code": Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "error_message": None, "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    found = None
    endpoint: tuple[str, int] | None = None
    try:
        coordinator = await ctx.transactions.get()
        partition = partition_for(request.body.key, coordinator.state.num_partitions)
        state = ctx.cluster.partition_state(TXN_TOPIC, partition)
        if state is not None and state.leader >= 0:
            found = ctx.cluster.brokers().get(state.leader)
        endpoint = None if found is None else client_endpoint(found)
        if endpoint is None:
            found = None  # no leader yet, or one without the client's listener
        error = Errors.NONE if found is not None else Errors.COORDINATOR_NOT_AVAILABLE
    except MetadataUnavailableError as exc:
        error = coordinator_code_for(exc)
    if found is None:
        return respond(request, {
            "throttle_time": 0, "error_code": error,
            "error_message": "the transactional id's state partition has no leader yet",
            "node_id": -1, "host": "", "port": -1,
        })  # fmt: skip
    assert endpoint is not None  # found only with an endpoint
    return respond(
        request,
        {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
         "node_id": found.broker_id, "host": endpoint[0], "port": endpoint[1]},
    )  # fmt: skip
