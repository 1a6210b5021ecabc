"""The audit end to end: real brokers, a real registry, real Spark, a real nightly load.

One scenario for the module: an audited producer sends 5, 7 and 3 messages in three 1-second
windows to a topic on the "live" broker (plus 3 messages without the audit header, which no
tier may count); the nightly load copies the topic into a warehouse table; a stand-in mirror
copies it to a second, "offline" broker with lineage headers, two records twice. Then:

* all tiers agree, the offline duplicates are counted and are not loss (exit 0);
* a row deleted from a warehouse Parquet file — and another row of the same window doubled,
  so the plain count is unchanged — is caught and named (exit 1), through the CLI too;
* the same loss in a window that is not closed at the cutoff is reported, not judged;
* bad configuration exits 2, an unreachable registry 3; producer windows that do not nest in
  the audit's are refused; spark-submit jobs/audit.py gives the same verdict (slow).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sluice.cli.audit_command import main as audit_cli
from sluice.pipeline.audit.config import AuditConfig, AuditConfigError
from sluice.pipeline.audit.producer import SERVER_HEADER
from sluice.pipeline.audit.report import (
    Mismatch,
    ProducerCount,
    TierCount,
    compare,
    format_ms,
    render_text,
)
from sluice.pipeline.audit.run import AuditError, run_audit
from sluice.pipeline.lineage import LINEAGE_HEADER, Lineage
from sluice.pipeline.load.run import LoadConfig, run_load
from sluice.testing.broker import create_topic
from sluice.testing.mirror import write_properties
from tests.pipeline.audit_helpers import aligned_base, produce_audited
from tests.pipeline.broker_fixture import SluiceBroker, produce
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

REPO = Path(__file__).resolve().parents[3]
W = 1000  # window.ms
PER_WINDOW = (5, 7, 3)
DOUBLED = 2  # records the stand-in mirror copies twice


@dataclass(frozen=True)
class Scenario:
    live: str
    offline: str
    registry: str
    topic: str
    audit_topic: str
    windows: tuple[int, ...]  # window starts (ms)
    duplicates: dict[int, int]  # window start -> extra copies at the offline tier
    table: Path  # the nightly load's table
    lossy_table: Path  # a copy with one row of windows[1] replaced by a copy of another
    dir: Path

    def props(self, **extra: str) -> dict[str, str]:
        props = {
            "live.clusters": "live-a",
            "live-a.bootstrap.servers": self.live,
            "offline.alias": "offline",
            "offline.bootstrap.servers": self.offline,
            "warehouse.table": str(self.table),
            "schema.registry.url": self.registry,
            "audit.topic": self.audit_topic,
            "window.ms": str(W),
            "grace.ms": str(W),
            "report.dir": str(self.dir / f"report-{uuid.uuid4().hex[:6]}"),
        }
        props.update({k.replace("_", "."): v for k, v in extra.items()})
        return props


@pytest.fixture(scope="module")
def offline_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceBroker]:
    broker = SluiceBroker(tmp_path_factory.mktemp("offline-broker"), {"num.partitions": "1"})
    try:
        broker.start()
    except Exception as exc:
        pytest.skip(f"the offline broker could not start: {exc}")
    try:
        yield broker
    finally:
        assert broker.stop() == 0, broker.tail()


def _mirror(live: str, offline: str, topic: str, partitions: int) -> dict[int, int]:
    """Copy ``topic`` as the mirror would (lineage header added, timestamps kept), the first
    ``DOUBLED`` audited records twice; returns the extra copies per window start."""
    copies, extra = [], {}
    audited = 0
    for r in read_all(live, topic):
        lineage = Lineage("live-a", topic, r.partition, r.offset).encode()
        record = {
            "topic": topic,
            "partition": r.partition,
            "key": r.key,
            "value": r.value,
            "headers": [*r.headers, (LINEAGE_HEADER, lineage)],
            "timestamp": r.timestamp,
        }
        copies.append(record)
        if any(k == SERVER_HEADER for k, _ in r.headers) and audited < DOUBLED:
            audited += 1
            copies.append(record)  # an at-least-once retry: the same origin twice
            start = r.timestamp // W * W
            extra[start] = extra.get(start, 0) + 1
    produce(offline, copies)
    return extra


def _replace_one_row(table: Path, topic: str, window_start: int) -> None:
    """Delete one audited row of the window from a Parquet file and add a second copy of
    another, rewriting the file: the row count stays, one origin is gone."""
    for path in sorted(table.glob(f"load=*/topic={topic}/date=*/*.parquet")):
        data = pq.read_table(path)
        ms = pc.cast(data.column("timestamp"), pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        rows = [
            i
            for i, v in enumerate(ms.to_pylist())
            if window_start <= v < window_start + W
            and any(h["key"] == SERVER_HEADER for h in data.column("headers")[i].as_py() or [])
        ]
        if len(rows) >= 2:
            keep = [i for i in range(data.num_rows) if i != rows[0]]
            doubled = pa.concat_tables([data.take(keep), data.take([rows[1]])])
            pq.write_table(doubled, path, use_deprecated_int96_timestamps=True)
            # Hadoop's checksum sidecar would no longer match: drop it, as a rewrite would.
            path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
            return
    raise AssertionError(f"no file with two audited rows of window {window_start}")


@pytest.fixture(scope="module")
def scenario(
    spark: Any,
    kafka_broker: Any,
    offline_broker: SluiceBroker,
    registry_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Scenario:
    base = tmp_path_factory.mktemp("audit")
    topic = f"page_view-{uuid.uuid4().hex[:6]}"
    audit_topic = f"sluice-audit-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_broker.bootstrap, topic, 2)
    create_topic(kafka_broker.bootstrap, audit_topic, 1)
    create_topic(offline_broker.bootstrap, topic, 2)
    first = aligned_base(W, 20)
    windows = tuple(first + i * W for i in range(len(PER_WINDOW)))
    produce_audited(
        kafka_broker.bootstrap,
        registry_url,
        topic,
        dict(zip(windows, PER_WINDOW, strict=True)),
        audit_topic=audit_topic,
        window_ms=W,
        partitions=2,
    )
    plain = {"topic": topic, "partition": 0, "value": b"no audit header", "timestamp": windows[1]}
    produce(kafka_broker.bootstrap, [plain] * 3)
    duplicates = _mirror(kafka_broker.bootstrap, offline_broker.bootstrap, topic, 2)
    warehouse = base / "warehouse"
    load = LoadConfig.from_properties(
        {
            "kafka.bootstrap.servers": kafka_broker.bootstrap,
            "topics": topic,
            "warehouse.path": str(warehouse),
        }
    )
    assert run_load(load, spark).total_rows == sum(PER_WINDOW) + 3
    lossy = base / "lossy" / "events"
    shutil.copytree(warehouse / "events", lossy)
    _replace_one_row(lossy, topic, windows[1])
    return Scenario(
        live=kafka_broker.bootstrap,
        offline=offline_broker.bootstrap,
        registry=registry_url,
        topic=topic,
        audit_topic=audit_topic,
        windows=windows,
        duplicates=duplicates,
        table=warehouse / "events",
        lossy_table=lossy,
        dir=base,
    )


def _now() -> int:
    return time.time_ns() // 1_000_000


def test_all_tiers_agree_and_mirror_duplicates_are_not_loss(spark: Any, scenario: Scenario) -> None:
    config = AuditConfig.from_properties(scenario.props())
    assert config.tiers == ("live", "offline", "warehouse")
    result = run_audit(config, spark, until_ms=_now())

    assert result.exit_status == 0 and result.verdict == "ok"
    assert [(w.topic, w.window_start_ms) for w in result.windows] == [
        (scenario.topic, s) for s in scenario.windows
    ]
    assert sum(scenario.duplicates.values()) == DOUBLED
    for window, expected in zip(result.windows, PER_WINDOW, strict=True):
        assert window.closed and window.verdict == "ok" and window.reporters == 1
        dups = scenario.duplicates.get(window.window_start_ms, 0)
        found = {
            name: (t.count, t.distinct, t.duplicates, t.state) for name, t in window.tiers.items()
        }
        assert found == {
            "producers": (expected, expected, 0, "ok"),
            "live": (expected, expected, 0, "ok"),  # the unaudited messages are not counted
            "offline": (expected + dups, expected, dups, "ok"),
            "warehouse": (expected, expected, 0, "ok"),
        }

    report = Path(config.report_dir.removeprefix("file://"))
    document = json.loads((report / "audit.json").read_text())
    assert document["version"] == 1 and document["verdict"] == "ok"
    assert document["exit_status"] == 0 and document["mismatches"] == []
    assert document["tiers"] == ["producers", "live", "offline", "warehouse"]
    assert document["summary"] == {"windows": 3, "closed": 3, "open": 0, "differing": 0}
    assert document["coverage"]["warehouse"] is not None  # the load's start
    offline = [w["tiers"]["offline"] for w in document["windows"]]
    assert sum(t["duplicates"] for t in offline) == DOUBLED
    assert all(t["missing"] == 0 and t["extra"] == 0 for t in offline)
    assert (report / "audit.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = (report / "audit.txt").read_text()
    assert "verdict: OK" in text and scenario.topic in text and "mismatches" not in text


def test_a_row_lost_in_the_warehouse_is_caught_and_named(
    spark: Any, scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = scenario.props(warehouse_table=str(scenario.lossy_table), tiers="live,warehouse")
    until = _now()
    result = run_audit(AuditConfig.from_properties(props), spark, until_ms=until)

    lost = scenario.windows[1]
    assert result.exit_status == 1 and result.verdict == "differs"
    assert result.mismatches == [Mismatch(scenario.topic, lost, "warehouse", "missing", 1)]
    warehouse = result.window(scenario.topic, lost).tiers["warehouse"]
    # The doubled row keeps the plain count right; distinct origins show the loss.
    assert (warehouse.count, warehouse.distinct, warehouse.duplicates) == (7, 6, 1)
    assert (warehouse.expected, warehouse.missing, warehouse.extra) == (7, 1, 0)
    assert [w.verdict for w in result.windows] == ["ok", "differs", "ok"]
    line = f"{scenario.topic} {format_ms(lost)} warehouse missing 1"
    assert line in capsys.readouterr().out

    # The command line: same verdict, exit status 1, the line on stdout and in audit.txt.
    config_file = write_properties(tmp_path / "audit.properties", props)
    assert audit_cli(["audit", "--config", str(config_file), "--until", str(until)]) == 1
    assert line in capsys.readouterr().out
    report = Path(props["report.dir"])
    assert line in (report / "audit.txt").read_text()
    document = json.loads((report / "audit.json").read_text())
    assert document["mismatches"] == [
        {
            "topic": scenario.topic,
            "window_start": format_ms(lost),
            "tier": "warehouse",
            "kind": "missing",
            "amount": 1,
        }
    ]


def test_open_windows_are_reported_but_not_judged(spark: Any, scenario: Scenario) -> None:
    """The cutoff falls before the lossy window's end + grace: it is open, exit status 0."""
    lost = scenario.windows[1]
    props = scenario.props(warehouse_table=str(scenario.lossy_table), tiers="warehouse")
    config = AuditConfig.from_properties(props)
    result = run_audit(config, spark, until_ms=lost + 2 * W - 1)

    assert result.exit_status == 0
    assert [(w.closed, w.verdict) for w in result.windows] == [
        (True, "ok"),
        (False, "open"),
        (False, "open"),
    ]
    reported = result.window(scenario.topic, lost).tiers["warehouse"]
    assert (reported.state, reported.missing, reported.duplicates) == ("open", 1, 1)
    document = json.loads((Path(props["report.dir"]) / "audit.json").read_text())
    assert document["summary"] == {"windows": 3, "closed": 1, "open": 2, "differing": 0}
    assert "0 of 1 closed windows differ; 2 windows open" in render_text(result)

    # lookback.ms: only windows starting at most this long before the cutoff are audited.
    recent = AuditConfig.from_properties({**props, "lookback.ms": str(W - 1)})
    result = run_audit(recent, spark, until_ms=lost + 2 * W - 1)
    assert [w.window_start_ms for w in result.windows] == [scenario.windows[2]]


