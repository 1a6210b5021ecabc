"""Helpers for the nightly load on a real Spark standalone cluster (``test_cluster*.py``).

The load runs as its own process (``python -m sluice.jobs.nightly_load``), the way a user runs
it, in its own process group: a Python process holds one SparkContext, and the test process
may already hold the pipeline tests' ``local[2]`` one. The cluster's settings
(``SparkCluster.application_conf``) go in as ``--override spark.*=…``; everything else is the
properties file. ``table_keys`` reads the published table back with duckdb.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

from sluice.testing.spark_cluster import SparkCluster
from tests.pipeline.broker_fixture import Produced

REPO = Path(__file__).resolve().parents[3]
LOAD_TIMEOUT = 300.0


def write_config(path: Path, bootstrap: str, topic: str, warehouse: Path, **extra: str) -> Path:
    lines = [
        f"kafka.bootstrap.servers={bootstrap}",
        f"topics={topic}",
        f"warehouse.path={warehouse}",
        *(f"{key}={value}" for key, value in extra.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_load(
    cluster: SparkCluster, config: Path, log: Path, **spark: str
) -> subprocess.Popen[str]:
    """The load against ``cluster`` (its application settings, then ``spark`` overrides)."""
    settings = {**cluster.application_conf(), **spark}
    overrides = [arg for k, v in settings.items() for arg in ("--override", f"{k}={v}")]
    with open(log, "w") as out:  # the child holds its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "sluice.jobs.nightly_load", "--config", str(config),
             *overrides],
            cwd=REPO,
            env={k: v for k, v in cluster.driver_env().items() if k != "SLUICE_CRASH_AT"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )  # fmt: skip


def finish_load(load: subprocess.Popen[str], log: Path) -> tuple[int, str]:
    """Wait (bounded) for the load; its exit status and output. Nothing of it outlives it."""
    try:
        load.wait(timeout=LOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the load did not finish in {LOAD_TIMEOUT}s:\n{tail(log)}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    return load.returncode, log.read_text(errors="replace")


def run_load_process(
    cluster: SparkCluster, config: Path, log: Path, **spark: str
) -> tuple[int, str]:
    return finish_load(start_load(cluster, config, log, **spark), log)


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def table_keys(warehouse: Path, table: str = "events") -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every row of the published runs."""
    files = sorted((warehouse / table).glob("load=*/topic=*/date=*/*.parquet"))
    if not files:
        return []
    rows = duckdb.sql(
        'SELECT topic, partition, "offset" FROM read_parquet('
        f"{[str(f) for f in files]}, hive_partitioning = true)"
    ).fetchall()
    return [(str(t), int(p), int(o)) for t, p, o in rows]


def assert_exactly_once(warehouse: Path, produced: list[Produced]) -> None:
    keys = table_keys(warehouse)
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} records landed twice"
    assert sorted(keys) == sorted((m.topic, m.partition, m.offset) for m in produced)


def reports(warehouse: Path) -> list[dict[str, Any]]:
    """Every run report, oldest first."""
    found = sorted((warehouse / "_reports").glob("*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in found]
