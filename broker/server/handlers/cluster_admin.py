"""DescribeCluster (v0–1), DescribeLogDirs (v1–4), AlterReplicaLogDirs (v1–2): the cluster and
this broker's disks.

DescribeCluster answers from the cluster view like Metadata: the live brokers, the controller,
the cluster id (``endpoint_type`` 1, brokers; authorized operations are not computed: the
"not requested" value). DescribeLogDirs lists, for each of this broker's ``log.dirs``, the
partitions whose logs it holds with their size on disk (``offset_lag`` 0: Sluice moves no logs
between dirs, so there is no future replica to lag), and from v4 the dir's total and usable
bytes; the request's ``topics`` narrows the listing (null: every partition).

AlterReplicaLogDirs (Kafka's ``ReplicaManager.alterReplicaLogDirs``) answers per partition: a
path that is not one of ``log.dirs`` is LOG_DIR_NOT_FOUND, a partition with no replica here
REPLICA_NOT_AVAILABLE, a replica already in that dir NONE (nothing to move). Moving a replica
to another dir needs a copy beside the live log (Kafka's future replica) that the log manager
does not offer yet: such a request is answered KAFKA_STORAGE_ERROR and moves nothing, so
DescribeLogDirs never shows a future replica.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)


async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> bytes:
    cluster = ctx.cluster
    brokers = [
        {"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
        for b in cluster.brokers().values()
    ]
    return respond(
        request,
        {
            "throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "endpoint_type": 1, "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id(), "brokers": brokers,
            "cluster_authorized_operations": -(1 << 31),
        },
    )  # fmt: skip


def _dir_of(path: Path, dirs: list[Path]) -> Path | None:
    for d in dirs:
        if path.parent == d:
            return d
    return None


async def handle_describe_log_dirs(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    wanted: dict[str, set[int]] | None = None
    if body.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in body.topics}
    dirs = [Path(os.path.abspath(d)) for d in ctx.config.log_dirs]
    listing: dict[Path, dict[str, list[dict[str, Any]]]] = {d: {} for d in dirs}
    for tp, partition in sorted(ctx.replicas.partitions.items()):
        if wanted is not None and tp.partition not in wanted.get(tp.topic, set()):
            continue
        home = _dir_of(Path(os.path.abspath(partition.log.directory)), dirs)
        if home is None:
            continue
        listing[home].setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_size": partition.log.size_bytes,
             "offset_lag": 0, "is_future_key": False}
        )  # fmt: skip
    results = []
    for d, topics in listing.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable, error = usage.total, usage.free, Errors.NONE
        except OSError:
            total, usable, error = -1, -1, Errors.KAFKA_STORAGE_ERROR
        results.append(
            {"error_code": error, "log_dir": str(d), "total_bytes": total, "usable_bytes": usable,
             "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())]}
        )  # fmt: skip
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE, "results": results})


def _move_error(ctx: BrokerContext, tp: TopicPartition, dest: Path, dirs: list[Path]) -> Errors:
    if dest not in dirs:
        return Errors.LOG_DIR_NOT_FOUND
    partition = ctx.replicas.partitions.get(tp)
    if partition is None:
        return Errors.REPLICA_NOT_AVAILABLE
    if _dir_of(Path(os.path.abspath(partition.log.directory)), dirs) == dest:
        return Errors.NONE
    log.warning("%s: not moved to %s: moving a replica between log dirs is not supported", tp, dest)
    return Errors.KAFKA_STORAGE_ERROR


async def handle_alter_replica_log_dirs(ctx: BrokerContext, request: Request) -> bytes:
    dirs = [Path(os.path.abspath(d)) for d in ctx.config.log_dirs]
    topics: dict[str, list[dict[str, Any]]] = {}
    for entry in request.body.dirs:
        dest = Path(os.path.abspath(entry.path))
        for t in entry.topics:
            for p in t.partitions:
                error = _move_error(ctx, TopicPartition(t.name, p), dest, dirs)
                topics.setdefault(t.name, []).append({"partition_index": p, "error_code": error})
    results = [{"topic_name": name, "partitions": ps} for name, ps in topics.items()]
    return respond(request, {"throttle_time": 0, "results": results})
