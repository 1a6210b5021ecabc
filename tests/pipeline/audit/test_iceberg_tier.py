"""The audit's warehouse tier over Iceberg tables (``warehouse.format=iceberg``): the rows of
each audited topic's current snapshot counted per window like the Parquet tier's, and the
coverage of the newest load.

Tables are committed through ``IcebergRun`` (the load's own calls), with rows shaped as the
load writes them: a typed value field, the Kafka columns and the ``headers`` column. Topic
``events`` has its table; ``clicks`` and ``views`` share ``web.traffic`` (only ``clicks`` is
audited, so ``views``' rows must not count). Per 1-second window 5, 7 and 3 audited records,
plus records without the audit header (never counted) and one record loaded twice under the
same lineage origin (counted, not distinct). A second run and a compaction follow: the current
snapshot still holds every row once.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sluice.pipeline.audit.config import AuditConfig, AuditConfigError
from sluice.pipeline.audit.counts import count_tiers, iceberg_coverage, iceberg_frame
from sluice.pipeline.audit.producer import SERVER_HEADER
from sluice.pipeline.audit.report import TierCount
from sluice.pipeline.lineage import LINEAGE_HEADER, Lineage
from sluice.pipeline.source.split_reader import HEADERS_TYPE
from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_maintenance import compact
from sluice.pipeline.table.iceberg_run import IcebergRun

W = 1000
BASE_MS = 1_700_000_000_000  # a window boundary
PER_WINDOW = (5, 7, 3)
PROPS = {"iceberg.table.clicks.name": "web.traffic", "iceberg.table.views.name": "web.traffic"}


def _rows(
    topic: str, start: int, stamps: list[int], headers: list[list[tuple[str, bytes]]]
) -> pa.Table:
    n = len(stamps)
    return pa.table(
        {
            "page": pa.array([f"/p/{i}" for i in range(n)]),
            "key": pa.array([None] * n, pa.binary()),
            "topic": pa.array([topic] * n),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(start, start + n), pa.int64()),
            "timestamp": pa.array(
                [dt.datetime.fromtimestamp(ms / 1000, dt.UTC) for ms in stamps],
                pa.timestamp("us", tz="UTC"),
            ),
            "timestampType": pa.array([0] * n, pa.int32()),
            "headers": pa.array(
                [[{"key": k, "value": v} for k, v in h] for h in headers], HEADERS_TYPE
            ),
        }
    )  # fmt: skip


def _audited(
    topic: str, first_window: int, per_window: tuple[int, ...]
) -> tuple[list[int], list[Any]]:
    stamps, headers = [], []
    for w, count in enumerate(per_window):
        for i in range(count):
            stamps.append(BASE_MS + (first_window + w) * W + i * 10)
            headers.append([(SERVER_HEADER, b"host-1")])
    for w in range(len(per_window)):  # not audited: no tier counts them
        stamps.append(BASE_MS + (first_window + w) * W + 500)
        headers.append([("other", b"x")])
    return stamps, headers


def _load(config: IcebergConfig, run_id: str, batches: dict[str, pa.Table]) -> None:
    """One load run of ``batches`` (topic -> rows), committed as the load commits."""
    run = IcebergRun.begin(config, sorted(batches))
    writers = run.writers(next(iter(batches.values())).schema)
    files = []
    offsets = {}
    for topic, rows in batches.items():
        files += writers[topic].data.write(rows, f"{run_id}-{topic}")
        offsets[topic] = {0: int(rows["offset"].to_pylist()[-1]) + 1}
    run.commit(files, offsets, run_id)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("iceberg-audit") / "warehouse"
    config = IcebergConfig.from_properties(PROPS, str(root))
    # run 1: events windows 0-1 (5, 7), clicks window 0 (5); views anything
    stamps, headers = _audited("events", 0, PER_WINDOW[:2])
    lineage = Lineage("live-a", "events", 0, 0).encode()
    headers[0] = [*headers[0], (LINEAGE_HEADER, lineage)]
    first = _rows("events", 0, stamps, headers)
    clicks = _rows("clicks", 0, *_audited("clicks", 0, PER_WINDOW[:1]))
    views = _rows("views", 0, *_audited("views", 0, (9,)))
    _load(config, "r1", {"events": first, "clicks": clicks, "views": views})
    # run 2: events window 2 (3) and the first record again, as a retried copy: same origin
    stamps, headers = _audited("events", 2, PER_WINDOW[2:])
    stamps.append(BASE_MS + 1)
    headers.append([(SERVER_HEADER, b"host-1"), (LINEAGE_HEADER, lineage)])
    _load(config, "r2", {"events": _rows("events", first.num_rows, stamps, headers)})
    reports = root / "_reports"
    reports.mkdir()
    (reports / "r2.json").write_text(json.dumps({"started": "2026-11-28T03:00:00Z"}))
    result = compact(config.open_catalog(), "sluice.events")
    assert result.files_before > result.files_after
    return root


def _config(warehouse: Path, **extra: str) -> AuditConfig:
    props = {
        "live.clusters": "live-a",
        "live-a.bootstrap.servers": "127.0.0.1:9",
        "schema.registry.url": "http://127.0.0.1:9",
        "warehouse.format": "iceberg",
        "warehouse.path": str(warehouse),
        "window.ms": str(W),
        **PROPS,
        **extra,
    }
    return AuditConfig.from_properties(props)


def test_the_current_snapshots_are_counted_per_topic_and_window(
    spark: Any, warehouse: Path
) -> None:
    config = _config(warehouse)
    assert config.tiers == ("live", "warehouse")
    assert config.sources()["warehouse"] == {"format": "iceberg", "path": warehouse.as_uri()}
    frame = iceberg_frame(
        spark, config.iceberg_config(), ["events", "clicks", "absent"], alias="offline", window_ms=W
    )
    counts = count_tiers({"warehouse": frame})["warehouse"]
    first = BASE_MS // W
    assert counts == {
        ("events", first): TierCount(6, 5),  # the retried copy: counted, not distinct
        ("events", first + 1): TierCount(7, 7),
        ("events", first + 2): TierCount(3, 3),
        ("clicks", first): TierCount(5, 5),  # views shares the table, and is not audited
    }


def test_coverage_is_the_newest_load_not_the_compaction(warehouse: Path) -> None:
    iceberg = _config(warehouse).iceberg_config()
    started = int(dt.datetime(2026, 11, 28, 3, tzinfo=dt.UTC).timestamp() * 1000)
    assert iceberg_coverage(iceberg, ["events"], warehouse.as_uri()) == started
    table = iceberg.open_catalog().load_table("web.traffic")  # r1 has no report: its commit
    committed = table.current_snapshot().timestamp_ms
    assert iceberg_coverage(iceberg, ["clicks"], warehouse.as_uri()) == committed
    assert iceberg_coverage(iceberg, ["events", "clicks"], warehouse.as_uri()) == started
    assert iceberg_coverage(iceberg, ["events", "absent"], warehouse.as_uri()) is None


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"warehouse.path": None}, r"warehouse.path: expected the load's warehouse.path with "),
        ({"warehouse.table": "/t"}, r"warehouse.table: expected none with warehouse.format=ic"),
        ({"warehouse.format": "parquet", "warehouse.table": "/t"}, r"warehouse.path: expected it "),
        ({"iceberg.catalog.type": "oracle"}, r"iceberg.catalog.type: expected "),
        ({"iceberg.tables.default-partition-by": "week(x)"}, r"iceberg.tables.default-partition"),
        ({"iceberg.table.a.colour": "red"}, r"iceberg.table.a.colour: expected iceberg.table.<"),
    ],
)
def test_bad_iceberg_settings_name_the_key(props: dict[str, str | None], message: str) -> None:
    base = {
        "live.clusters": "live-a",
        "live-a.bootstrap.servers": "127.0.0.1:9",
        "schema.registry.url": "http://127.0.0.1:9",
        "warehouse.format": "iceberg",
        "warehouse.path": "/w",
    }
    merged = {k: v for k, v in {**base, **props}.items() if v is not None}
    with pytest.raises(AuditConfigError, match=message):
        AuditConfig.from_properties(merged)


def test_iceberg_keys_with_the_parquet_format_are_refused() -> None:
    props = {
        "live.clusters": "live-a",
        "live-a.bootstrap.servers": "127.0.0.1:9",
        "schema.registry.url": "http://127.0.0.1:9",
        "warehouse.table": "/t",
        "iceberg.catalog": "x",
    }
    with pytest.raises(AuditConfigError, match="iceberg.catalog: expected iceberg.* keys only"):
        AuditConfig.from_properties(props)
