"""ApiVersions and Metadata.

Metadata answers from the cluster view: the live brokers, the controller, and each topic's
partitions with their leader, leader epoch, replicas and ISR — standalone, this broker alone,
leading every partition at epoch 0. A partition with no leader yet (being created) or none
alive is LEADER_NOT_AVAILABLE, and clients retry after a refresh. A requested topic that does
not exist is created if ``auto.create.topics.enable`` (and, from v4, the client) allows it.

Authorization (KafkaApis): a topic needs DESCRIBE. Asked for all topics, the others are left
out; asked by name, they answer TOPIC_AUTHORIZATION_FAILED (whether they exist or not).
Auto-creation also needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.

Authorized operations (KIP-430, v8+): asked for (``include_topic_authorized_operations``), each
topic answered carries the bitfield of what the principal may do on it, and (v8-10,
``include_cluster_authorized_operations``) the answer what it may do on the cluster
(``authorized_operations``); not asked, ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

import logging
import uuid

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.topic_metadata import TopicInfo
from sluice.broker.protocol import APIS, Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.protocol.metadata_response import (
    NOT_REQUESTED,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from sluice.broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.authorized_operations import authorized_operations
from sluice.broker.server.context import BrokerContext, client_endpoint
from sluice.broker.server.error_mapping import ADMIN_ERRORS, code_for
from sluice.broker.server.responses import NO_TOPIC_ID, respond
from sluice.common.topic_partition import InvalidTopicError, validate_topic

log = logging.getLogger(__name__)


async def handle_api_versions(ctx: BrokerContext, request: Request) -> bytes:
    # Advertise exactly what this broker handles (kafka-python infers the broker's version
    # from these ranges, librdkafka picks request versions from them).
    api_keys = [
        {"api_key": int(s.key), "min_version": s.advertised_min, "max_version": s.advertised_max}
        for s in sorted(APIS.values(), key=lambda s: s.key)
        if s.key in ctx.handlers
    ]
    return respond(request, {"error_code": Errors.NONE, "api_keys": api_keys, "throttle_time": 0})


def _topic_entry(cluster: ClusterView, info: TopicInfo, live: set[int]) -> MetadataTopic:
    partitions = []
    for p in range(info.partitions):
        replicas = cluster.replicas(info.name, p)
        state = cluster.partition_state(info.name, p)
        leader = state.leader if state is not None else -1
        partitions.append(
            MetadataPartition(
                partition_index=p,
                leader_id=leader,
                error_code=Errors.NONE if leader >= 0 else Errors.LEADER_NOT_AVAILABLE,
                leader_epoch=state.leader_epoch if state is not None else -1,
                replica_nodes=replicas,
                isr_nodes=state.isr if state is not None else (),
                offline_replicas=[r for r in replicas if r not in live],
            )
        )
    return MetadataTopic(
        info.name,
        topic_id=info.topic_id,  # v10+: KIP-848 and share assignments name topics by id
        is_internal=info.internal,
        partitions=partitions,
    )


def _error(code: int, name: str | None, topic_id: uuid.UUID = NO_TOPIC_ID) -> MetadataTopic:
    """A topic the answer has no partitions for (v10+ carries the id asked, or the zero id)."""
    return MetadataTopic(name, error_code=code, topic_id=topic_id)


def _refused(name: str) -> MetadataTopic:
    return MetadataTopic(name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED, topic_id=NO_TOPIC_ID)


async def handle_metadata(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    cfg = ctx.config
    cluster = ctx.cluster
    live = set(cluster.brokers())
    if body.topics is None:
        infos = [
            info
            for info in cluster.topics().values()
            if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name)
        ]
        topics = [_topic_entry(cluster, info, live) for info in infos]
    else:
        # v4+ lets the client forbid auto-creation; before v4 it is always allowed.
        allow = getattr(body, "allow_auto_topic_creation", True) and cfg.auto_create_topics
        topics = []
        by_id: dict[uuid.UUID, str] | None = None
        for requested in body.topics:
            name = requested.name
            if name is None:  # v12+: asked by topic id (a KIP-848 consumer's assignment)
                if by_id is None:
                    by_id = {i.topic_id: n for n, i in cluster.topics().items()}
                name = by_id.get(requested.topic_id)
                if name is None:
                    # The answer's name is nullable from v12 only; before, the empty name.
                    unnamed = None if request.api_version >= 12 else ""
                    topics.append(_error(Errors.UNKNOWN_TOPIC_ID, unnamed, requested.topic_id))
                    continue
            if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                topics.append(_refused(name))
                continue
            info = cluster.get(name)
            if info is None and allow:
                if not cluster_allowed(ctx, AclOperation.CREATE) and not allowed(
                    ctx, AclOperation.CREATE, ResourceType.TOPIC, name
                ):
                    topics.append(_refused(name))
                    continue
                try:
                    validate_topic(name)
                    info = await ctx.off_loop(
                        ctx.topics.create,
                        name, cfg.num_partitions, cfg.default_replication_factor, {},
                    )  # fmt: skip
                except InvalidTopicError as exc:
                    topics.append(_error(code_for(exc), name))
                    continue
                except ADMIN_ERRORS as exc:
                    log.warning("auto-creating topic %s failed: %s", name, exc)
                    info = cluster.get(name)
            if info is None:
                topics.append(_error(Errors.UNKNOWN_TOPIC_OR_PARTITION, name))
            else:
                topics.append(_topic_entry(cluster, info, live))
    if getattr(body, "include_topic_authorized_operations", False):
        for entry in topics:
            if entry.error_code == Errors.NONE and entry.name is not None:
                entry.topic_authorized_operations = authorized_operations(
                    ctx, ResourceType.TOPIC, entry.name
                )
    cluster_ops = NOT_REQUESTED
    if getattr(body, "include_cluster_authorized_operations", False):
        cluster_ops = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
    brokers = [
        MetadataBroker(b.broker_id, endpoint[0], endpoint[1], b.rack)
        for b in cluster.brokers().values()
        if (endpoint := client_endpoint(b)) is not None  # Kafka leaves out a broker without it
    ]
    # Encoded by hand (``metadata_response``): kio's generic encoder cost ~6 ms per 800
    # partitions on the event loop.
    return encode_metadata_response(
        request.header,
        brokers,
        topics,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id(),
        cluster_authorized_operations=cluster_ops,  # v8-10
    )
