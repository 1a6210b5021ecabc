"""The sink's ``valueFormat=json-schema`` and ``valueFormat=protobuf``: struct values written by
``df.write.format("sluice")`` are read back by confluent-kafka's own ``JSONDeserializer`` /
``ProtobufDeserializer`` as the orders they were made from, framed with the id the schema file
was registered under (Protobuf's message indexes included); a value its writer schema refuses
fails the write.
"""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import StructType

from sluice.pipeline.source.data_source import register
from sluice.pipeline.source.json_schema_columns import json_schema_type
from sluice.pipeline.source.protobuf_columns import message_type
from sluice.schemas.client import RegistryClient
from sluice.testing.broker import create_topic
from tests.pipeline.source.typed_values import (
    ORDER_JSON_SCHEMA,
    ORDER_PROTO,
    json_document,
    order,
    order_class,
    protobuf_message,
)
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

ORDERS = 25


def _write(df: Any, bootstrap: str, topic: str, registry: str, **options: str) -> None:
    df.write.format("sluice").options(
        **{"kafka.bootstrap.servers": bootstrap, "topic": topic, "schema.registry.url": registry},
        **options,
    ).mode("append").save()


def test_json_schema_values_read_back_by_confluents_deserializer(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    schema_file = tmp_path / "order.json"
    schema_file.write_text(json.dumps(ORDER_JSON_SCHEMA))
    # "extra" ({}: any value) is a JSON text column when read; a string column is written as a
    # JSON string, so it is left out here.
    value_type = StructType(
        [f for f in json_schema_type(ORDER_JSON_SCHEMA).fields if f.name != "extra"]
    )
    rows = [(order(i),) for i in range(ORDERS)]
    df = spark.createDataFrame(rows, f"value {value_type.simpleString()}")
    _write(df.coalesce(1), kafka_broker.bootstrap, topic_name, registry_url,
           valueFormat="json-schema", valueSchema=str(schema_file))  # fmt: skip

    registered = RegistryClient(registry_url).get_version(f"{topic_name}-value")
    assert registered.get("schemaType") == "JSON"
    got = read_all(kafka_broker.bootstrap, topic_name)
    assert {int.from_bytes(r.value[1:5], "big") for r in got} == {registered["id"]}
    context = SerializationContext(topic_name, MessageField.VALUE)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        deserializer = JSONDeserializer(None, schema_registry_client=sr)
        decoded = [deserializer(r.value, context) for r in got]
    expected = []
    for i in range(ORDERS):
        doc = json_document(order(i))
        del doc["extra"]
        expected.append(doc)
    assert decoded == expected

    # A struct without a required property is refused on the driver; a row whose required
    # property is null fails its writer schema's validation in the task.
    short = spark.createDataFrame(
        [({"id": 1, "item": "x"},)], "value struct<id:bigint,item:string>"
    )
    with pytest.raises(Exception, match="ValueStructMismatchError") as caught:
        _write(short, kafka_broker.bootstrap, topic_name, registry_url, valueFormat="json-schema")
    assert "found placed_at missing" in str(caught.value)
    null = spark.createDataFrame(
        [({"id": 1, "item": "x", "placed_at": None},)],
        "value struct<id:bigint,item:string,placed_at:timestamp>",
    )
    with pytest.raises(Exception, match="UnencodableRecordError") as caught:
        _write(null, kafka_broker.bootstrap, topic_name, registry_url, valueFormat="json-schema")
    assert "'placed_at' is a required property" in str(caught.value)
    assert len(read_all(kafka_broker.bootstrap, topic_name)) == ORDERS


def test_protobuf_values_read_back_by_confluents_deserializer(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    register(spark)
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    cls = order_class(tmp_path)  # writes ORDER_PROTO to order.proto, which the sink registers
    proto = tmp_path / "order.proto"
    assert proto.read_text() == ORDER_PROTO
    value_type, _ = message_type(cls.DESCRIPTOR)
    rows = []
    for i in range(ORDERS):
        o = order(i)
        o["status"] = "SHIPPED" if i % 2 else "NEW"
        o["big"] = decimal.Decimal(2**64 - 1 - i)
        rows.append((o,))
    df = spark.createDataFrame(rows, f"value {value_type.simpleString()}")
    _write(df.coalesce(1), kafka_broker.bootstrap, topic_name, registry_url,
           valueFormat="protobuf", valueSchema=str(proto),
           valueSchemaMessage="sluice.typed.Order")  # fmt: skip

    registered = RegistryClient(registry_url).get_version(f"{topic_name}-value")
    assert registered.get("schemaType") == "PROTOBUF"
    got = read_all(kafka_broker.bootstrap, topic_name)
    header = registered["id"].to_bytes(4, "big")
    assert all(r.value[:6] == b"\x00" + header + b"\x00" for r in got)  # message indexes [0]
    context = SerializationContext(topic_name, MessageField.VALUE)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False}, sr)
        decoded = [deserializer(r.value, context) for r in got]
    assert decoded == [protobuf_message(cls, order(i)) for i in range(ORDERS)]


def test_fill_message_takes_what_the_source_gives() -> None:
    """The sink's inverse of the source's Protobuf mapping, without servers: an enum by name, a
    Timestamp from a datetime, a wrapper from its scalar, a uint64 from a decimal, a map of
    messages, a Struct from JSON text; a null leaves the field unset, a name the message lacks
    or an enum name it does not know is refused."""
    import datetime as dt

    from google.protobuf import (
        descriptor_pool,
        message_factory,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    from sluice.pipeline.sink.protobuf_values import fill_message
    from sluice.schemas.protobuf_schema import parse_protobuf_schema

    text = """syntax = "proto3";
    import "google/protobuf/timestamp.proto";
    import "google/protobuf/wrappers.proto";
    import "google/protobuf/struct.proto";
    message Part { string sku = 1; }
    message M {
      enum Kind { A = 0; B = 1; }
      Kind kind = 1;
      google.protobuf.Timestamp at = 2;
      google.protobuf.Int64Value maybe = 3;
      uint64 big = 4;
      map<string, Part> parts = 5;
      google.protobuf.Struct doc = 6;
      repeated Kind kinds = 7;
      string note = 8;
    }"""
    pool = descriptor_pool.DescriptorPool()
    for module in (timestamp_pb2, wrappers_pb2, struct_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    pool.Add(parse_protobuf_schema(text).file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("M"))
    at = dt.datetime(2024, 3, 1, 12, 0, 0, 5, tzinfo=dt.UTC)
    message = fill_message(cls(), {
        "kind": "B", "at": at, "maybe": 7, "big": decimal.Decimal(2**64 - 1),
        "parts": {"x": {"sku": "s1"}}, "doc": '{"a": [1, "two"]}', "kinds": ["A", "B"],
        "note": None,
    })  # fmt: skip
    assert (message.kind, message.maybe.value, message.big) == (1, 7, 2**64 - 1)
    assert message.at.ToDatetime(tzinfo=dt.UTC) == at
    assert message.parts["x"].sku == "s1" and list(message.kinds) == [0, 1]
    assert message.doc["a"][1] == "two" and message.note == ""  # null: left at its default
    with pytest.raises(ValueError, match="has no field 'nope'"):
        fill_message(cls(), {"nope": 1})
    with pytest.raises(ValueError, match="expected a value of the enum, found 'C'"):
        fill_message(cls(), {"kind": "C"})
