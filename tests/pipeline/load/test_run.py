"""Tests for sluice.pipeline.load.run (and its command line, sluice.cli.load_command): the
nightly load end to end — a real broker, real Spark, Parquet read back with duckdb.

The invariant every test checks: the table holds each produced (topic, partition, offset)
exactly once — after incremental runs, runs with nothing new, data loss, and SIGKILLs of the
job (driver and JVM) at every phase followed by a rerun.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sluice.cli.load_command import main as cli_main
from sluice.pipeline.load.run import LoadConfig, LoadError, run_load
from sluice.pipeline.table.commit import latest_manifest, published_runs
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import Produced, produce, simple_records

pytestmark = pytest.mark.broker

REPO = Path(__file__).resolve().parents[3]
DAY_MS = 86_400_000


def _config(bootstrap: str, topics: str, warehouse: Path, **extra: str) -> LoadConfig:
    props = {
        "kafka.bootstrap.servers": bootstrap,
        "topics": topics,
        "warehouse.path": str(warehouse),
        **extra,
    }
    return LoadConfig.from_properties(props)


def _table(warehouse: Path, table: str = "events") -> list[tuple[str, int, int, str]]:
    """(topic, partition, offset, date) of every row in the published runs."""
    files = sorted((warehouse / table).glob("load=*/topic=*/date=*/*.parquet"))
    if not files:
        return []
    rows = duckdb.sql(
        'SELECT topic, partition, "offset", CAST(date AS VARCHAR) FROM read_parquet('
        f"{[str(f) for f in files]}, hive_partitioning = true)"
    ).fetchall()
    return [(str(t), int(p), int(o), str(d)) for t, p, o, d in rows]


def _assert_exactly_once(warehouse: Path, produced: list[Produced]) -> None:
    keys = [(t, p, o) for t, p, o, _ in _table(warehouse)]
    assert len(keys) == len(set(keys)), "a record landed twice"
    assert sorted(keys) == sorted((m.topic, m.partition, m.offset) for m in produced)


def _dated_records(topic: str, partitions: int, count: int, now_ms: int) -> list[dict[str, Any]]:
    records = simple_records(topic, partitions, count)
    for i, r in enumerate(records):
        r["timestamp"] = now_ms - (i % 3) * DAY_MS  # three dates
    return records


def test_incremental_runs_and_a_run_with_nothing_new(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 3)
    now = int(time.time() * 1000)
    produced = produce(kafka_broker.bootstrap, _dated_records(topic_name, 3, 300, now))
    config = _config(kafka_broker.bootstrap, topic_name, tmp_path, minPartitions="4")

    first = run_load(config, spark)
    assert first.status == "published" and first.sequence == 1 and first.total_rows == 300
    _assert_exactly_once(tmp_path, produced)
    dates = {d for *_, d in _table(tmp_path)}
    assert len(dates) == 3
    manifest = latest_manifest(config.table_uri)
    assert manifest is not None
    assert manifest.offsets == {topic_name: {0: 100, 1: 100, 2: 100}}
    assert sum(c.rows for c in manifest.row_counts) == 300
    assert all(r.bytes > 0 for r in manifest.ranges)
    report = json.loads((tmp_path / "_reports" / f"{first.run_id}.json").read_text())
    assert report["status"] == "published" and report["total_rows"] == 300
    assert {p["partition"] for p in report["partitions"]} == {0, 1, 2}

    second = run_load(config, spark)
    assert second.status == "no-new-data" and "nothing published" in second.message
    assert len(published_runs(config.table_uri)) == 1
    assert (tmp_path / "_reports" / f"{second.run_id}.json").exists()

    produced += produce(kafka_broker.bootstrap, _dated_records(topic_name, 3, 31, now))
    third = run_load(config, spark)
    assert third.status == "published" and third.sequence == 2 and third.total_rows == 31
    _assert_exactly_once(tmp_path, produced)
    ranges = {
        (r.range.partition, r.range.start, r.range.end)
        for r in latest_manifest(config.table_uri).ranges
    }
    assert ranges == {(0, 100, 111), (1, 100, 110), (2, 100, 110)}


def test_the_driver_s_phases_pause_the_collector_and_read_write_keeps_it(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan, verify, commit and the report run with the cyclic collector off (their objects
    are not garbage); the read+write phase, which may last hours of Py4J calls, with it on;
    and it is on again after the load."""
    from sluice.pipeline.load import run as load_run

    seen: dict[str, bool] = {}

    def watch(name: str, step: Any) -> Any:
        def watched(*args: Any, **kwargs: Any) -> Any:
            seen[name] = gc.isenabled()
            return step(*args, **kwargs)

        return watched

    for name in ("_plan_phase", "_read_and_write", "scan_staged", "_publish"):
        monkeypatch.setattr(load_run, name, watch(name, getattr(load_run, name)))
    monkeypatch.setattr(load_run.LoadReport, "write", watch("report", load_run.LoadReport.write))
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 20))

    report = run_load(_config(kafka_broker.bootstrap, topic_name, tmp_path), spark)

    assert report.status == "published" and report.total_rows == 20
    assert seen == {
        "_plan_phase": False,
        "_read_and_write": True,
        "scan_staged": False,
        "_publish": False,
        "report": False,
    }
    assert gc.isenabled()