def test_a_typed_table_is_counted_by_the_record_timestamp(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    """A typed load (``valueFormat=avro``) of a value with its own ``timestamp`` field names
    the record's ``kafka_timestamp``: the audit must window by that one. The table is written
    by hand in the load's layout, the value's ``timestamp`` set a day off."""
    records = read_all(scenario.live, scenario.topic)
    rows = [
        {
            "timestamp": r.timestamp * 1000 - 86_400_000_000,  # the value's own field
            "key": r.key,
            "partition": r.partition,
            "offset": r.offset,
            "kafka_timestamp": r.timestamp * 1000,
            "timestampType": r.timestamp_type,
            "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
        }
        for r in records
    ]
    micros = pa.timestamp("us", tz="UTC")
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    schema = pa.schema(
        [
            ("timestamp", micros),
            ("key", pa.binary()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("kafka_timestamp", micros),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(header)),
        ]
    )
    table = tmp_path / "typed" / "page_views"
    data_dir = table / "load=1" / f"topic={scenario.topic}" / "date=2026-11-22"
    data_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema), data_dir / "part-0.parquet")
    props = scenario.props(warehouse_table=str(table), tiers="warehouse", warehouse_cutoff="audit")
    result = run_audit(AuditConfig.from_properties(props), spark, until_ms=_now())
    assert result.exit_status == 0
    assert [w.tiers["warehouse"].distinct for w in result.windows] == list(PER_WINDOW)


