"""The nightly load into Iceberg tables (``table.format=iceberg``) end to end: a real broker, a
real registry, real Spark, the embedded SQLite catalog, read back with pyiceberg.

The invariants: the table holds each produced (partition, offset) exactly once; the current
snapshot's ``sluice.offsets`` are the broker's end offsets; the spec is ``day(event_time)`` and
each day's rows sit in that day's partition; a rerun with nothing new makes no snapshot and one
with new records exactly one; a compatible new schema version adds its column in that one
snapshot (old rows read null, docs/iceberg.md) and an incompatible one fails the run (exit 1)
before anything is written; of two racing loads one commits and the other fails naming the
conflict; ten loads then ``sluice table compact`` leave one file per day, the rows and the
offsets, and ``sluice table describe`` lists every snapshot with its offsets; a kill -9 at every
phase of the parquet path's crash points (mid-read, staged, between the error table's commit and
the data table's, after both) and reruns land every record once.

The PostgreSQL catalog, the table on ``s3://`` and a catalog that never answers are
``test_iceberg_load_stores.py``. One broker, one registry and one Spark serve the session
(``tests/pipeline/conftest.py``)."""

from __future__ import annotations

import datetime as dt
import json
import signal
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.cli.load_command import load_main
from sluice.cli.table_command import main as table_main
from sluice.pipeline.load import iceberg_tables
from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.errors import LoadError
from sluice.pipeline.load.run import run_load
from sluice.pipeline.table.iceberg_commit import OFFSETS_PROPERTY, offsets_from_json
from sluice.pipeline.table.iceberg_run import IcebergRun
from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroSerializer
from sluice.testing.broker import create_topic
from tests.pipeline.load.test_run import _job

pytestmark = pytest.mark.broker

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "View",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
# v2: a new optional field (BACKWARD compatible, the registry's default).
SCHEMA_V2 = {
    **SCHEMA,
    "fields": [*SCHEMA["fields"], {"name": "page", "type": ["null", "string"], "default": None}],
}
# v3: ``n`` becomes a string — no Iceberg promotion from long; registered under NONE.
SCHEMA_V3 = {
    **SCHEMA_V2,
    "fields": [f if f["name"] != "n" else {"name": "n", "type": "string"}
               for f in SCHEMA_V2["fields"]],
}  # fmt: skip
DAY_MS = 86_400_000
BASE_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
BASE_DAY = BASE_MS // DAY_MS  # day(event_time) of the first day: days since 1970-01-01


def view(n: int) -> dict[str, Any]:
    """Record ``n`` of schema v1: its event time on day ``n % 3`` after 2024-03-01."""
    return {"user": f"u{n % 7}", "n": n, "event_time": BASE_MS + (n % 3) * DAY_MS + n}


def view_v2(n: int) -> dict[str, Any]:
    return {**view(n), "page": f"p{n % 5}"}


def _produce(
    bootstrap: str,
    registry: str,
    topic: str,
    first: int,
    count: int,
    *,
    schema: Mapping[str, Any] = SCHEMA,
    record: Callable[[int], Mapping[str, Any]] = view,
) -> None:
    """``count`` records ``record(first ..)``, keyed ``n`` (spread over the partitions), in
    Confluent's wire format with ``schema`` (registered under ``<topic>-value`` if new)."""
    serialize = AvroSerializer(RegistryClient(registry), json.dumps(schema), f"{topic}-value")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failed: list[Any] = []

    def delivered(err: Any, _message: Any) -> None:
        if err is not None:
            failed.append(err)

    for n in range(first, first + count):
        value = serialize(dict(record(n)))
        producer.produce(topic, value, key=str(n).encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:1]


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


def _table(props: Mapping[str, str], topic: str) -> Any:
    """The topic's table, loaded afresh through the catalog the load's ``props`` name."""
    iceberg = LoadConfig.from_properties(props).iceberg
    assert iceberg is not None
    return iceberg.open_catalog().load_table(iceberg.identifier(topic))


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "iceberg-load-test"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def _assert_exactly_once(
    props: Mapping[str, str], topic: str, bootstrap: str, partitions: int
) -> dict[int, int]:
    """Every offset below the broker's ends, once; the snapshot's offsets are those ends.
    Returns the ends of the partitions with records (as the snapshot records them)."""
    table = _table(props, topic)
    rows = table.scan(selected_fields=("partition", "offset")).to_arrow()
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
    return {p: e for p, e in ends.items() if e}