def test_retention_deleted_unread_data(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """Retention ran past the committed offset: the run fails loudly and publishes nothing;
    with failOnDataLoss=false it loads what is left and reports how many offsets were lost."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(
        kafka_broker.bootstrap,
        topic_name,
        1,
        {"segment.bytes": "1500", "retention.bytes": "3000", "retention.ms": "-1"},
    )
    config = _config(kafka_broker.bootstrap, topic_name, tmp_path)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 10), linger_ms=0)
    assert run_load(config, spark).total_rows == 10

    value = b"x" * 200
    records = [{"topic": topic_name, "partition": 0, "value": value} for _ in range(200)]
    produce(kafka_broker.bootstrap, records, linger_ms=0, batch_size=400)  # one per batch
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "probe"})
    # Wait until retention has deleted past offset 10 *and settled*: a pass may run while the
    # 200 records are still arriving and the next one delete more (checks every 200 ms), so
    # the log start is read only once it stayed put across several passes.
    deadline = time.monotonic() + 30
    seen: list[int] = []
    while True:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), cached=False)
        seen.append(low)
        settled = len(seen) >= 6 and len(set(seen[-6:])) == 1
        if (low > 10 and settled) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    consumer.close()
    assert low > 10, "retention did not delete the unread segments"

    with pytest.raises(LoadError, match=rf"{topic_name}-0: start offset 10 is below the log"):
        run_load(config, spark)
    assert len(published_runs(config.table_uri)) == 1
    failed = sorted((tmp_path / "_reports").glob("*.json"))[-1]
    assert json.loads(failed.read_text())["status"] == "failed"

    # Exit status 1 and a clear message from the command line too (fails before Spark).
    props = tmp_path / "load.properties"
    props.write_text(
        f"kafka.bootstrap.servers={kafka_broker.bootstrap}\ntopics={topic_name}\n"
        f"warehouse.path={tmp_path}\n"
    )
    assert cli_main(["load", "--config", str(props)]) == 1

    clamped = run_load(
        _config(kafka_broker.bootstrap, topic_name, tmp_path, failOnDataLoss="false"), spark
    )
    assert clamped.status == "published"
    assert [(d.requested, d.used, d.lost) for d in clamped.data_loss] == [(10, low, low - 10)]
    assert clamped.total_rows == high - low
    report = json.loads((tmp_path / "_reports" / f"{clamped.run_id}.json").read_text())
    assert report["total_lost"] == low - 10
    assert latest_manifest(config.table_uri).data_loss[0].lost == low - 10
    assert "DATA LOSS" in clamped.summary()


def test_bad_configuration_exits_2(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("topics=a\nwarehouse.path=/tmp/x\n")
    assert cli_main(["load", "--config", str(props)]) == 2
    bad_value = ["--override", "kafka.bootstrap.servers=x:1", "--override", "minPartitions=0"]
    assert cli_main(["load", "--config", str(props), *bad_value]) == 2


# -- crash injection ------------------------------------------------------------------------


def _job(
    config: Path, crash_at: str | None, *, spark_submit: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the load as its own process group; afterwards nothing of it may be left alive."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("SLUICE_CRASH_AT", None)
    if crash_at:
        env["SLUICE_CRASH_AT"] = crash_at
    java = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    if spark_submit:
        args = [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master", "local[2]",
            "--driver-java-options", java,
            "--conf", "spark.ui.enabled=false",
            str(REPO / "jobs" / "nightly_load.py"),
            "--config", str(config),
        ]  # fmt: skip
    else:
        args = [sys.executable, "-m", "sluice.jobs.nightly_load", "--config", str(config),
                "--override", f"spark.driver.extraJavaOptions={java}"]  # fmt: skip
    proc = subprocess.Popen(
        args,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=240)
        deadline = time.monotonic() + 20
        while True:  # the JVM and the Python workers must die with the driver
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"processes of the job outlived it (crash at {crash_at})")
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out, "")


@pytest.mark.slow
def test_crash_at_every_phase_then_rerun(
    kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """SIGKILL the job (driver and JVM) mid-read, after staging, between manifest and rename,
    and right after the rename; more data arrives in between. Each crashed run's successor is
    its rerun (it plans again from the same manifest); the last rerun finds nothing new. The
    table ends with every produced record exactly once: the rename is the only commit point."""
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    warehouse = tmp_path / "warehouse"
    config = tmp_path / "load.properties"
    config.write_text(
        f"kafka.bootstrap.servers={kafka_broker.bootstrap}\ntopics={topic_name}\n"
        f"warehouse.path={warehouse}\nminPartitions=2\n"
    )
    table = f"file://{warehouse}/events"
    now = int(time.time() * 1000)
    produced = produce(kafka_broker.bootstrap, _dated_records(topic_name, 2, 4000, now))

    for phase, published_after in (("read", 0), ("staged", 0), ("manifest", 0)):
        result = _job(config, phase)
        assert result.returncode == -signal.SIGKILL, result.stdout[-3000:]
        assert len(published_runs(table)) == published_after, phase
        produced += produce(kafka_broker.bootstrap, _dated_records(topic_name, 2, 50, now))
    assert list((warehouse / "_staging" / "events").iterdir()), "the crashes left staging"

    result = _job(config, "published", spark_submit=True)
    assert result.returncode == -signal.SIGKILL, result.stdout[-3000:]
    assert len(published_runs(table)) == 1
    _assert_exactly_once(warehouse, produced)
    assert not list((warehouse / "_staging" / "events").iterdir())

    rerun = _job(config, None)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert "no new data" in rerun.stdout
    assert len(published_runs(table)) == 1

    _assert_exactly_once(warehouse, produced)
