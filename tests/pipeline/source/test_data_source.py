"""Tests for sluice.pipeline.source.data_source: the batch source against a real broker and a
real Spark (local[2]).

The model is what confluent-kafka's producer reports as delivered: every (topic, partition,
offset) must come back exactly once, with byte-identical key, value and headers.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from chispa import assert_df_equality

from sluice.pipeline.source.data_source import SluiceBatchReader, SluiceStreamReader, register
from sluice.pipeline.source.ranges import OffsetRange, OffsetsOutOfBoundsError
from sluice.pipeline.source.split_reader import ARROW_SCHEMA, ARROW_SCHEMA_NO_HEADERS
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import Produced, produce, simple_records
from tests.pipeline.source.transactional import write_mixed_log

pytestmark = pytest.mark.broker


SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
"""Spark's Kafka source columns (``KafkaRecordToRowConverter``) without includeHeaders."""


def _read(spark: Any, **options: str) -> Any:
    register(spark)
    return spark.read.format("sluice").options(**options).load()


def _rows(df: Any) -> list[Any]:
    return df.collect()


def _offsets(spark: Any, keys: list[tuple[int, int]]) -> Any:
    """The expected ``partition``, ``offset`` columns of a read, as a DataFrame."""
    return spark.createDataFrame(keys, "partition int, offset bigint")


def _as_model(row: Any) -> Produced:
    headers = row["headers"]
    return Produced(
        row["topic"],
        row["partition"],
        row["offset"],
        None if row["key"] is None else bytes(row["key"]),
        None if row["value"] is None else bytes(row["value"]),
        None
        if headers is None
        else tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in headers),
        int(row["timestamp"].timestamp() * 1000 + 0.5),
    )


def test_arrow_schema_is_what_spark_expects(spark: Any) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from sluice.pipeline.source.data_source import SluiceDataSource

    for include, arrow in (("true", ARROW_SCHEMA), ("false", ARROW_SCHEMA_NO_HEADERS)):
        ddl = SluiceDataSource({"includeheaders": include}).schema()
        struct = spark.createDataFrame([], ddl).schema
        assert to_arrow_schema(struct, timezone="UTC").equals(arrow)


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd", "snappy"])
def test_round_trip_is_byte_identical(
    spark: Any, kafka_broker: Any, topic_name: str, compression: str
) -> None:
    """Keys, values (null included), headers (null values included) and timestamps survive
    compressed batches; every produced offset is read exactly once."""
    create_topic(kafka_broker.bootstrap, topic_name, 3)
    rng = random.Random(7)
    records = []
    for i in range(600):
        records.append(
            {
                "topic": topic_name,
                "partition": i % 3,
                "key": None if i % 11 == 0 else rng.randbytes(rng.randint(0, 20)),
                "value": None if i % 7 == 0 else rng.randbytes(rng.randint(0, 300)),
                "headers": None
                if i % 2
                else [("trace", rng.randbytes(8)), ("empty", None), ("ü-ñ", b"")],
                "timestamp": 1_700_000_000_000 + i * 1000,
            }
        )
    produced = produce(kafka_broker.bootstrap, records, compression=compression, linger_ms=20)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
    df = _read(spark, **options, includeHeaders="true")
    got = [_as_model(r) for r in _rows(df)]
    assert Counter((g.topic, g.partition, g.offset) for g in got).most_common(1)[0][1] == 1
    assert sorted(got, key=lambda p: (p.partition, p.offset)) == sorted(
        produced, key=lambda p: (p.partition, p.offset)
    )
    types = {r["timestampType"] for r in df.select("timestampType").collect()}
    assert types == {0}  # CreateTime
    # Without includeHeaders the columns are exactly Spark's seven, and so are the rows.
    plain = _read(spark, **options)
    assert plain.columns == SPARK_COLUMNS
    assert_df_equality(plain, df.drop("headers"), ignore_row_order=True)


def test_splits_follow_min_partitions_and_max_records(
    spark: Any, kafka_broker: Any, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 3)
    produced = produce(kafka_broker.bootstrap, simple_records(topic_name, 3, 900))
    base = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}

    def splits(**extra: str) -> list[OffsetRange]:
        return [p.split for p in SluiceBatchReader({**base, **extra}).partitions()]

    assert [s.count for s in splits()] == [300, 300, 300]
    assert len(splits(minPartitions="7")) >= 7
    assert max(s.count for s in splits(maxRecordsPerPartition="70")) <= 70
    cut = splits(minPartitions="5", maxRecordsPerPartition="120")
    assert len(cut) >= 5 and max(s.count for s in cut) <= 120
    # The pieces tile each partition's range exactly.
    for p in range(3):
        pieces = sorted((s.start, s.end) for s in cut if s.partition == p)
        assert pieces[0][0] == 0 and pieces[-1][1] == 300
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))

    df = _read(spark, **base, minPartitions="5", maxRecordsPerPartition="120")
    assert df.rdd.getNumPartitions() == len(cut)
    expected = _offsets(spark, [(p.partition, p.offset) for p in produced])
    assert_df_equality(df.select("partition", "offset"), expected, ignore_row_order=True)


