"""The nightly load into Iceberg tables (``table.format=iceberg``) end to end: a real broker, a
real registry, real Spark, the embedded SQLite catalog, read back with pyiceberg.

The invariants: the table holds each produced (partition, offset) exactly once; the current
snapshot's ``sluice.offsets`` are the broker's end offsets; a rerun with nothing new makes no
snapshot and one with new records exactly one; of two racing loads one commits and the other
fails naming the conflict; a kill -9 at every phase of the parquet path's crash points (mid-read,
staged, between the error table's commit and the data table's, after both) and reruns land
every record once."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.pipeline.load import iceberg_tables
from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.errors import LoadError
from sluice.pipeline.load.run import run_load
from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import OFFSETS_PROPERTY, offsets_from_json
from sluice.pipeline.table.iceberg_run import IcebergRun
from sluice.testing.broker import create_topic
from sluice.testing.registry import RegistryProcess
from tests.pipeline.load.test_run import _job

pytestmark = pytest.mark.broker

SCHEMA = {
    "type": "record",
    "name": "View",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
DAY_MS = 86_400_000
BASE_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("iceberg-registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    assert process.stop() == 0, process.log()


def _produce(bootstrap: str, registry: str, topic: str, first: int, count: int, tmp: Path) -> None:
    """``count`` records ``n = first ..``, their event times spread over three UTC days."""
    schema = tmp / "view.avsc"
    schema.write_text(json.dumps(SCHEMA))
    lines = "".join(
        json.dumps({"user": f"u{n % 7}", "n": n, "event_time": BASE_MS + (n % 3) * DAY_MS + n})
        + "\n"
        for n in range(first, first + count)
    )
    produced = subprocess.run(
        [sys.executable, "-m", "sluice", "produce", "--bootstrap-server", bootstrap,
         "--topic", topic, "--value-format", "avro", "--value-schema", str(schema),
         "--registry", registry],
        input=lines, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr


def _props(bootstrap: str, registry: str, topic: str, warehouse: Path) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topics": topic,
        "warehouse.path": str(warehouse),
        "valueFormat": "avro",
        "schema.registry.url": registry,
        "table.format": "iceberg",
        "iceberg.tables.default-partition-by": "day(event_time)",
        "minPartitions": "3",
    }


def _table(warehouse: Path, topic: str) -> Any:
    config = IcebergConfig.from_properties({}, warehouse.as_uri())
    return config.open_catalog().load_table(f"sluice.{topic}")


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "iceberg-load-test"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def _assert_exactly_once(warehouse: Path, topic: str, bootstrap: str, partitions: int) -> None:
    """Every offset below the broker's ends, once; the snapshot's offsets are those ends."""
    table = _table(warehouse, topic)
    rows = table.scan().to_arrow()
    pairs = Counter(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    ends = _end_offsets(bootstrap, topic, partitions)
    assert set(pairs.values()) == {1}, "a record landed twice"
    assert set(pairs) == {(p, o) for p, end in ends.items() for o in range(end)}
    summary = table.current_snapshot().summary
    # A partition with no record yet (end 0) is not recorded, as in the parquet manifest: the
    # next run starts it at its log start either way.
    assert offsets_from_json(summary[OFFSETS_PROPERTY]) == {
        topic: {p: e for p, e in ends.items() if e}
    }


def test_typed_load_by_event_day_then_reruns(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 3)
    _produce(kafka_broker.bootstrap, registry_url, topic_name, 0, 2000, tmp_path)
    warehouse = tmp_path / "wh"
    props = _props(kafka_broker.bootstrap, registry_url, topic_name, warehouse)

    first = run_load(LoadConfig.from_properties(props), spark)
    assert first.status == "published" and first.total_rows == 2000 and first.total_errors == 0
    assert first.table == f"sluice.{topic_name}"
    _assert_exactly_once(warehouse, topic_name, kafka_broker.bootstrap, 3)
    table = _table(warehouse, topic_name)
    # Each day's rows in that day's partition (day(event_time): days since 1970-01-01).
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    days = set()
    for task in table.scan().plan_files():
        day = task.file.partition[0]
        days.add(day)
        path = task.file.file_path.removeprefix("file://")
        times = pq.read_table(path, columns=["event_time"])["event_time"].to_pylist()
        assert {(t - epoch).days for t in times} == {day}
    assert len(days) == 3
    snapshots = len(table.metadata.snapshots)

    again = run_load(LoadConfig.from_properties(props), spark)
    assert again.status == "no-new-data"
    assert len(_table(warehouse, topic_name).metadata.snapshots) == snapshots

    _produce(kafka_broker.bootstrap, registry_url, topic_name, 2000, 100, tmp_path)
    more = run_load(LoadConfig.from_properties(props), spark)
    assert more.status == "published" and more.total_rows == 100
    table = _table(warehouse, topic_name)
    assert len(table.metadata.snapshots) == snapshots + 1
    added = table.current_snapshot().summary
    assert int(added["added-records"]) == 100
    _assert_exactly_once(warehouse, topic_name, kafka_broker.bootstrap, 3)


def test_two_racing_loads_one_commits_the_other_names_the_conflict(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second load runs whole while the first is about to commit: the first, planned
    from the snapshot before it, publishes nothing and fails naming both snapshots."""
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    _produce(kafka_broker.bootstrap, registry_url, topic_name, 0, 300, tmp_path)
    warehouse = tmp_path / "wh"
    props = _props(kafka_broker.bootstrap, registry_url, topic_name, warehouse)
    real_commit = iceberg_tables.commit
    raced: list[Any] = []

    def commit_after_a_rival(*args: Any, **kwargs: Any) -> Any:
        if not raced:  # the rival: a whole load of its own, committed first
            raced.append(None)  # the rival's own commit goes straight through
            rival = LoadConfig.from_properties({**props, "run.id": "rival"})
            raced[0] = run_load(rival, spark)
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(iceberg_tables, "commit", commit_after_a_rival)
    with pytest.raises(LoadError, match="IcebergCommitConflictError") as failed:
        run_load(LoadConfig.from_properties({**props, "run.id": "first"}), spark)
    assert raced[0].status == "published" and raced[0].total_rows == 300
    message = str(failed.value)
    assert "expected the current snapshot to be none (an empty table)" in message
    assert "found snapshot " in message and "another writer committed" in message
    table = _table(warehouse, topic_name)
    assert len(table.metadata.snapshots) == 1  # the rival's only
    _assert_exactly_once(warehouse, topic_name, kafka_broker.bootstrap, 2)


