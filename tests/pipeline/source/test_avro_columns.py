"""Tests for sluice.pipeline.source.avro_columns — typed loads: Avro values as typed columns,
through a real registry, broker and Spark, by the source and by the nightly load (the last
test; it needs this module's registry and records).

The model is what was produced: every good record must come back once with the values it was
serialized from (resolved to the reader schema), and every undecodable one must be in the
error table with its topic, partition, offset and reason, or fail the read when so configured.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from sluice.pipeline.load.run import LoadConfig, LoadError, run_load
from sluice.pipeline.source.avro_columns import (
    UnsupportedAvroSchemaError,
    avro_to_spark,
    output_schema,
)
from sluice.pipeline.source.data_source import register
from sluice.pipeline.source.typed_columns import ReaderSchema
from sluice.pipeline.table.commit import latest_manifest, published_runs
from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroSerializer, encode_header
from sluice.testing.broker import create_topic
from sluice.testing.registry import RegistryProcess
from tests.pipeline.broker_fixture import Produced, produce

pytestmark = pytest.mark.broker

PAGE_VIEW = json.loads(schema_path("page_view").read_text())
UTC = dt.UTC


def page_view_v2() -> dict[str, Any]:
    """``page_view.avsc`` plus two fields with defaults: BACKWARD compatible."""
    schema = json.loads(json.dumps(PAGE_VIEW))
    schema["fields"].append({"name": "browser", "type": "string", "default": "unknown"})
    schema["fields"].append({"name": "country", "type": ["null", "string"], "default": None})
    return schema


def view(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"ev-{i}",
        "timestamp": dt.datetime(2011, 6, 12, 8, 30, i % 60, (i % 1000) * 1000, tzinfo=UTC),
        "server": f"fe-{i % 3}",
        "user_id": f"u{i % 7}",
        "page": "/jobs" if i % 2 else "/feed",
        "referrer": None if i % 3 else f"https://example.org/{i}",
        "duration_ms": 10 + i,
        **extra,
    }


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("typed-registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    assert process.stop() == 0, process.log()


def _records(topic: str, values: list[bytes | None], partitions: int) -> list[dict[str, Any]]:
    now = int(time.time() * 1000)
    return [
        {"topic": topic, "partition": i % partitions, "key": f"k{i}".encode(), "value": v,
         "timestamp": now}
        for i, v in enumerate(values)
    ]  # fmt: skip


def _read(spark: Any, bootstrap: str, topic: str, registry: str, **options: str) -> Any:
    register(spark)
    return (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry)
        .options(**options)
        .load()
    )


def _assert_columns(
    spark: Any, df: Any, expected: list[dict[str, Any]], *, order_by: str | None = None
) -> None:
    """The columns of ``df`` that ``expected``'s dicts name hold exactly those rows: in any
    order, or in ``expected``'s sorted by ``order_by`` (needed with a map column, which Spark
    can neither sort nor hash). The expected rows take ``df``'s types, so an Avro value is
    compared as Spark holds it."""
    got = df.select(*expected[0])
    want = spark.createDataFrame([tuple(e[c] for c in got.columns) for e in expected], got.schema)
    if order_by is None:
        assert_df_equality(got, want, ignore_row_order=True)
    else:
        assert_df_equality(got.orderBy(order_by), want.orderBy(order_by))


# -- type mapping (no servers) ------------------------------------------------------------------


def test_avro_types_map_to_spark_types() -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DateType,
        DecimalType,
        LongType,
        MapType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                        "precision": 9, "scale": 2}},  # fmt: skip
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "again", "type": "K"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "inner", "type": ["null", {"type": "record", "name": "I",
                                                "fields": [{"name": "b", "type": "bytes"}]}]},
            {"name": "wide", "type": ["int", "long"]},
        ],
    }  # fmt: skip
    struct = avro_to_spark(json.dumps(schema))
    assert isinstance(struct, StructType)
    types = {f.name: f.dataType for f in struct.fields}
    assert types["ts"] == TimestampType()
    assert types["local"] == TimestampNTZType()
    assert types["day"] == DateType()
    assert types["amount"] == DecimalType(9, 2)
    assert types["kind"] == types["again"] == StringType()
    assert types["tags"] == ArrayType(StringType(), True)
    assert types["attrs"] == MapType(StringType(), LongType(), True)
    assert types["inner"] == StructType().add("b", BinaryType())
    assert types["wide"] == LongType()

    bad_union = {
        "type": "record",
        "name": "U",
        "fields": [{"name": "x", "type": ["int", "string"]}],
    }
    with pytest.raises(UnsupportedAvroSchemaError, match=r"value\.x: expected a union of null"):
        avro_to_spark(json.dumps(bad_union))
    recursive = {"type": "record", "name": "Node",
                 "fields": [{"name": "next", "type": ["null", "Node"]}]}  # fmt: skip
    with pytest.raises(UnsupportedAvroSchemaError, match=r"value\.next: .*non-recursive"):
        avro_to_spark(json.dumps(recursive))


def test_kafka_columns_beside_value_fields() -> None:
    reader = ReaderSchema(json.dumps(PAGE_VIEW), 1, "pv-value", 1)
    flat = output_schema(reader, nested=False, include_headers=False)
    assert flat.schema.names == [
        *(f["name"] for f in PAGE_VIEW["fields"]),
        "key", "topic", "partition", "offset", "kafka_timestamp", "timestampType",
    ]  # fmt: skip
    assert flat.column("timestamp") == "kafka_timestamp"
    nested = output_schema(reader, nested=True, include_headers=True)
    assert nested.schema.names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]  # fmt: skip


def test_decoder_fetches_each_writer_schema_once(registry_url: str, topic_name: str) -> None:
    """Executor side, without Spark: one registry lookup per writer id however many batches;
    a null value and a writer that does not resolve to the reader are error rows."""
    import pyarrow as pa

    from sluice.pipeline.source.avro_columns import AvroBatchDecoder, _deserializer
    from sluice.pipeline.source.split_reader import ARROW_SCHEMA_NO_HEADERS
    from sluice.pipeline.source.typed_columns import ERROR_ARROW_SCHEMA

    client = RegistryClient(registry_url)
    subject = f"{topic_name}-value"
    v1 = AvroSerializer(client, PAGE_VIEW, subject)
    v2 = AvroSerializer(client, page_view_v2(), subject)
    other = {"type": "record", "name": "PageView", "namespace": "sluice.events",
             "fields": [{"name": "event_id", "type": "long"}]}  # fmt: skip
    clash = AvroSerializer(client, other, f"{topic_name}-other-value")
    assert len({v1.schema_id, v2.schema_id, clash.schema_id}) == 3  # registered now
    latest = client.get_version(subject)
    reader = ReaderSchema(latest["schema"], latest["id"], subject, latest["version"])
    layout = output_schema(reader, nested=False, include_headers=False)
    decoder = AvroBatchDecoder(registry_url, reader, layout, fail=False)

    def raw(values: list[bytes | None], first: int) -> pa.RecordBatch:
        n = len(values)
        return pa.RecordBatch.from_pydict(
            {"key": [None] * n, "value": values, "topic": [topic_name] * n,
             "partition": [0] * n, "offset": list(range(first, first + n)),
             "timestamp": [dt.datetime(2024, 1, 1, tzinfo=UTC)] * n, "timestampType": [0] * n},
            schema=ARROW_SCHEMA_NO_HEADERS,
        )  # fmt: skip

    lookups = _deserializer(registry_url, reader.text).registry_client
    sent_before = lookups.requests_sent
    for b in range(3):
        values = [v1(view(i)) for i in range(4)] + [v2(view(9, browser="w3m"))]
        typed, errors = decoder.decode(raw(values, b * 5))
        assert typed.num_rows == 5 and errors.num_rows == 0
        assert typed.column("browser").to_pylist() == ["unknown"] * 4 + ["w3m"]
    assert lookups.requests_sent - sent_before == 2  # ids of v1 and v2, once each
    assert decoder.stats.schema_ids == {v1.schema_id, v2.schema_id}

    typed, errors = decoder.decode(raw([None, clash({"event_id": 7}), v1(view(1))], 100))
    assert typed.num_rows == 1 and typed.column("offset").to_pylist() == [102]
    assert errors.schema == ERROR_ARROW_SCHEMA
    rows = errors.to_pylist()
    assert [(r["offset"], r["error"]) for r in rows] == [
        (100, "NullValueError"),
        (101, "UndecodableAvroError"),
    ]
    assert rows[0]["schema_id"] is None and rows[1]["schema_id"] == clash.schema_id
    assert decoder.stats.errors == 2


# -- the source ---------------------------------------------------------------------------------


def test_confluent_serializer_records_read_back_typed(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    """confluent-kafka's own AvroSerializer writes; the typed columns hold what it was given."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.types import IntegerType, StringType, TimestampType

    create_topic(kafka_broker.bootstrap, topic_name, 2)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        serialize = ConfluentSerializer(sr, json.dumps(PAGE_VIEW))
        ctx = SerializationContext(topic_name, MessageField.VALUE)
        views = [view(i) for i in range(60)]
        produced = produce(
            kafka_broker.bootstrap,
            _records(topic_name, [serialize(v, ctx) for v in views], 2),
            compression="zstd",
        )
    sent = {(m.partition, m.offset): views[int(m.key.decode()[1:])] for m in produced if m.key}

    df = _read(spark, kafka_broker.bootstrap, topic_name, registry_url)
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["timestamp"] == TimestampType() == types["kafka_timestamp"]
    assert types["duration_ms"] == IntegerType() and types["referrer"] == StringType()
    expected = [
        {"topic": topic_name, "partition": p, "offset": o, **value}
        for (p, o), value in sent.items()
    ]
    _assert_columns(spark, df, expected)
    assert df.filter("key IS NULL").count() == 0

    nested = _read(spark, kafka_broker.bootstrap, topic_name, registry_url, valueColumns="struct")
    _assert_columns(
        spark, nested, [{"partition": p, "offset": o, "value": v} for (p, o), v in sent.items()]
    )