def _assert_by_event_day(table: Any, produced: range) -> None:
    """The spec is ``day(event_time)``, and every data file holds the rows of its partition's
    day only: three days, each holding exactly the records ``n`` of ``produced`` with
    ``n % 3`` its day (read through the table's own FileIO, so also on ``s3://``)."""
    spec = [(f.name, str(f.transform), table.schema().find_column_name(f.source_id))
            for f in table.spec().fields]  # fmt: skip
    assert spec == [("event_time_day", "day", "event_time")]
    per_day: Counter[int] = Counter()
    for task in table.scan().plan_files():
        day = task.file.partition[0]
        with table.io.new_input(task.file.file_path).open() as stream:
            times = pq.read_table(stream, columns=["event_time"])["event_time"].to_pylist()
        assert {(t - EPOCH).days for t in times} == {day}, task.file.file_path
        per_day[day] += len(times)
    expected = Counter(BASE_DAY + n % 3 for n in produced)
    assert per_day == expected


def _table_files(table: Any) -> set[str]:
    """Every file under the table's location (data and metadata), local tables only."""
    root = Path(table.location().removeprefix("file://"))
    return {str(p) for p in root.rglob("*") if p.is_file()}


def test_typed_load_of_20000_by_event_day_then_v2_then_an_incompatible_v3(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 3)
    _produce(bootstrap, registry_url, topic_name, 0, 20_000)
    props = _props(bootstrap, registry_url, topic_name, tmp_path / "wh")

    first = run_load(LoadConfig.from_properties(props), spark)
    assert (first.status, first.total_rows, first.total_errors) == ("published", 20_000, 0)
    assert first.table == f"sluice.{topic_name}"
    ends = _assert_exactly_once(props, topic_name, bootstrap, 3)
    assert sum(ends.values()) == 20_000
    table = _table(props, topic_name)
    _assert_by_event_day(table, range(20_000))
    snapshots = len(table.metadata.snapshots)
    assert snapshots == 1

    again = run_load(LoadConfig.from_properties(props), spark)
    assert again.status == "no-new-data"
    assert len(_table(props, topic_name).metadata.snapshots) == snapshots

    # v2, a new optional field: one more snapshot, the column added in it, old rows null.
    _produce(bootstrap, registry_url, topic_name, 20_000, 1_000, schema=SCHEMA_V2, record=view_v2)
    more = run_load(LoadConfig.from_properties(props), spark)
    assert (more.status, more.total_rows, more.total_errors) == ("published", 1_000, 0)
    table = _table(props, topic_name)
    assert len(table.metadata.snapshots) == snapshots + 1
    assert int(table.current_snapshot().summary["added-records"]) == 1_000
    page = table.schema().find_field("page")
    assert not page.required and str(page.field_type) == "string"
    rows = table.scan(selected_fields=("n", "page")).to_arrow()
    assert rows.num_rows == 21_000
    pages = dict(zip(rows["n"].to_pylist(), rows["page"].to_pylist(), strict=True))
    assert all(pages[n] is None for n in range(20_000)), "an old row does not read null"
    assert all(pages[n] == f"p{n % 5}" for n in range(20_000, 21_000))
    _assert_exactly_once(props, topic_name, bootstrap, 3)
    _assert_by_event_day(table, range(21_000))

    # v3, ``n`` long -> string (the registry told to accept it): the run fails in the plan,
    # through the CLI's exit contract (1: the run failed), naming the field; nothing written.
    RegistryClient(registry_url).set_compatibility("NONE", f"{topic_name}-value")
    _produce(bootstrap, registry_url, topic_name, 21_000, 10, schema=SCHEMA_V3,
             record=lambda n: {**view_v2(n), "n": str(n)})  # fmt: skip
    before, files = table.current_snapshot().snapshot_id, _table_files(table)
    config = tmp_path / "load.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    capsys.readouterr()
    assert load_main(["--config", str(config)]) == 1
    failure = capsys.readouterr().err.strip().splitlines()[-1]
    assert failure.startswith("sluice load: FAILED: IncompatibleTableSchemaError: field n: ")
    assert "the table's type is long, the run's is string" in failure
    table = _table(props, topic_name)
    assert table.current_snapshot().snapshot_id == before
    assert len(table.metadata.snapshots) == snapshots + 1
    assert _table_files(table) == files, "the failed run wrote a file"
    assert table.scan(selected_fields=("offset",)).to_arrow().num_rows == 21_000


