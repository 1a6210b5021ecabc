"""DescribeCluster (v0–1) and DescribeLogDirs (v1–4): the cluster and this broker's disks.

DescribeCluster answers from the cluster view like Metadata: the live brokers, the controller,
the cluster id (``endpoint_type`` 1, brokers; authorized operations are not computed: the
"not requested" value). DescribeLogDirs lists, for each of this broker's ``log.dirs``, the
partitions whose logs it holds with their size on disk (``offset_lag`` 0: Sluice moves no logs
between dirs, so there is no future replica to lag), and from v4 the dir's total and usable
bytes; the request's ``topics`` narrows the listing (null: every partition).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond


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
