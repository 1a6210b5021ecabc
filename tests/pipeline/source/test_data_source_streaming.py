"""Tests for sluice.pipeline.source.data_source under Structured Streaming: availableNow into a
Parquet file sink.

The file sink and the checkpoint together make a micro-batch exactly-once: rerunning the same
query (same checkpoint) after the topic grew must add just the new records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.data_source import _rate_limit, register
from sluice.testing.broker import create_topic
from sluice.testing.net import wait_until
from tests.pipeline.broker_fixture import Produced, produce, simple_records

pytestmark = pytest.mark.broker


def _run_available_now(spark: Any, options: dict[str, str], out: Path, checkpoint: Path) -> Any:
    register(spark)
    df = spark.readStream.format("sluice").options(**options).load()
    query = (
        df.select("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive, "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def _assert_landed(spark: Any, out: Path, produced: list[Produced]) -> None:
    """The file sink at ``out`` holds every produced record exactly once."""
    landed = spark.read.parquet(str(out)).select("topic", "partition", "offset")
    keys = [(p.topic, p.partition, p.offset) for p in produced]
    want = spark.createDataFrame(keys, "topic string, partition int, offset bigint")
    assert_df_equality(landed, want, ignore_row_order=True)


def test_available_now_three_runs_with_a_new_topic(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """Three availableNow runs on one checkpoint while the data grows. A partition appears
    between runs: the broker has no CreatePartitions, so the query uses ``subscribePattern``
    and a new topic matching the pattern is created instead — its partitions are new to the
    query exactly as added partitions would be, and must be read from earliest."""
    bootstrap = kafka_broker.bootstrap
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(bootstrap, first, 2)
    produced = produce(bootstrap, simple_records(first, 2, 100))
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribePattern": f"{topic_name}-.*",
        "startingOffsets": "earliest",
    }
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    _run_available_now(spark, options, out, checkpoint)
    _assert_landed(spark, out, produced)

    produced += produce(bootstrap, simple_records(first, 2, 40, prefix="second"))
    create_topic(bootstrap, second, 3)
    produced += produce(bootstrap, simple_records(second, 3, 30))
    _run_available_now(spark, options, out, checkpoint)
    _assert_landed(spark, out, produced)

    produced += produce(bootstrap, simple_records(second, 3, 9, prefix="third"))
    query = _run_available_now(spark, options, out, checkpoint)
    _assert_landed(spark, out, produced)  # every record once: no duplicate either
    # Offsets in the checkpoint are Spark's offsets JSON.
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end == {first: {"0": 70, "1": 70}, second: {"0": 13, "1": 13, "2": 13}}


def test_max_offsets_per_trigger_cuts_micro_batches(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 200))
    options = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "60",
    }
    query = _run_available_now(spark, options, tmp_path / "out", tmp_path / "checkpoint")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 4 and max(sizes) <= 60 and sum(sizes) == 200
    _assert_landed(spark, tmp_path / "out", produced)


def test_rate_limit_shares_by_backlog() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    start = {a: 0, b: 100, c: 5}
    end = {a: 300, b: 200, c: 5}
    capped = _rate_limit(start, end, 100)
    assert capped == {a: 75, b: 125, c: 5}
    assert _rate_limit(start, end, 1000) == end
    # A partition whose share rounds below one still moves (Spark: ceil below 1).
    assert _rate_limit({a: 0, b: 0}, {a: 1000, b: 1}, 10)[b] == 1


def _memory_query(spark: Any, options: dict[str, str], name: str) -> Any:
    register(spark)
    df = spark.readStream.format("sluice").options(**options).load()
    return (
        df.select("partition", "offset")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _count(spark: Any, name: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0])


def _wait_for(spark: Any, name: str, query: Any, count: int, timeout: float = 90.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while _count(spark, name) < count:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"expected {count} rows, found {_count(spark, name)}"
        time.sleep(0.2)


def _batch_sizes(query: Any, rows: int, timeout: float = 30.0) -> list[int]:
    """The rows of each micro-batch that read any, once they add up to ``rows``: Spark posts
    a batch's progress after its sink commit, so the memory table can show a batch's rows a
    moment before ``recentProgress`` does (seen on a loaded CI machine)."""
    sizes: list[int] = []

    def complete() -> bool:
        sizes[:] = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        return sum(sizes) >= rows

    wait_until(complete, timeout, f"micro-batches of {rows} rows in the query's progress")
    return sizes


def test_min_and_max_offsets_per_trigger(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    """Spark's ``minOffsetsPerTrigger``: no batch while fewer offsets wait (the delay is an
    hour here); the first batch is never delayed; ``maxOffsetsPerTrigger`` still caps."""
    import time

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    produce(bootstrap, simple_records(topic_name, 2, 100))
    name = f"q_{topic_name.replace('-', '_')}"
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "30",
        "maxOffsetsPerTrigger": "60",
        "maxTriggerDelay": "1h",
    }
    query = _memory_query(spark, options, name)
    try:
        _wait_for(spark, name, query, 100)
        assert _batch_sizes(query, 100) == [60, 40]
        produce(bootstrap, simple_records(topic_name, 2, 10, prefix="few"))
        time.sleep(4)  # many triggers: 10 < 30 waiting, and the hour has not passed
        assert _count(spark, name) == 100
        produce(bootstrap, simple_records(topic_name, 2, 24, prefix="more"))
        _wait_for(spark, name, query, 134)
        sizes = _batch_sizes(query, 134)
        assert sizes[-1] == 34 and sum(sizes) == 134
    finally:
        query.stop()


def test_max_trigger_delay_releases_a_small_batch(
    spark: Any, kafka_broker: Any, topic_name: str
) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, simple_records(topic_name, 1, 5))
    name = f"q_{topic_name.replace('-', '_')}"
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "1000",
        "maxTriggerDelay": "2s",
    }
    query = _memory_query(spark, options, name)
    try:
        _wait_for(spark, name, query, 5)  # the first batch is never delayed
        produce(bootstrap, simple_records(topic_name, 1, 3, prefix="late"))
        _wait_for(spark, name, query, 8)  # 3 < 1000, released once 2 s have passed
        rows = spark.sql(f"SELECT offset FROM {name}")
        want = spark.createDataFrame([(o,) for o in range(8)], "offset bigint")
        assert_df_equality(rows, want, ignore_row_order=True)
    finally:
        query.stop()
