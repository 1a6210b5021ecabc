"""confluent-kafka's JSON Schema and Protobuf serde through Sluice's registry and broker.

The real ``JSONSerializer``/``ProtobufSerializer`` register their schemas with the session
registry (``schemaType`` JSON / PROTOBUF — for Protobuf the base64 ``FileDescriptorProto`` the
client builds, importing a well-known type), produce 1,000 records to a Sluice broker, and the
real deserializers read every one back, fetching the writer schema by id. The Protobuf message
class is compiled at run time from ``.proto`` text by protoc (``grpc_tools``), as a user's
build would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from grpc_tools import protoc

from tests.pipeline.broker_fixture import create_topic, kafka_broker, topic_name  # noqa: F401

RECORDS = 1000

ORDER_JSON_SCHEMA = """{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Order",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "item": {"type": "string", "maxLength": 40},
    "price": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["id", "item"]
}"""

ORDER_PROTO = """syntax = "proto3";
package sluice.e2e;

import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string item = 2;
  double price = 3;
  repeated string tags = 4;
  google.protobuf.Timestamp placed_at = 5;
  map<string, int32> counts = 6;
}
"""


@pytest.fixture
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


def _round_trip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to ``topic`` and read them back in order."""
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(read) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            read.append(value)
    finally:
        consumer.close()
    assert len(read) == len(values)
    return read


def order(i: int) -> dict[str, Any]:
    return {"id": i, "item": f"item-{i}", "price": i * 1.25, "tags": [f"t{i % 7}"] * (i % 3)}


def test_json_schema_serde_round_trip(
    kafka_broker: Any,  # noqa: F811
    topic_name: str,  # noqa: F811
    sr: SchemaRegistryClient,
) -> None:
    serializer = JSONSerializer(ORDER_JSON_SCHEMA, sr)
    context = SerializationContext(topic_name, MessageField.VALUE)
    sent = [order(i) for i in range(RECORDS)]
    read = _round_trip(kafka_broker.bootstrap, topic_name, [serializer(o, context) for o in sent])
    registered = sr.get_latest_version(f"{topic_name}-value")
    assert registered.schema.schema_type == "JSON"
    assert {int.from_bytes(r[1:5], "big") for r in read} == {registered.schema_id}
    deserializer = JSONDeserializer(None, schema_registry_client=sr)  # the writer schema by id
    assert [deserializer(r, context) for r in read] == sent


def _order_class(tmp_path: Path) -> Any:
    """The ``Order`` message class, compiled from ``ORDER_PROTO`` by protoc at run time."""
    (tmp_path / "order.proto").write_text(ORDER_PROTO)
    out = tmp_path / "order.desc"
    include = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{tmp_path}", f"-I{include}", f"--descriptor_set_out={out}"]
    assert protoc.main([*args, "order.proto"]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("sluice.e2e.Order"))


def test_protobuf_serde_round_trip(
    kafka_broker: Any,  # noqa: F811
    topic_name: str,  # noqa: F811
    sr: SchemaRegistryClient,
    tmp_path: Path,
) -> None:
    order_class = _order_class(tmp_path)
    serializer = ProtobufSerializer(order_class, sr)
    context = SerializationContext(topic_name, MessageField.VALUE)
    sent = []
    for i in range(RECORDS):
        message = order_class(id=i, item=f"item-{i}", price=i * 1.25, tags=[f"t{i % 7}"] * (i % 3))
        message.placed_at.FromSeconds(1_700_000_000 + i)
        message.counts[f"k{i % 5}"] = i
        sent.append(message)
    read = _round_trip(kafka_broker.bootstrap, topic_name, [serializer(m, context) for m in sent])
    registered = sr.get_latest_version(f"{topic_name}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert {int.from_bytes(r[1:5], "big") for r in read} == {registered.schema_id}
    deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False}, sr)
    assert [deserializer(r, context) for r in read] == sent
