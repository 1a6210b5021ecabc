"""Where a first load starts (``startingOffsets``, ``startingTimestamp``) and which topics it
reads (``subscribePattern``): a real broker, real Spark, the table read back with duckdb.

The starting options apply only to partitions the table has never seen; after the first
load every partition resumes from the table's offsets, so the table ends with exactly the
records at or after the chosen start, each once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.pipeline.load.config import LoadConfigError
from sluice.pipeline.load.run import run_load
from sluice.pipeline.table.commit import latest_manifest
from sluice.pipeline.table.manifest import Subscription
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import Produced, produce, simple_records
from tests.pipeline.load.test_run import _config, _table

pytestmark = pytest.mark.broker


def _keys(produced: list[Produced]) -> list[tuple[str, int, int]]:
    return sorted((m.topic, m.partition, m.offset) for m in produced)


def _landed(warehouse: Path) -> list[tuple[str, int, int]]:
    keys = [(t, p, o) for t, p, o, _ in _table(warehouse)]
    assert len(keys) == len(set(keys)), "a record landed twice"
    return sorted(keys)


def test_a_first_load_from_a_timestamp_lands_exactly_the_records_at_or_after_it(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    base = int(time.time() * 1000) - 1_000_000
    records = simple_records(topic_name, 2, 200)
    for i, record in enumerate(records):
        record["timestamp"] = base + i * 1000  # one second apart, increasing per partition
    produced = produce(kafka_broker.bootstrap, records)
    cut = base + 120 * 1000
    config = _config(
        kafka_broker.bootstrap, topic_name, tmp_path, startingTimestamp=str(cut),
        startingOffsets="earliest",
    )  # fmt: skip
    first = run_load(config, spark)
    assert first.status == "published"
    assert _landed(tmp_path) == _keys([m for m in produced if m.timestamp_ms >= cut])

    later = produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 10, prefix="late"))
    second = run_load(config, spark)  # resumes: the timestamp is for unseen partitions only
    assert second.total_rows == 10
    assert _landed(tmp_path) == _keys([m for m in produced if m.timestamp_ms >= cut] + later)


def test_a_first_load_from_latest_records_where_it_starts(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 50))
    config = _config(kafka_broker.bootstrap, topic_name, tmp_path, startingOffsets="latest")
    first = run_load(config, spark)
    # Nothing to read, but where it started is published: the next run must not move on.
    assert first.status == "published" and first.total_rows == 0
    assert _landed(tmp_path) == []
    later = produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 12, prefix="new"))
    second = run_load(config, spark)
    assert second.total_rows == 12
    assert _landed(tmp_path) == _keys(later)


def test_a_pattern_load_lands_every_matching_topic_and_no_other(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    matching = [f"{topic_name}_ev_a", f"{topic_name}_ev_b"]
    other = f"{topic_name}_other"
    produced: list[Produced] = []
    for topic in [*matching, other]:
        create_topic(kafka_broker.bootstrap, topic, 2)
        batch = produce(kafka_broker.bootstrap, simple_records(topic, 2, 30))
        if topic in matching:
            produced += batch
    props = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
        "subscribePattern": f"{topic_name}_ev_.*",
        "warehouse.path": str(tmp_path),
    }
    from sluice.pipeline.load.config import LoadConfig

    config = LoadConfig.from_properties(props)
    report = run_load(config, spark)
    assert report.topics == sorted(matching)
    assert _landed(tmp_path) == _keys(produced)
    recorded = Subscription(f"{topic_name}_ev_.*", tuple(sorted(matching)))
    assert report.subscription == recorded
    assert latest_manifest(config.table_uri).subscription == recorded

    # Only one matched topic has new records: the run still records both as matched, in the
    # manifest (whose ranges name only the topic read) and in the report.
    later = produce(kafka_broker.bootstrap, simple_records(matching[1], 2, 5, prefix="late"))
    second = run_load(config, spark)
    assert second.total_rows == len(later)
    manifest = latest_manifest(config.table_uri)
    assert {r.range.topic for r in manifest.ranges} == {matching[1]}
    assert manifest.subscription == recorded == second.subscription
    written = json.loads(Path(_report_path(config, second.run_id)).read_text())
    assert written["subscribe_pattern"] == {
        "pattern": recorded.pattern,
        "matched": sorted(matching),
    }
    assert _landed(tmp_path) == _keys(produced + later)


def _report_path(config: Any, run_id: str) -> str:
    """The path of run ``run_id``'s JSON report (the reports directory is a file URI)."""
    return f"{config.reports_uri.removeprefix('file://')}/{run_id}.json"


def test_topics_and_a_pattern_are_exclusive() -> None:
    from sluice.pipeline.load.config import LoadConfig

    base = {"kafka.bootstrap.servers": "h:1", "warehouse.path": "/tmp/w"}
    with pytest.raises(LoadConfigError, match="topics, subscribePattern: expected one of them"):
        LoadConfig.from_properties({**base, "topics": "a", "subscribePattern": "a.*"})
    with pytest.raises(LoadConfigError, match=r"found none \(or subscribePattern\)"):
        LoadConfig.from_properties(base)
    with pytest.raises(LoadConfigError, match="subscribePattern: expected a regular expression"):
        LoadConfig.from_properties({**base, "subscribePattern": "a("})
    with pytest.raises(LoadConfigError, match="startingTimestamp: expected milliseconds"):
        LoadConfig.from_properties({**base, "topics": "a", "startingTimestamp": "yesterday"})
    with pytest.raises(LoadConfigError, match="startingOffsets"):
        LoadConfig.from_properties({**base, "topics": "a", "startingOffsets": "soonest"})
