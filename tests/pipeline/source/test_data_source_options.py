"""Tests for sluice.pipeline.source.data_source with Spark's Kafka source options, against a real
broker and a real Spark (local[2]).

The expected offsets come from the log, not from Sluice: records are produced with explicit
timestamps, and each expectation is what Spark's own source returns for that log — the first
offset whose timestamp is at least the one asked for (ListOffsets by timestamp), an error or
latest when there is none — written out by hand beside the model that checks it.
"""

from __future__ import annotations

from typing import Any

import pytest
from chispa import assert_df_equality

from sluice.pipeline.source.data_source import register
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import Produced, produce, simple_records

pytestmark = pytest.mark.broker

T = 1_700_000_000_000  # ms; every record's timestamp is T + something
# The log: per partition, (offset, timestamp - T). Two produce batches per partition.
LOG = {
    0: [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 100), (6, 101), (7, 102), (8, 103), (9, 104)],
    1: [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14), (5, 200), (6, 201), (7, 202), (8, 203),
        (9, 204)],
}  # fmt: skip


def _fill(bootstrap: str, topic: str) -> list[Produced]:
    create_topic(bootstrap, topic, 2)
    produced: list[Produced] = []
    for batch in (slice(0, 5), slice(5, 10)):
        produced += produce(
            bootstrap,
            [
                {"topic": topic, "partition": p, "value": f"{p}-{o}".encode(), "timestamp": T + t}
                for p in (0, 1)
                for o, t in LOG[p][batch]
            ],
        )
    got = {(r.partition, r.offset, r.timestamp_ms - T) for r in produced}
    assert got == {(p, o, t) for p, rows in LOG.items() for o, t in rows}, "unexpected log"
    return produced


def _first_at_or_after(partition: int, ts: int) -> int | None:
    """The model: Kafka's ListOffsets by timestamp on ``LOG`` (``ts`` relative to T)."""
    return next((o for o, t in LOG[partition] if t >= ts), None)


def _offsets(spark: Any, **options: str) -> list[tuple[int, int]]:
    register(spark)
    df = spark.read.format("sluice").options(**options).load()
    return sorted((r[0], r[1]) for r in df.select("partition", "offset").collect())


def _assert_read(spark: Any, expected: list[tuple[int, int]], **options: str) -> None:
    """The read of ``options`` holds exactly the ``(partition, offset)`` keys ``expected``."""
    register(spark)
    df = spark.read.format("sluice").options(**options).load().select("partition", "offset")
    want = spark.createDataFrame(expected, "partition int, offset bigint")
    assert_df_equality(df, want, ignore_row_order=True)


def _span(p0: range, p1: range) -> list[tuple[int, int]]:
    return [(0, o) for o in p0] + [(1, o) for o in p1]


@pytest.fixture
def filled(kafka_broker: Any, topic_name: str) -> dict[str, str]:
    _fill(kafka_broker.bootstrap, topic_name)
    return {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}


def test_starting_timestamp_before_between_and_after(spark: Any, filled: dict[str, str]) -> None:
    # Before the first record: every offset.
    assert _first_at_or_after(0, -1000) == _first_at_or_after(1, -1000) == 0
    _assert_read(spark, _span(range(10), range(10)), **filled, startingTimestamp=str(T - 1000))
    # Between the two batches of both partitions: the second batches.
    assert _first_at_or_after(0, 50) == _first_at_or_after(1, 50) == 5
    _assert_read(spark, _span(range(5, 10), range(5, 10)), **filled, startingTimestamp=str(T + 50))
    # After partition 0's last record but not partition 1's: Spark fails on partition 0 ...
    assert _first_at_or_after(0, 150) is None and _first_at_or_after(1, 150) == 5
    with pytest.raises(Exception, match=r"no offset matched .* topic-partition \S+-0 and time"):
        _offsets(spark, **filled, startingTimestamp=str(T + 150))
    # ... unless the strategy is latest: partition 0 starts at its end (10).
    latest = {**filled, "startingOffsetsByTimestampStrategy": "latest"}
    _assert_read(spark, _span(range(0), range(5, 10)), **latest, startingTimestamp=str(T + 150))
    # After the last record of every partition: an error, or nothing with strategy latest.
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
        _offsets(spark, **filled, startingTimestamp=str(T + 1000))
    _assert_read(spark, [], **latest, startingTimestamp=str(T + 1000))