def test_rich_types_round_trip(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    """Records, arrays, maps, enums, bytes, decimals, dates, nullable unions: the values that
    fastavro was given come back through Arrow and Spark unchanged."""
    schema = {
        "type": "record", "name": "Rich", "namespace": "sluice.test",
        "fields": [
            {"name": "flag", "type": "boolean"},
            {"name": "n", "type": "long"},
            {"name": "x", "type": "double"},
            {"name": "raw", "type": "bytes"},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                        "precision": 9, "scale": 2}},
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "counts", "type": {"type": "map", "values": "int"}},
            {"name": "where", "type": ["null", {"type": "record", "name": "Where", "fields": [
                {"name": "city", "type": "string"},
                {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            ]}], "default": None},
        ],
    }  # fmt: skip
    client = RegistryClient(registry_url)
    serializer = AvroSerializer(client, schema, f"{topic_name}-value")
    values = [
        {
            "flag": i % 2 == 0,
            "n": 2**40 + i,
            "x": i / 4,
            "raw": bytes([i, 0, 255]),
            "kind": "AB"[i % 2],
            "day": dt.date(2024, 1, 1 + i),
            "amount": decimal.Decimal(f"{i}.25"),
            "id": f"00000000-0000-4000-8000-00000000000{i}",
            "tags": [f"t{j}" for j in range(i)],
            "counts": {f"c{j}": j for j in range(i)},
            "where": None
            if i == 0
            else {"city": "Paris", "ts": dt.datetime(2024, 5, 1, 0, 0, 0, i, tzinfo=UTC)},
        }
        for i in range(4)
    ]
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, _records(topic_name, [serializer(v) for v in values], 1))
    rows = _read(spark, kafka_broker.bootstrap, topic_name, registry_url)
    expected = [{"offset": i, **value} for i, value in enumerate(values)]
    _assert_columns(spark, rows, expected, order_by="offset")