def test_many_and_empty_partitions(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    """16 partitions, half of them empty; an empty topic reads as an empty DataFrame."""
    create_topic(kafka_broker.bootstrap, topic_name, 16)
    records = [r for r in simple_records(topic_name, 16, 800) if r["partition"] % 2 == 0]
    produced = produce(kafka_broker.bootstrap, records)
    opts = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
    df = _read(spark, **opts)
    expected = _offsets(spark, [(p.partition, p.offset) for p in produced])
    assert_df_equality(df.select("partition", "offset"), expected, ignore_row_order=True)
    assert len(SluiceBatchReader(opts).partitions()) == 8

    empty = f"{topic_name}-empty"
    create_topic(kafka_broker.bootstrap, empty, 2)
    assert _read(spark, **{**opts, "subscribe": empty}).count() == 0


def test_offsets_json_assign_and_pattern(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    create_topic(kafka_broker.bootstrap, f"{topic_name}-b", 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 100))
    produce(kafka_broker.bootstrap, simple_records(f"{topic_name}-b", 1, 10))
    base = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
    df = _read(
        spark,
        **base,
        assign=json.dumps({topic_name: [1]}),
        startingOffsets=json.dumps({topic_name: {"1": 10}}),
        endingOffsets=json.dumps({topic_name: {"1": 20}}),
    )
    expected = _offsets(spark, [(1, o) for o in range(10, 20)])
    assert_df_equality(df.select("partition", "offset"), expected, ignore_row_order=True)

    pattern = _read(spark, **base, subscribePattern=f"{topic_name}(-b)?")
    assert Counter(r["topic"] for r in pattern.collect()) == {
        topic_name: 100,
        f"{topic_name}-b": 10,
    }


def test_out_of_range_fails_or_clamps(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    """A start past the log end (the topic was recreated) fails naming topic, partition and
    offsets; with failOnDataLoss=false it is clamped to the log end."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 5))
    base = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": json.dumps({topic_name: {"0": 50}}),
    }
    with pytest.raises(
        OffsetsOutOfBoundsError, match=rf"{topic_name}-0: start offset 50 .*log end 5"
    ):
        SluiceBatchReader(base).partitions()
    with pytest.raises(Exception, match=rf"{topic_name}-0: start offset 50"):
        _read(spark, **base).collect()
    assert _read(spark, **base, failOnDataLoss="false").count() == 0


def _assert_offsets_and_values(spark: Any, df: Any, expected: list[tuple[int, str]]) -> None:
    got = df.selectExpr("offset", "CAST(value AS STRING) AS value")
    want = spark.createDataFrame(expected, "offset bigint, value string")
    assert_df_equality(got, want, ignore_row_order=True)


def test_reads_committed_data_up_to_the_lso_by_default(
    spark: Any, kafka_broker: Any, topic_name: str
) -> None:
    """Committed, aborted, plain and open-transaction records: a default read ("latest" end)
    plans ``[0, LSO)`` and returns exactly the committed records before the open transaction;
    ``kafka.isolation.level=read_uncommitted`` plans ``[0, high watermark)`` and returns every
    data record; a streaming read's latest offset is the LSO too."""
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        base = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
        ranges = SluiceBatchReader(base).plan().ranges
        assert ranges == [OffsetRange(topic_name, 0, 0, log.lso)]
        _assert_offsets_and_values(spark, _read(spark, **base), log.visible_committed())
        assert "c4" in log.committed and log.offsets["c4"] > log.lso  # committed, not stable
        stream = SluiceStreamReader({**base, "startingOffsets": "earliest"})
        assert stream.initialOffset() == {topic_name: {"0": 0}}
        assert stream.latestOffset() == {topic_name: {"0": log.lso}}
        uncommitted = {**base, "kafka.isolation.level": "read_uncommitted"}
        assert SluiceBatchReader(uncommitted).plan().ranges == [
            OffsetRange(topic_name, 0, 0, log.high_watermark)
        ]
        _assert_offsets_and_values(spark, _read(spark, **uncommitted), log.everything())
    finally:
        log.close()
