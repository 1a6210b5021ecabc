"""The nightly load when a worker cannot see the driver's ``file://`` warehouse — as on any
second machine — must fail loudly, publish nothing and move no offset; a rerun on a worker that
shares the disk then loads everything exactly once.

The worker runs in its own mount namespace with an empty tmpfs over the warehouse path
(``WorkerSpec(private_paths=...)``, needs root as locally and in CI): its executors write
their Parquet files and everything else into a warehouse only they see. Before the
verify phase accounted for the plan, this load exited 0 with "published 0 rows" and a manifest
past the data (issue 15). One cluster serves the module; the load runs as its own process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.pipeline.table.commit import published_runs
from sluice.testing.broker import create_topic
from sluice.testing.ci import in_ci
from sluice.testing.spark_cluster import (
    SparkCluster,
    WorkerSpec,
    private_mounts_missing,
    spark_cluster_missing,
)
from tests.pipeline.broker_fixture import produce, simple_records
from tests.pipeline.load.cluster_load import (
    assert_exactly_once,
    reports,
    run_load_process,
    table_keys,
    write_config,
)

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def _require(missing: str | None, what: str) -> None:
    if missing is not None:
        message = f"{what} cannot run here: {missing}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("private") / "warehouse"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, warehouse: Path) -> Iterator[SparkCluster]:
    _require(spark_cluster_missing(), "a Spark standalone cluster")
    _require(private_mounts_missing(), "a worker in its own mount namespace")
    warehouse.mkdir(parents=True)
    spec = WorkerSpec(private_paths=(warehouse,))
    with SparkCluster([spec], root=tmp_path_factory.mktemp("load-cluster")) as started:
        yield started


def test_a_worker_that_cannot_see_the_warehouse_fails_the_load_then_a_rerun_loads_once(
    cluster: SparkCluster, warehouse: Path, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 8_000))
    config = write_config(
        tmp_path / "load.properties", kafka_broker.bootstrap, topic_name, warehouse,
        minPartitions="4",
    )  # fmt: skip
    table = f"file://{warehouse}/events"

    status, output = run_load_process(cluster, config, tmp_path / "private.log")
    assert status == 1, output[-4000:]
    assert "not accounted for" in output, output[-4000:]
    for partition in (0, 1):
        assert f"{topic_name}-{partition} [0, 4000): Spark's tasks wrote 4000 rows" in output
    assert "a path the driver cannot see" in output
    assert "published 0 rows" not in output
    assert published_runs(table) == []  # nothing published, so no offset moved
    assert table_keys(warehouse) == []
    assert not list((warehouse / "_staging" / "events").glob("*")), "staging left behind"
    [failed] = reports(warehouse)
    assert failed["status"] == "failed" and "StrandedFilesError" in failed["error"]

    # The machine that could not see the disk goes; one that shares it comes.
    [private] = cluster.workers
    sharing = cluster.add_worker()
    private.kill_with_executors()
    assert cluster.wait_for_alive_workers(1) == [sharing]

    status, output = run_load_process(cluster, config, tmp_path / "shared.log")
    assert status == 0, output[-4000:]
    assert_exactly_once(warehouse, produced)
    [run] = published_runs(table)
    assert run.sequence == 1
    assert [r["status"] for r in reports(warehouse)] == ["failed", "published"]
