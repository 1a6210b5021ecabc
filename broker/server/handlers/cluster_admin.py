"""DescribeCluster (v0–1), DescribeLogDirs (v1–4), AlterReplicaLogDirs (v1–2): the cluster and
this broker's disks.

DescribeCluster answers from the cluster view like Metadata: the live brokers, the controller,
the cluster id (``endpoint_type`` 1, brokers) and, asked for
(``include_cluster_authorized_operations``), the bitfield of what the principal may do on the
cluster (KIP-430; ``Integer.MIN_VALUE`` when not asked). DescribeLogDirs lists, for each
of this broker's ``log.dirs``, the partitions whose logs it holds with their size on disk
(``offset_lag`` 0), the partitions moving there as future replicas (below), and from v4 the
dir's total and usable bytes; the request's ``topics`` narrows the listing (null: every partition).

AlterReplicaLogDirs (Kafka's ``ReplicaManager.alterReplicaLogDirs``) answers per partition, in
Kafka's order: a path that is not one of ``log.dirs`` is LOG_DIR_NOT_FOUND; while any log dir
is offline, KAFKA_STORAGE_ERROR (Kafka creates no future log then); a move of the partition
to another dir under way is cancelled; the dir is remembered for the partition if its
replica is not created yet (``set_preferred_dir``) and the answer is REPLICA_NOT_AVAILABLE;
otherwise NONE, and if the replica is in another dir its log moves there in the background
(``LogManager.start_move``; ``log_mover`` has the steps). While it moves, DescribeLogDirs
lists the partition a second time under the destination, with ``is_future_key`` true, the
bytes copied so far and, as ``offset_lag``, how far the copy's whole segments are behind the
log end; once done, only under the destination.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from sluice.broker.log.errors import StorageError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import CLUSTER_RESOURCE_NAME, ResourceType
from sluice.broker.server.authorized_operations import NOT_REQUESTED, authorized_operations
from sluice.broker.server.context import BrokerContext, client_endpoint
from sluice.broker.server.error_mapping import log_dir_code_for
from sluice.broker.server.responses import respond
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)


async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> bytes:
    cluster = ctx.cluster
    brokers = [
        {"broker_id": b.broker_id, "host": endpoint[0], "port": endpoint[1], "rack": b.rack}
        for b in cluster.brokers().values()
        if (endpoint := client_endpoint(b)) is not None
    ]
    operations = NOT_REQUESTED
    if request.body.include_cluster_authorized_operations:
        operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
    return respond(
        request,
        {
            "throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "endpoint_type": 1, "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id(), "brokers": brokers,
            "cluster_authorized_operations": operations,
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
    dirs = list(ctx.log_manager.log_dirs)  # resolved, as the logs' own dirs
    listing: dict[Path, dict[str, list[dict[str, Any]]]] = {d: {} for d in dirs}
    for tp, partition in sorted(ctx.replicas.partitions.items()):
        if wanted is not None and tp.partition not in wanted.get(tp.topic, set()):
            continue
        home = _dir_of(partition.log.directory, dirs)
        if home is None:
            continue
        listing[home].setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_size": partition.log.size_bytes,
             "offset_lag": 0, "is_future_key": False}
        )  # fmt: skip
    for tp, (dest, copied, lag) in sorted(ctx.log_manager.future_logs().items()):
        if dest in listing and (wanted is None or tp.partition in wanted.get(tp.topic, set())):
            listing[dest].setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "partition_size": copied,
                 "offset_lag": lag, "is_future_key": True}
            )  # fmt: skip
    results = []
    for d, topics in listing.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable, error = usage.total, usage.free, Errors.NONE
        except OSError as exc:
            total, usable, error = -1, -1, log_dir_code_for(exc)
        results.append(
            {"error_code": error, "log_dir": str(d), "total_bytes": total, "usable_bytes": usable,
             "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())]}
        )  # fmt: skip
    return respond(request, {"throttle_time": 0, "error_code": Errors.NONE, "results": results})


def _move(ctx: BrokerContext, tp: TopicPartition, path: str) -> Errors:
    manager = ctx.log_manager
    dest = manager.log_dir_of(path)
    if dest is None:
        return Errors.LOG_DIR_NOT_FOUND
    if manager.dir_failures.offline_dirs():
        log.warning("%s: not moved to %s: a log dir is offline", tp, dest)
        return Errors.KAFKA_STORAGE_ERROR
    if ctx.replicas.partitions.get(tp) is None:
        manager.set_preferred_dir(tp, dest)
        return Errors.REPLICA_NOT_AVAILABLE
    if manager.dir_of(tp.topic, tp.partition) == dest:
        manager.cancel_move(tp, f"the replica was asked to stay in {dest}")
        return Errors.NONE
    try:
        manager.start_move(tp, dest)
    except StorageError as exc:
        log.warning("%s: not moved to %s: %s", tp, dest, exc)
        return log_dir_code_for(exc)
    except KeyError as exc:  # its log was deleted meanwhile
        return log_dir_code_for(exc)
    return Errors.NONE


async def handle_alter_replica_log_dirs(ctx: BrokerContext, request: Request) -> bytes:
    topics: dict[str, list[dict[str, Any]]] = {}
    for entry in request.body.dirs:
        for t in entry.topics:
            for p in t.partitions:
                error = _move(ctx, TopicPartition(t.name, p), entry.path)
                topics.setdefault(t.name, []).append({"partition_index": p, "error_code": error})
    results = [{"topic_name": name, "partitions": ps} for name, ps in topics.items()]
    return respond(request, {"throttle_time": 0, "results": results})