def test_configuration_errors_exit_2(scenario: Scenario, tmp_path: Path) -> None:
    good = scenario.props()
    bad = {
        "live.clusters": "",
        "live-a.bootstrap.servers": "",
        "window.ms": "0",
        "tiers": "live,archive",
        "offline.alias": "live-a",
        "warehouse.cutoff": "later",
        "topics": f"{scenario.audit_topic}",
    }
    for key, value in bad.items():
        props = {**good, key: value}
        with pytest.raises(AuditConfigError, match=key.split(".")[0]):
            AuditConfig.from_properties(props)
        config = write_properties(tmp_path / f"{key}.properties", props)
        assert audit_cli(["audit", "--config", str(config)]) == 2, key
    no_offline = {k: v for k, v in good.items() if not k.startswith("offline.")}
    with pytest.raises(AuditConfigError, match="tiers: offline needs offline.bootstrap.servers"):
        AuditConfig.from_properties({**no_offline, "tiers": "offline"})
    config = write_properties(tmp_path / "good.properties", good)
    assert audit_cli(["audit", "--config", str(config), "--until", "yesterday"]) == 2


def test_an_unreadable_tier_exits_3(spark: Any, scenario: Scenario, tmp_path: Path) -> None:
    props = scenario.props(schema_registry_url="http://127.0.0.1:1", tiers="live")
    config = write_properties(tmp_path / "audit.properties", props)
    assert audit_cli(["audit", "--config", str(config)]) == 3