@pytest.mark.slow
def test_kill_9_at_every_phase_then_rerun_exactly_once(
    kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    """SIGKILL the job (driver and JVM) mid-read, after the files are written, between the
    error table's commit and the data table's, and right after both; more records arrive in
    between. The run after the crash between the commits finds the error table ahead and is
    pinned to the crashed run's ranges. The table ends with every record once."""
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    _produce(kafka_broker.bootstrap, registry_url, topic_name, 0, 2000, tmp_path)
    warehouse = tmp_path / "wh"
    props = _props(kafka_broker.bootstrap, registry_url, topic_name, warehouse)
    config = tmp_path / "load.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    iceberg = LoadConfig.from_properties(props).iceberg
    assert iceberg is not None

    first = 2000
    for phase in ("read", "staged", "manifest", "published"):
        killed = _job(config, phase)
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
        pinned = IcebergRun.begin(iceberg, [topic_name]).pinned
        assert bool(pinned) == (phase == "manifest"), (phase, pinned)
        _produce(kafka_broker.bootstrap, registry_url, topic_name, first, 50, tmp_path)
        first += 50
    rerun = _job(config, None)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    _assert_exactly_once(warehouse, topic_name, kafka_broker.bootstrap, 2)
    assert not IcebergRun.begin(iceberg, [topic_name]).pinned