def test_two_schema_versions_land_in_one_table(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    """v1 and v2 records in one topic: the latest (v2) is the reader schema, v1 records get
    the new fields' defaults; an older version can be asked for and drops the new fields."""
    client = RegistryClient(registry_url)
    subject = f"{topic_name}-value"
    v1 = AvroSerializer(client, PAGE_VIEW, subject)
    v2 = AvroSerializer(client, page_view_v2(), subject)
    values = [v1(view(i)) for i in range(10)]
    values += [v2(view(i, browser="firefox", country="FR")) for i in range(10, 15)]
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produce(kafka_broker.bootstrap, _records(topic_name, values, 2))
    assert v1.schema_id != v2.schema_id

    rows = _read(spark, kafka_broker.bootstrap, topic_name, registry_url)
    expected = [
        {"event_id": f"ev-{i}", "browser": "unknown", "country": None, "duration_ms": 10 + i}
        for i in range(10)
    ] + [
        {"event_id": f"ev-{i}", "browser": "firefox", "country": "FR", "duration_ms": 10 + i}
        for i in range(10, 15)
    ]
    _assert_columns(spark, rows, expected)

    old = _read(spark, kafka_broker.bootstrap, topic_name, registry_url, valueSchemaVersion="1")
    assert "browser" not in old.columns
    _assert_columns(spark, old, [{"event_id": e["event_id"]} for e in expected])


def _corrupt_values(client: RegistryClient, topic: str) -> tuple[list[bytes | None], int]:
    """12 good page views and 4 bad values: wrong magic, short header, unknown id, cut body."""
    serializer = AvroSerializer(client, PAGE_VIEW, f"{topic}-value")
    good: list[bytes | None] = [serializer(view(i)) for i in range(12)]
    body = serializer(view(99))
    bad: list[bytes | None] = [
        b"\x01" + body[1:],  # wrong magic byte
        b"\x00\x00",  # too short for the header
        encode_header(987_654) + body[5:],  # an id the registry never gave
        body[:12],  # the Avro body ends early
    ]
    return good[:6] + bad[:2] + good[6:] + bad[2:], serializer.schema_id


BAD_ERRORS = {
    "WrongMagicByteError",
    "TruncatedPayloadError",
    "UnknownSchemaIdError",
}


def test_corrupt_records_go_to_the_error_table_or_fail(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_url)
    values, _ = _corrupt_values(client, topic_name)
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, _records(topic_name, values, 2))
    bad = {(m.partition, m.offset) for m in produced if _is_bad(m)}
    assert len(bad) == 4

    errors_dir = tmp_path / "errors"
    df = _read(
        spark, kafka_broker.bootstrap, topic_name, registry_url, decodeErrorPath=str(errors_dir)
    )
    good = sorted({(m.partition, m.offset) for m in produced} - bad)
    _assert_columns(spark, df, [{"partition": p, "offset": o} for p, o in good])
    by_where = {(m.partition, m.offset): m.value for m in produced}
    error_table = spark.read.parquet(str(errors_dir))
    _assert_columns(
        spark,
        error_table,
        [
            {"topic": topic_name, "partition": p, "offset": o, "value": by_where[p, o]}
            for p, o in sorted(bad)
        ],
    )
    errors = error_table.collect()
    assert {r["error"] for r in errors} >= BAD_ERRORS
    assert all(r["reason"] for r in errors)
    unknown = next(r for r in errors if r["error"] == "UnknownSchemaIdError")
    assert unknown["schema_id"] == 987_654 and "987654" in unknown["reason"]

    failing = _read(spark, kafka_broker.bootstrap, topic_name, registry_url, onDecodeError="fail")
    with pytest.raises(Exception, match=rf"{topic_name}-[01] offset \d+: cannot decode") as info:
        failing.collect()
    assert "onDecodeError=fail" in str(info.value)