def test_producer_windows_must_nest_in_the_audit_windows(spark: Any, scenario: Scenario) -> None:
    config = AuditConfig.from_properties(scenario.props(window_ms="1500", tiers="live"))
    with pytest.raises(AuditError, match="expected window.ms to be a multiple"):
        run_audit(config, spark, until_ms=_now())


def test_the_rules_without_spark() -> None:
    """Extra (no producer report), missing, open, a tier that covers nothing yet."""
    key = ("t", 10)
    result = compare(
        {key: ProducerCount(5, 2), ("t", 11): ProducerCount(1, 1)},
        {
            "live": {key: TierCount(6, 6), ("u", 10): TierCount(2, 2)},
            "warehouse": {key: TierCount(4, 3)},
        },
        window_ms=1000,
        grace_ms=1000,
        cutoff_ms=12_000,
        coverage={"warehouse": None},
    )
    verdicts = {(w.topic, w.window_start_ms): w.verdict for w in result.windows}
    assert verdicts == {("t", 10_000): "differs", ("t", 11_000): "open", ("u", 10_000): "differs"}
    assert result.mismatches == [
        Mismatch("t", 10_000, "live", "extra", 1),
        Mismatch("u", 10_000, "live", "extra", 2),
    ]
    warehouse = result.window("t", 10_000).tiers["warehouse"]
    assert (warehouse.state, warehouse.missing, warehouse.duplicates) == ("open", 2, 1)
    assert "t 1970-01-01T00:00:10Z live extra 1" in render_text(result)
    assert result.exit_status == 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spark_submit_jobs_audit(scenario: Scenario, tmp_path: Path) -> None:
    props = scenario.props(warehouse_table=str(scenario.lossy_table), tiers="live,warehouse")
    config = write_properties(tmp_path / "audit.properties", props)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    args = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2]",
        "--driver-java-options", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "--conf", "spark.ui.enabled=false",
        str(REPO / "jobs" / "audit.py"),
        "--config", str(config),
        "--until", format_ms(_now() // 1000 * 1000),
    ]  # fmt: skip
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    line = f"{scenario.topic} {format_ms(scenario.windows[1])} warehouse missing 1"
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert line in done.stdout
    assert (Path(props["report.dir"]) / "audit.png").exists()