def test_two_racing_loads_one_commits_the_other_names_the_conflict(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second load runs whole while the first is about to commit: the first, planned
    from the snapshot before it, publishes nothing and fails naming both snapshots; the
    table holds every offset once."""
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    _produce(kafka_broker.bootstrap, registry_url, topic_name, 0, 300)
    props = _props(kafka_broker.bootstrap, registry_url, topic_name, tmp_path / "wh")
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
    # The loser's first commit is its error table's (they go first): the conflict names it,
    # and neither table holds anything of the loser.
    iceberg = LoadConfig.from_properties(props).iceberg
    assert iceberg is not None
    catalog = iceberg.open_catalog()
    errors = catalog.load_table(iceberg.errors_identifier(topic_name))
    for table in (_table(props, topic_name), errors):
        assert [s.summary["sluice.run-id"] for s in table.metadata.snapshots] == ["rival"]
    assert str(failed.value) == (
        f"IcebergCommitConflictError: table {iceberg.errors_identifier(topic_name)}: expected "
        "the current snapshot to be none (an empty table) (the one this run planned from), "
        f"found snapshot {errors.current_snapshot().snapshot_id}: another writer committed "
        "meanwhile; nothing was published, rerun to load from the new offsets"
    )
    _assert_exactly_once(props, topic_name, kafka_broker.bootstrap, 2)


def test_ten_loads_then_compact_leaves_one_file_per_day_and_describe_lists_the_offsets(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ten loads of 1,000 records over three days (3 splits each: up to 9 files a load), then
    ``sluice table compact``: at most one file per partition (day), the same rows, the
    newest offsets carried on; ``sluice table describe`` lists all eleven snapshots, each
    load's with the broker's end offsets after it."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 3)
    props = _props(bootstrap, registry_url, topic_name, tmp_path / "wh")
    config = tmp_path / "load.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    loads: list[tuple[str, dict[int, int]]] = []
    for load in range(10):
        _produce(bootstrap, registry_url, topic_name, load * 1_000, 1_000)
        run_id = f"load{load}"
        report = run_load(LoadConfig.from_properties({**props, "run.id": run_id}), spark)
        assert (report.status, report.total_rows) == ("published", 1_000)
        loads.append((run_id, _assert_exactly_once(props, topic_name, bootstrap, 3)))
    table = _table(props, topic_name)
    days = Counter(t.file.partition[0] for t in table.scan().plan_files())
    assert len(days) == 3 and sum(days.values()) > 3 * 10  # many small files per day

    capsys.readouterr()
    assert table_main(["table", "compact", "--config", str(config), "--topic", topic_name]) == 0
    said = capsys.readouterr().out
    assert f"rewrote {sum(days.values())} files of 3 partitions into 3 (10000 rows)" in said
    table = _table(props, topic_name)
    per_day = Counter(t.file.partition[0] for t in table.scan().plan_files())
    assert per_day == dict.fromkeys(days, 1)
    assert table.current_snapshot().summary["sluice.compaction"] == "true"
    ends = _assert_exactly_once(props, topic_name, bootstrap, 3)  # rows and offsets kept
    assert ends == loads[-1][1]
    _assert_by_event_day(table, range(10_000))

    assert table_main(["table", "describe", "--config", str(config), "--topic", topic_name,
                       "--json"]) == 0  # fmt: skip
    described = json.loads(capsys.readouterr().out)["snapshots"]  # newest first
    expected = [("compact", loads[-1][1])] + loads[::-1]
    assert [(s["run_id"], offsets_from_json(s["offsets"])) for s in described] == [
        (run_id, {topic_name: offsets}) for run_id, offsets in expected
    ]
    assert [s["operation"] for s in described] == ["replace"] + ["append"] * 10
    assert [s["rows"] for s in described] == [10_000] + [1_000 * n for n in range(10, 0, -1)]
    assert table_main(["table", "describe", "--config", str(config), "--topic", topic_name]) == 0
    text = capsys.readouterr().out
    for run_id, offsets in expected:
        line = f"{run_id} " + json.dumps({topic_name: {str(p): o for p, o in offsets.items()}},
                                         separators=(",", ":"))  # fmt: skip
        assert line in text, line


@pytest.mark.slow
def test_kill_9_at_every_phase_then_rerun_exactly_once(
    kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    """SIGKILL the job (driver and JVM) mid-read, after the files are written, between the
    error table's commit and the data table's, and right after both; more records arrive in
    between. The run after the crash between the commits finds the error table ahead and is
    pinned to the crashed run's ranges. The table ends with every record once."""
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    _produce(kafka_broker.bootstrap, registry_url, topic_name, 0, 2000)
    props = _props(kafka_broker.bootstrap, registry_url, topic_name, tmp_path / "wh")
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
        _produce(kafka_broker.bootstrap, registry_url, topic_name, first, 50)
        first += 50
    rerun = _job(config, None)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    _assert_exactly_once(props, topic_name, kafka_broker.bootstrap, 2)
    assert not IcebergRun.begin(iceberg, [topic_name]).pinned