def _is_bad(m: Produced) -> bool:
    value = m.value or b""
    return len(value) < 13 or value[0] != 0 or value[1:5] == encode_header(987_654)[1:]


# -- the nightly load ---------------------------------------------------------------------------


def _load_config(bootstrap: str, topic: str, registry: str, warehouse: Path, **extra: str) -> Any:
    return LoadConfig.from_properties(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topics": topic,
            "warehouse.path": str(warehouse),
            "valueFormat": "avro",
            "schema.registry.url": registry,
            **extra,
        }
    )


def test_nightly_load_publishes_typed_rows_errors_and_schema_ids(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    client = RegistryClient(registry_url)
    values, v1_id = _corrupt_values(client, topic_name)
    v2 = AvroSerializer(client, page_view_v2(), f"{topic_name}-value")
    values += [v2(view(i, browser="lynx")) for i in range(40, 45)]
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(kafka_broker.bootstrap, _records(topic_name, values, 2))
    bad = {(m.partition, m.offset) for m in produced if _is_bad(m)}

    config = _load_config(kafka_broker.bootstrap, topic_name, registry_url, tmp_path)
    report = run_load(config, spark)
    assert report.status == "published"
    assert report.total_rows == len(produced) - 4 and report.total_errors == 4
    manifest = latest_manifest(config.table_uri)
    assert manifest is not None
    assert manifest.schema_ids == {topic_name: tuple(sorted((v1_id, v2.schema_id)))}
    assert sum(c.rows for c in manifest.error_counts) == 4
    assert manifest.total_rows == len(produced) - 4

    run_dir = tmp_path / "events" / "load=1"
    data = duckdb.sql(
        'SELECT partition, "offset", event_id, browser, duration_ms FROM read_parquet('
        f"'{run_dir}/topic=*/date=*/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert {(p, o) for p, o, *_ in data} == {(m.partition, m.offset) for m in produced} - bad
    assert {b for *_, b, _ in data} == {"unknown", "lynx"}
    errors = pq.read_table(run_dir / "_errors").to_pylist()
    assert {(e["partition"], e["offset"]) for e in errors} == bad
    saved = json.loads((tmp_path / "_reports" / f"{report.run_id}.json").read_text())
    assert saved["total_errors"] == 4 and saved["errors_path"].endswith("load=1/_errors")

    again = run_load(config, spark)
    assert again.status == "no-new-data"
    assert len(published_runs(config.table_uri)) == 1

    strict = _load_config(
        kafka_broker.bootstrap, topic_name, registry_url, tmp_path / "strict",
        onDecodeError="fail",
    )  # fmt: skip
    with pytest.raises(LoadError, match=rf"{topic_name}-[01] offset \d+: cannot decode"):
        run_load(strict, spark)
    assert published_runs(strict.table_uri) == []
