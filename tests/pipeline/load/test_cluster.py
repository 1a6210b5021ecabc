"""The nightly load on a real Spark standalone cluster: a master and two workers sharing the
driver's disk, each a JVM of its own (``sluice.testing.spark_cluster``).

* An executor JVM killed with -9 mid-load: its tasks run again elsewhere and the table holds
  every offset exactly once.
* The code reaches the executors the documented way: a zip of the wheel in
  ``spark.submit.pyFiles``, with executors running a Python that has no sluice installed — the
  load can only work if they import it from the shipped file.

One cluster serves the module. Without Java or pyspark the tests skip (under ``CI=true`` they
fail). The loads run as their own processes (``cluster_load``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.broker import create_topic
from sluice.testing.ci import in_ci
from sluice.testing.net import wait_until
from sluice.testing.spark_cluster import SparkCluster, spark_cluster_missing
from tests.pipeline.broker_fixture import produce
from tests.pipeline.load.cluster_load import (
    LOAD_TIMEOUT,
    REPO,
    assert_exactly_once,
    finish_load,
    reports,
    start_load,
    write_config,
)

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def _require(missing: str | None) -> None:
    if missing is not None:
        message = f"a Spark standalone cluster cannot run here: {missing}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    _require(spark_cluster_missing())
    with SparkCluster(workers=2, root=tmp_path_factory.mktemp("load-cluster")) as started:
        yield started


def _records(topic: str, partitions: int, count: int, size: int) -> list[dict[str, Any]]:
    pad = b"x" * size
    return [
        {"topic": topic, "partition": i % partitions, "key": str(i).encode(), "value": pad}
        for i in range(count)
    ]


def test_exactly_once_with_an_executor_killed_mid_load(
    cluster: SparkCluster, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, _records(topic_name, 2, 60_000, 100))
    warehouse = tmp_path / "warehouse"
    config = write_config(
        tmp_path / "load.properties", kafka_broker.bootstrap, topic_name, warehouse,
        maxRecordsPerPartition="2000",
    )  # fmt: skip
    splits = 30
    log = tmp_path / "load.log"
    load = start_load(cluster, config, log)
    try:
        staging = warehouse / "_staging" / "events"

        def some_splits_done() -> int | None:
            # A split's file gets its final name only once the split is written.
            done = len(list(staging.glob("*/topic=*/date=*/part-*.parquet")))
            return done if done > 0 else None

        done_at_kill = wait_until(some_splits_done, LOAD_TIMEOUT, "a first split to finish")
        executors = cluster.executors()
        assert len(executors) == 2, executors
        victim = executors[0]
        victim.kill()  # SIGKILL: its running task dies mid-split
        wait_until(lambda: not victim.running(), 10, f"executor {victim.pid} to die")
        assert load.poll() is None, "the load finished before the executor was killed"
        status, output = finish_load(load, log)
    finally:
        if load.poll() is None:
            load.kill()
    assert done_at_kill < splits
    assert status == 0, output[-4000:]
    assert_exactly_once(warehouse, produced)
    [report] = reports(warehouse)
    assert report["status"] == "published" and report["total_rows"] == 60_000
    assert report["progress"]["splits_total"] == splits
    assert report["progress"]["splits_done"] == splits
    assert report["progress"]["rows_per_second"] > 0
    assert "splits" in output and "rows/s" in output


@pytest.fixture(scope="module")
def sluice_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel --no-deps .`` builds, copied to a ``.zip`` (PySpark puts only
    ``.zip``/``.egg``/``.jar`` files of ``spark.submit.pyFiles`` on executors' ``sys.path``)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [wheel] = out.glob("sluice-*.whl")
    shipped = out / "sluice.zip"
    shutil.copyfile(wheel, shipped)
    return shipped


@pytest.fixture(scope="module")
def python_without_sluice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv whose Python sees this venv's third-party packages (pyarrow,
    confluent-kafka...) through a ``.pth`` line but not sluice: the editable install's import
    hook is a ``.pth`` file of this venv's site-packages, which a path line does not run."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    ours = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, check=True)
    theirs = subprocess.run([python, "-c", ask], capture_output=True, text=True, check=True)
    Path(theirs.stdout.strip(), "third-party.pth").write_text(ours.stdout.strip() + "\n")
    probe = subprocess.run(
        [python, "-c", "import pyarrow, confluent_kafka, sluice"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert "No module named 'sluice'" in probe.stderr, probe.stderr
    return python


def test_executors_import_sluice_from_the_shipped_zip(
    cluster: SparkCluster,
    kafka_broker: Any,
    topic_name: str,
    tmp_path: Path,
    sluice_zip: Path,
    python_without_sluice: Path,
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, _records(topic_name, 2, 2_000, 50))
    warehouse = tmp_path / "warehouse"
    config = write_config(
        tmp_path / "load.properties", kafka_broker.bootstrap, topic_name, warehouse,
        minPartitions="4",
    )  # fmt: skip
    log = tmp_path / "load.log"
    began = time.monotonic()
    load = start_load(
        cluster,
        config,
        log,
        **{
            "spark.pyspark.python": str(python_without_sluice),
            "spark.submit.pyFiles": str(sluice_zip),
        },
    )
    status, output = finish_load(load, log)
    assert status == 0, output[-4000:]
    assert time.monotonic() - began < LOAD_TIMEOUT
    assert f"executors run Python {python_without_sluice}" in output
    assert_exactly_once(warehouse, produced)
