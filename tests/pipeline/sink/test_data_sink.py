"""Tests for sluice.pipeline.sink.data_sink: ``df.write.format("sluice")`` in Spark (local
mode) against the session broker, read back with confluent-kafka."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice.pipeline.source.data_source import register
from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroDeserializer, decode_header
from sluice.testing.broker import create_topic
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
ROWS_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
        StructField("timestamp", TimestampType()),
    ]
)
BASE_MS = 1_700_000_000_000


def _row(i: int) -> tuple[Any, ...]:
    key = None if i % 10 == 0 else f"k{i}".encode()
    value = None if i % 7 == 0 else f"v{i}".encode()
    headers = None if i % 5 == 0 else [("h", str(i).encode()), ("empty", None)]
    stamp = dt.datetime.fromtimestamp((BASE_MS + i) / 1000, dt.UTC)
    return (key, value, i % 3, headers, stamp)


def _options(bootstrap: str, topic: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "topic": topic}


def test_thousand_rows_read_back_exactly(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    """Keys, explicit partitions, headers, timestamps and null values, in one task so the
    offsets are known: row i of partition p lands at the number of earlier rows of p."""
    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 3)
    rows = [_row(i) for i in range(1000)]
    df = spark.createDataFrame(rows, ROWS_SCHEMA).coalesce(1)
    df.write.format("sluice").options(**_options(kafka_broker.bootstrap, topic_name)).mode(
        "append"
    ).save()

    expected = []
    next_offset = [0, 0, 0]
    for key, value, partition, headers, _ in rows:
        offset = next_offset[partition]
        next_offset[partition] += 1
        expected.append((partition, offset, key, value, tuple(headers or ())))
    got = read_all(kafka_broker.bootstrap, topic_name)
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in got] == sorted(expected)
    by_value = {(r.partition, r.offset): r.timestamp for r in got}
    assert sorted(by_value.values()) == [BASE_MS + i for i in range(1000)]


def test_many_tasks_and_the_partitioner(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    """Four tasks, string columns, no partition column: every row once, offsets dense."""
    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    df = spark.range(0, 2000, numPartitions=4).selectExpr(
        "CAST(id AS STRING) AS key", "CONCAT('v', CAST(id AS STRING)) AS value"
    )
    df.write.format("sluice").options(**_options(kafka_broker.bootstrap, topic_name)).mode(
        "append"
    ).save()
    got = read_all(kafka_broker.bootstrap, topic_name)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(2000))
    for partition in (0, 1):
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(len(offsets)))


def test_topic_column_and_the_option_wins(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    register(spark)
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(kafka_broker.bootstrap, first, 1)
    create_topic(kafka_broker.bootstrap, second, 1)
    df = spark.createDataFrame([(first, "x"), (first, "y")], "topic string, value string")
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
    df.write.format("sluice").options(**options).mode("append").save()
    df.write.format("sluice").options(**options, topic=second).mode("append").save()
    assert sorted(r.value for r in read_all(kafka_broker.bootstrap, first)) == [b"x", b"y"]
    assert sorted(r.value for r in read_all(kafka_broker.bootstrap, second)) == [b"x", b"y"]


@pytest.mark.parametrize(
    ("select", "topic", "error", "message"),
    [
        ("CAST(id AS STRING) AS key", True, "MissingValueColumnError",
         "Required attribute 'value' not found"),
        ("id AS value", True, "ColumnTypeError", "value attribute unsupported type bigint"),
        ("CAST(id AS STRING) AS value", False, "MissingTopicError", "topic option required"),
        ("CAST(id AS STRING) AS value, id AS partition", True, "ColumnTypeError",
         "partition attribute unsupported type bigint"),
    ],
)  # fmt: skip
def test_typed_errors_before_any_write(
    spark: Any,
    kafka_broker: Any,
    topic_name: str,
    select: str,
    topic: bool,
    error: str,
    message: str,
) -> None:
    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    df = spark.range(10).selectExpr(*select.split(", "))
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
    if topic:
        options["topic"] = topic_name
    with pytest.raises(Exception, match=error) as caught:
        df.write.format("sluice").options(**options).mode("append").save()
    assert message in str(caught.value)
    assert read_all(kafka_broker.bootstrap, topic_name) == []


def test_overwrite_is_refused(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    register(spark)
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="UnsupportedSaveModeError") as caught:
        df.write.format("sluice").options(**_options(kafka_broker.bootstrap, topic_name)).mode(
            "overwrite"
        ).save()
    assert "Save mode overwrite not allowed" in str(caught.value)


def test_unknown_option_is_refused(spark: Any, kafka_broker: Any, topic_name: str) -> None:
    register(spark)
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="UnknownSinkOptionError") as caught:
        df.write.format("sluice").options(
            **_options(kafka_broker.bootstrap, topic_name), valueFromat="avro"
        ).mode("append").save()
    assert "did you mean 'valueFormat'" in str(caught.value)


# -- Avro values -------------------------------------------------------------------------------

VIEW_SCHEMA = {
    "type": "record",
    "name": "View",
    "namespace": "sluice.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "page", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "score", "type": ["null", "double"], "default": None},
    ],
}
VALUE_TYPE = StructType(
    [
        StructField("id", LongType()),
        StructField("page", StringType()),
        StructField("at", TimestampType()),
        StructField("tags", MapType(StringType(), StringType())),
        StructField("score", DoubleType()),
    ]
)


def _views(n: int) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(n):
        at = dt.datetime.fromtimestamp((BASE_MS + i * 1000) / 1000, dt.UTC)
        value = (i, f"/p/{i % 4}", at, {"ab": "b" if i % 2 else "a"}, None if i % 3 else i / 2)
        rows.append((f"k{i}", None if i == 5 else value))
    return rows


def test_avro_values_round_trip_through_the_registry(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    avsc = tmp_path / "view.avsc"
    avsc.write_text(json.dumps(VIEW_SCHEMA))
    schema = StructType([StructField("key", StringType()), StructField("value", VALUE_TYPE)])
    df = spark.createDataFrame(_views(20), schema).coalesce(1)
    options = {
        **_options(kafka_broker.bootstrap, topic_name),
        "valueFormat": "avro",
        "schema.registry.url": registry_url,
    }
    df.write.format("sluice").options(**options, valueSchema=str(avsc)).mode("append").save()
    # Again with the subject's latest version, as registered by the first write.
    df.limit(2).write.format("sluice").options(**options).mode("append").save()

    client = RegistryClient(registry_url)
    registered = client.get_version(f"{topic_name}-value", "latest")
    deserializer = AvroDeserializer(client)
    got = read_all(kafka_broker.bootstrap, topic_name)
    assert len(got) == 22
    decoded = []
    for record in got:
        if record.value is None:
            decoded.append((record.key, None))
            continue
        assert decode_header(record.value)[0] == registered["id"]
        decoded.append((record.key, deserializer.deserialize(record.value)))
    expected = []
    for key, value in _views(20) + _views(2):
        if value is None:
            expected.append((key.encode(), None))
            continue
        i, page, at, tags, score = value
        view = {"id": i, "page": page, "at": at, "tags": tags, "score": score}
        expected.append((key.encode(), view))
    assert decoded == expected


def test_avro_struct_not_fitting_the_schema_is_refused(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    avsc = tmp_path / "view.avsc"
    avsc.write_text(json.dumps(VIEW_SCHEMA))
    df = spark.range(3).selectExpr("named_struct('id', id, 'referrer', 'x') AS value")
    with pytest.raises(Exception, match="ValueStructMismatchError") as caught:
        df.write.format("sluice").options(
            **_options(kafka_broker.bootstrap, topic_name),
            valueFormat="avro",
            valueSchema=str(avsc),
            **{"schema.registry.url": registry_url},
        ).mode("append").save()
    assert "found referrer not in it" in str(caught.value)
    assert read_all(kafka_broker.bootstrap, topic_name) == []