def test_ending_timestamp_and_precedence(spark: Any, filled: dict[str, str]) -> None:
    # The end is exclusive: records before the first one at or after the timestamp.
    assert (_first_at_or_after(0, 12), _first_at_or_after(1, 12)) == (5, 2)
    _assert_read(spark, _span(range(5), range(2)), **filled, endingTimestamp=str(T + 12))
    # No record that late: the end is latest (never an error).
    _assert_read(spark, _span(range(10), range(10)), **filled, endingTimestamp=str(T + 5000))
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets;
    # endingTimestamp over endingOffsetsByTimestamp and endingOffsets.
    topic = filled["subscribe"]
    mixed = {
        **filled,
        "startingTimestamp": str(T + 50),
        "startingOffsetsByTimestamp": f'{{"{topic}":{{"0":{T},"1":{T}}}}}',
        "startingOffsets": "earliest",
        "endingTimestamp": str(T + 102),
        "endingOffsetsByTimestamp": f'{{"{topic}":{{"0":{T + 5000},"1":{T + 5000}}}}}',
        "endingOffsets": "latest",
    }
    assert (_first_at_or_after(0, 102), _first_at_or_after(1, 102)) == (7, 5)
    _assert_read(spark, _span(range(5, 7), range(0)), **mixed)
    # A start after the end, once resolved, is refused as Spark refuses it.
    with pytest.raises(Exception, match="expected startingOffsets <= endingOffsets"):
        _offsets(spark, **filled, startingTimestamp=str(T + 50), endingTimestamp=str(T + 2))


def test_per_partition_timestamps_with_earliest_and_latest(
    spark: Any, filled: dict[str, str]
) -> None:
    topic = filled["subscribe"]
    options = {
        **filled,
        # -2 and -1 are ListOffsets' earliest and latest, which Spark passes on to Kafka.
        "startingOffsetsByTimestamp": f'{{"{topic}":{{"0":{T + 2},"1":-2}}}}',
        "endingOffsetsByTimestamp": f'{{"{topic}":{{"0":{T + 103},"1":-1}}}}',
    }
    assert (_first_at_or_after(0, 2), _first_at_or_after(0, 103)) == (2, 8)
    _assert_read(spark, _span(range(2, 8), range(10)), **options)
    with pytest.raises(Exception, match="timestamps must name exactly the assigned partitions"):
        _offsets(spark, **filled, startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{T}}}}}')


def test_streaming_starts_at_a_timestamp(spark: Any, filled: dict[str, str], tmp_path: Any) -> None:
    register(spark)
    df = spark.readStream.format("sluice").options(**filled, startingTimestamp=str(T + 50)).load()
    query = (
        df.select("partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    rows = spark.read.parquet(str(tmp_path / "out"))
    want = spark.createDataFrame(_span(range(5, 10), range(5, 10)), "partition int, offset bigint")
    assert_df_equality(rows, want, ignore_row_order=True, ignore_nullable=True)


def test_default_schema_is_sparks_seven_columns(
    spark: Any, kafka_broker: Any, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(
        kafka_broker.bootstrap,
        [{"topic": topic_name, "value": b"v", "headers": [("h", b"1")]}],
    )
    register(spark)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
    df = spark.read.format("sluice").options(**options).load()
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    with_headers = spark.read.format("sluice").options(**options, includeHeaders="true").load()
    assert with_headers.schema.fields[7].name == "headers"
    assert len(with_headers.columns) == 8
    assert [(h["key"], bytes(h["value"])) for h in with_headers.collect()[0]["headers"]] == [
        ("h", b"1")
    ]


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [("startingOffset", "startingOffsets"), ("failOnDataLos", "failOnDataLoss")],
)
def test_a_typo_fails_at_load_with_the_nearest_option(
    spark: Any, kafka_broker: Any, typo: str, nearest: str
) -> None:
    register(spark)
    reader = spark.read.format("sluice").options(
        **{"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": "t", typo: "x"}
    )
    with pytest.raises(Exception, match=rf"option '{typo.lower()}'.*did you mean '{nearest}'"):
        reader.load()


def test_java_client_options_translated_or_refused(
    spark: Any, kafka_broker: Any, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 5))
    base = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
    # A Spark job's JAAS line: librdkafka would refuse the key; translated, the read works
    # (the broker listens in plaintext, so the credentials are simply not used).
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";'
    )
    assert len(_offsets(spark, **base, **{"kafka.sasl.jaas.config": jaas})) == 5
    # A JKS truststore has no librdkafka equivalent: refused, saying what to use instead.
    jks = {**base, "kafka.ssl.truststore.location": "/etc/kafka/truststore.jks"}
    with pytest.raises(Exception, match="convert it to PEM .* kafka.ssl.ca.location") as caught:
        _offsets(spark, **jks, **{"kafka.ssl.truststore.password": "trust-secret"})
    assert "trust-secret" not in str(caught.value)
    with pytest.raises(Exception, match="'kafka.auto.offset.reset': not supported"):
        _offsets(spark, **base, **{"kafka.auto.offset.reset": "earliest"})


def test_min_partitions_splits_large_ranges(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 2, 200))
    register(spark)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic_name}
    plain = spark.read.format("sluice").options(**options).load()
    assert plain.rdd.getNumPartitions() == 2  # one Spark partition per Kafka partition
    split = spark.read.format("sluice").options(**options, minPartitions="7").load()
    assert split.rdd.getNumPartitions() >= 7
    want = spark.createDataFrame(_span(range(100), range(100)), "partition int, offset bigint")
    assert_df_equality(split.select("partition", "offset"), want, ignore_row_order=True)
