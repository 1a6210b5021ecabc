"""ApiVersions and Metadata."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sluice.broker.cluster.topic_metadata import TopicError, TopicInfo
from sluice.broker.log.errors import StorageError
from sluice.broker.protocol import APIS, Request
from sluice.broker.server import error_codes as ec
from sluice.broker.server.responses import respond
from sluice.common.topic_partition import InvalidTopicError, validate_topic

if TYPE_CHECKING:
    from sluice.broker.server.broker import Broker

log = logging.getLogger(__name__)


async def handle_api_versions(broker: Broker, request: Request) -> bytes:
    # Advertise exactly what this broker handles (kafka-python infers the broker's version
    # from these ranges, librdkafka picks request versions from them).
    api_keys = [
        {"api_key": int(s.key), "min_version": s.advertised_min, "max_version": s.advertised_max}
        for s in sorted(APIS.values(), key=lambda s: s.key)
        if s.key in broker.handlers
    ]
    return respond(request, {"error_code": ec.NONE, "api_keys": api_keys, "throttle_time": 0})


def _topic_entry(broker: Broker, info: TopicInfo) -> dict[str, Any]:
    node = broker.config.broker_id
    cluster = broker.cluster
    if cluster is None:
        partitions = [
            {"error_code": ec.NONE, "partition_index": p, "leader_id": node, "leader_epoch": 0,
             "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}
            for p in range(info.partitions)
        ]  # fmt: skip
    else:
        live = set(cluster.brokers())
        partitions = []
        for p in range(info.partitions):
            replicas = list(cluster.replicas(info.name, p))
            state = cluster.partition_state(info.name, p)
            leader = state.leader if state is not None else -1
            partitions.append({
                # No leader yet (being created) or none alive: clients retry after a refresh.
                "error_code": ec.NONE if leader >= 0 else ec.LEADER_NOT_AVAILABLE,
                "partition_index": p,
                "leader_id": leader,
                "leader_epoch": state.leader_epoch if state is not None else -1,
                "replica_nodes": replicas,
                "isr_nodes": list(state.isr) if state is not None else [],
                "offline_replicas": [r for r in replicas if r not in live],
            })  # fmt: skip
    return {
        "error_code": ec.NONE,
        "name": info.name,
        "is_internal": info.internal,
        "partitions": partitions,
    }


async def handle_metadata(broker: Broker, request: Request) -> bytes:
    body = request.body
    cfg = broker.config
    if body.topics is None:
        infos = list(broker.metadata.topics().values())
        topics = [_topic_entry(broker, info) for info in infos]
    else:
        # v4+ lets the client forbid auto-creation; before v4 it is always allowed.
        allow = getattr(body, "allow_auto_topic_creation", True) and cfg.auto_create_topics
        topics = []
        for requested in body.topics:
            name = requested.name
            info = broker.metadata.get(name)
            if info is None and allow:
                try:
                    validate_topic(name)
                    info = await broker.off_loop(
                        broker.create_topic,
                        name, cfg.num_partitions, cfg.default_replication_factor, {},
                    )  # fmt: skip
                except InvalidTopicError:
                    topics.append(
                        {"error_code": ec.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []}
                    )
                    continue
                except (TopicError, StorageError, OSError) as exc:
                    log.warning("auto-creating topic %s failed: %s", name, exc)
                    info = broker.metadata.get(name)
            if info is None:
                topics.append(
                    {"error_code": ec.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}
                )
            else:
                topics.append(_topic_entry(broker, info))
    if broker.cluster is None:
        adv = cfg.advertised
        brokers = [{"node_id": cfg.broker_id, "host": adv.host, "port": broker.port}]
        controller = cfg.broker_id
    else:
        brokers = [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in broker.cluster.brokers().values()
        ]
        controller = broker.cluster.controller_id()
    return respond(
        request,
        {
            "throttle_time": 0,
            "brokers": brokers,
            "cluster_id": broker.metadata.cluster_id,
            "controller_id": controller,
            "topics": topics,
        },
    )
