"""Tests for ``valueFormat=json-schema`` and ``valueFormat=protobuf`` in the ``sluice`` source:
the type mappings (no servers), Protobuf's message-index framing, and records written by
confluent-kafka's own ``JSONSerializer`` / ``ProtobufSerializer`` through Sluice's registry and
broker read back as typed columns, with every undecodable value in the error table.

The model is what was produced: each good record comes back once with the values it was
serialized from; each bad one is in the error table with its offset and the expected error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice.pipeline.sink.protobuf_descriptors import (
    MessageIndexError,
    encode_message_indexes,
    message_indexes,
)
from sluice.pipeline.source.data_source import register
from sluice.pipeline.source.json_schema_columns import json_schema_type
from sluice.pipeline.source.protobuf_columns import UnsupportedProtobufSchemaError, message_type
from sluice.schemas.protobuf_schema import parse_protobuf_schema
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import produce
from tests.pipeline.source.typed_values import (
    ORDER_JSON_SCHEMA,
    ORDER_PROTO,
    bad_json_values,
    bad_protobuf_values,
    json_values,
    order_class,
    protobuf_values,
)

pytestmark = pytest.mark.broker

LINE = StructType(
    [StructField("sku", StringType(), False), StructField("quantity", LongType(), False)]
)


# -- type mappings (no servers) -----------------------------------------------------------------


def test_json_schema_types_map_to_spark_types() -> None:
    struct = json_schema_type(ORDER_JSON_SCHEMA)
    assert isinstance(struct, StructType)
    assert [(f.name, f.dataType, f.nullable) for f in struct.fields] == [
        ("id", LongType(), False),
        ("item", StringType(), False),
        ("price", DoubleType(), True),
        ("tags", ArrayType(StringType(), False), True),
        ("placed_at", TimestampType(), False),
        ("first_line", LINE, True),
        ("lines", ArrayType(LINE, False), True),
        ("counts", MapType(StringType(), LongType(), False), True),
        ("note", StringType(), True),
        ("extra", StringType(), True),  # {}: any value, kept as its JSON text
    ]
    others = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "flag": {"type": "boolean"},
            "wide": {"type": ["integer", "number"]},
            "maybe": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},  # JSON text
            "both": {"allOf": [{"type": "object"}, {"required": ["a"]}]},  # JSON text
            "tuple": {"type": "array", "items": [{"type": "string"}]},  # JSON text
            "node": {"$ref": "#/definitions/Node"},
            "ref": {"$ref": "other.json#/definitions/Code"},
        },
        "definitions": {
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}
        },
    }
    referenced = {"definitions": {"Code": {"type": "string"}}}
    types = {f.name: f for f in json_schema_type(others, {"other.json": referenced}).fields}
    assert types["day"].dataType == DateType()
    assert types["flag"].dataType == BooleanType()
    assert types["wide"].dataType == DoubleType()
    assert types["maybe"].dataType == LongType() and types["maybe"].nullable
    for fallback in ("either", "both", "tuple"):
        assert types[fallback].dataType == StringType()
    # A recursive $ref becomes the JSON text where it recurs: the first level is typed.
    assert types["node"].dataType == StructType([StructField("next", StringType(), True)])
    assert types["ref"].dataType == StringType()


def _descriptor(text: str, name: str) -> Any:
    from google.protobuf import descriptor_pool, timestamp_pb2, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(parse_protobuf_schema(text).file)
    return pool.FindMessageTypeByName(name)


def test_protobuf_types_map_to_spark_types() -> None:
    struct, _ = message_type(_descriptor(ORDER_PROTO, "sluice.typed.Order"))
    line = StructType(
        [StructField("sku", StringType(), False), StructField("quantity", IntegerType(), False)]
    )
    assert [(f.name, f.dataType, f.nullable) for f in struct.fields] == [
        ("id", LongType(), False),
        ("item", StringType(), False),
        ("price", DoubleType(), False),
        ("tags", ArrayType(StringType(), False), False),
        ("placed_at", TimestampType(), True),
        ("counts", MapType(StringType(), IntegerType(), False), False),
        ("first_line", line, True),
        ("lines", ArrayType(line, False), False),
        ("status", StringType(), False),
        ("big", DecimalType(20, 0), False),
        ("note", StringType(), True),
    ]
    scalars = """syntax = "proto3";
    import "google/protobuf/wrappers.proto";
    message S {
      uint32 a = 1; fixed64 b = 2; sint32 c = 3; bytes d = 4; float e = 5;
      google.protobuf.Int64Value f = 6;
      oneof pick { string g = 7; int32 h = 8; }
    }"""
    types = {f.name: f for f in message_type(_descriptor(scalars, "S"))[0].fields}
    assert types["a"].dataType == LongType()
    assert types["b"].dataType == DecimalType(20, 0)
    assert types["c"].dataType == IntegerType()
    assert types["d"].dataType == BinaryType()
    assert types["f"].dataType == LongType() and types["f"].nullable
    assert types["g"].nullable and types["h"].nullable  # a oneof: one column per member
    recursive = 'syntax = "proto3"; message Node { Node next = 1; }'
    with pytest.raises(UnsupportedProtobufSchemaError, match=r"value\.next: .*non-recursive"):
        message_type(_descriptor(recursive, "Node"))


def test_message_indexes_are_zigzag_varints() -> None:
    assert message_indexes(memoryview(b"\x00rest")) == ([0], memoryview(b"rest"))
    indexes, rest = message_indexes(memoryview(bytes([4, 2, 6]) + b"x"))  # count 2: [1, 3]
    assert indexes == [1, 3] and bytes(rest) == b"x"
    for indexes in ([0], [1, 3], [70, 0, 200]):
        assert message_indexes(memoryview(encode_message_indexes(indexes) + b"x"))[0] == indexes
    assert encode_message_indexes([0]) == b"\x00"
    with pytest.raises(MessageIndexError, match="found the end"):
        message_indexes(memoryview(bytes([4, 2])))
    with pytest.raises(MessageIndexError, match="expected 0 to 64 message indexes"):
        message_indexes(memoryview(bytes([3])))  # count -2


# -- the source ---------------------------------------------------------------------------------


def _read(spark: Any, bootstrap: str, topic: str, registry: str, fmt: str, **opts: str) -> Any:
    register(spark)
    return (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", fmt)
        .option("schema.registry.url", registry)
        .options(**opts)
        .load()
    )


def _assert_rows(spark: Any, df: Any, expected: list[dict[str, Any]]) -> None:
    """The columns of ``df`` that ``expected``'s dicts name hold exactly those rows, ordered by
    offset (a map column can be neither sorted nor hashed); the expected rows take ``df``'s
    types, so a value is compared as Spark holds it."""
    got = df.select(*expected[0])
    want = spark.createDataFrame([tuple(e[c] for c in got.columns) for e in expected], got.schema)
    assert_df_equality(got.orderBy("offset"), want.orderBy("offset"))


def _produce(bootstrap: str, topic: str, values: list[bytes | None]) -> list[Any]:
    create_topic(bootstrap, topic, 1)
    now = int(time.time() * 1000)
    records = [
        {"topic": topic, "partition": 0, "key": f"k{i}".encode(), "value": v, "timestamp": now}
        for i, v in enumerate(values)
    ]
    return produce(bootstrap, records)


def _check_errors(
    spark: Any, errors_dir: Path, topic: str, expected: dict[int, str], values: list[Any]
) -> None:
    rows = spark.read.parquet(str(errors_dir)).collect()
    assert {r["offset"]: r["error"] for r in rows} == expected
    assert all(r["topic"] == topic and r["reason"] for r in rows)
    assert all(r["value"] == values[r["offset"]] for r in rows)


def test_json_serializer_records_read_back_typed(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    good = json_values(registry_url, topic_name, 30)
    bad = bad_json_values(registry_url, topic_name, good[0][0])
    values: list[bytes | None] = [v for v, _ in good[:10]] + [v for v, _ in bad]
    values += [v for v, _ in good[10:]]
    _produce(kafka_broker.bootstrap, topic_name, values)
    offsets = list(range(10)) + list(range(10 + len(bad), len(values)))
    expected = [{"offset": o, **row} for o, (_, row) in zip(offsets, good, strict=True)]

    errors_dir = tmp_path / "errors"
    df = _read(
        spark, kafka_broker.bootstrap, topic_name, registry_url, "json-schema",
        decodeErrorPath=str(errors_dir),
    )  # fmt: skip
    assert df.schema["id"].dataType == LongType() and not df.schema["id"].nullable
    _assert_rows(spark, df, expected)
    _check_errors(
        spark, errors_dir, topic_name, {10 + i: e for i, (_, e) in enumerate(bad)}, values
    )

    nested = _read(
        spark, kafka_broker.bootstrap, topic_name, registry_url, "json-schema",
        valueColumns="struct", onDecodeError="fail",
    )  # fmt: skip
    with pytest.raises(Exception, match=rf"{topic_name}-0 offset 10: cannot decode the JSON"):
        nested.collect()
    in_range = _read(
        spark, kafka_broker.bootstrap, topic_name, registry_url, "json-schema",
        valueColumns="struct", endingOffsets=json.dumps({topic_name: {"0": 10}}),
    )  # fmt: skip
    assert [r["value"]["item"] for r in in_range.orderBy("offset").collect()] == [
        f"item-{i}" for i in range(10)
    ]


def test_protobuf_serializer_records_read_back_typed(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    good = protobuf_values(registry_url, topic_name, 30, order_class(tmp_path))
    bad = bad_protobuf_values(good[0][0])
    values: list[bytes | None] = [v for v, _ in good[:10]] + [v for v, _ in bad]
    values += [v for v, _ in good[10:]]
    _produce(kafka_broker.bootstrap, topic_name, values)
    offsets = list(range(10)) + list(range(10 + len(bad), len(values)))
    expected = [{"offset": o, **row} for o, (_, row) in zip(offsets, good, strict=True)]

    errors_dir = tmp_path / "errors"
    df = _read(
        spark, kafka_broker.bootstrap, topic_name, registry_url, "protobuf",
        decodeErrorPath=str(errors_dir), valueSchemaMessage="sluice.typed.Order",
    )  # fmt: skip
    assert df.schema["big"].dataType == DecimalType(20, 0)
    _assert_rows(spark, df, expected)
    _check_errors(
        spark, errors_dir, topic_name, {10 + i: e for i, (_, e) in enumerate(bad)}, values
    )

    with pytest.raises(Exception, match="valueSchemaMessage: expected a message of schema id"):
        _read(
            spark, kafka_broker.bootstrap, topic_name, registry_url, "protobuf",
            valueSchemaMessage="sluice.typed.Nope", onDecodeError="fail",
        )  # fmt: skip
    with pytest.raises(Exception, match="expected a JSON reader schema, found PROTOBUF"):
        _read(spark, kafka_broker.bootstrap, topic_name, registry_url, "json-schema",
              onDecodeError="fail")  # fmt: skip


MONEY_JSON = {
    "type": "object",
    "properties": {"currency": {"type": "string"}, "units": {"type": "integer"}},
    "required": ["currency", "units"],
}
MONEY_PROTO = """syntax = "proto3";
package acme;
message Money { string currency = 1; int64 units = 2; }
"""
SHOP_PROTO = """syntax = "proto3";
package shop;
import "acme/money.proto";
message Order { int64 id = 1; acme.Money total = 2; repeated acme.Money parts = 3; }
"""


def _shop_order_class(tmp_path: Path) -> Any:
    """``shop.Order``, compiled by protoc from ``SHOP_PROTO`` importing ``MONEY_PROTO``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "money.proto").write_text(MONEY_PROTO)
    (tmp_path / "shop.proto").write_text(SHOP_PROTO)
    out = tmp_path / "shop.desc"
    args = ["protoc", f"-I{tmp_path}", "--include_imports", f"--descriptor_set_out={out}"]
    assert protoc.main([*args, "shop.proto"]) == 0
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_references_to_other_subjects_type_and_check_the_values(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    """A JSON Schema whose ``$ref`` names another subject's schema, and a ``.proto`` importing
    another subject's file: the referenced types are typed columns, and the JSON values are
    validated against the referenced schema too."""
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.serde import encode_header

    client = RegistryClient(registry_url)
    json_topic, proto_topic = f"{topic_name}-json", f"{topic_name}-proto"
    client.register(f"{json_topic}-money", json.dumps(MONEY_JSON), schema_type="JSON")
    order = {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "integer"}, "total": {"$ref": "money.json"}},
    }
    ref = [{"name": "money.json", "subject": f"{json_topic}-money", "version": 1}]
    json_id = client.register(
        f"{json_topic}-value", json.dumps(order), schema_type="JSON", references=ref
    )
    docs = [{"id": 1, "total": {"currency": "EUR", "units": 5}}, {"id": 2},
            {"id": 3, "total": {"currency": "EUR", "units": "five"}}]  # fmt: skip
    _produce(kafka_broker.bootstrap, json_topic,
             [encode_header(json_id) + json.dumps(d).encode() for d in docs])  # fmt: skip
    errors_dir = tmp_path / "json-errors"
    df = _read(spark, kafka_broker.bootstrap, json_topic, registry_url, "json-schema",
               decodeErrorPath=str(errors_dir))  # fmt: skip
    money = StructType(
        [StructField("currency", StringType(), False), StructField("units", LongType(), False)]
    )
    assert df.schema["total"].dataType == money
    _assert_rows(spark, df, [{"offset": 0, "id": 1, "total": {"currency": "EUR", "units": 5}},
                             {"offset": 1, "id": 2, "total": None}])  # fmt: skip
    [error] = spark.read.parquet(str(errors_dir)).collect()
    assert (error["offset"], error["error"]) == (2, "InvalidJsonValueError")
    assert "'five' is not of type 'integer'" in error["reason"]

    client.register(f"{proto_topic}-money", MONEY_PROTO, schema_type="PROTOBUF")
    ref = [{"name": "acme/money.proto", "subject": f"{proto_topic}-money", "version": 1}]
    proto_id = client.register(
        f"{proto_topic}-value", SHOP_PROTO, schema_type="PROTOBUF", references=ref
    )
    cls = _shop_order_class(tmp_path)
    messages = [cls(id=1), cls(id=2)]
    messages[1].total.currency, messages[1].total.units = "USD", 7
    messages[1].parts.add(currency="USD", units=3)
    framed = [encode_header(proto_id) + b"\x00" + m.SerializeToString() for m in messages]
    _produce(kafka_broker.bootstrap, proto_topic, framed)
    df = _read(spark, kafka_broker.bootstrap, proto_topic, registry_url, "protobuf",
               onDecodeError="fail")  # fmt: skip
    money = StructType(
        [StructField("currency", StringType(), False), StructField("units", LongType(), False)]
    )
    assert df.schema["total"].dataType == money
    _assert_rows(spark, df, [
        {"offset": 0, "id": 1, "total": None, "parts": []},
        {"offset": 1, "id": 2, "total": {"currency": "USD", "units": 7},
         "parts": [{"currency": "USD", "units": 3}]},
    ])  # fmt: skip
