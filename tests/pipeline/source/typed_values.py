"""Records for the JSON Schema and Protobuf typed-value tests, written by confluent-kafka's own
serializers through Sluice's registry, and the undecodable values beside them.

``ORDER_JSON_SCHEMA`` and ``ORDER_PROTO`` describe the same order: nested objects/messages
(a line, by ``$ref`` / nested message), repeated ones, a map, a timestamp, an optional note;
``json_values`` / ``protobuf_values`` serialize ``n`` orders (``order(i)``) and return the
framed values with the rows they must come back as, and ``bad_*_values`` the values that must
land in the error table, each with the error class expected.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroSerializer, encode_header

UTC = dt.UTC
BASE_TIME = dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC)

ORDER_JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "definitions": {
        "Line": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["sku", "quantity"],
        }
    },
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "placed_at": {"type": "string", "format": "date-time"},
        "first_line": {"$ref": "#/definitions/Line"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "note": {"type": ["string", "null"]},
        "extra": {},
    },
    "required": ["id", "item", "placed_at"],
}

ORDER_PROTO = """syntax = "proto3";
package sluice.typed;

import "google/protobuf/timestamp.proto";

message Order {
  enum Status {
    NEW = 0;
    SHIPPED = 1;
  }
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
  int64 id = 1;
  string item = 2;
  double price = 3;
  repeated string tags = 4;
  google.protobuf.Timestamp placed_at = 5;
  map<string, int32> counts = 6;
  Line first_line = 7;
  repeated Line lines = 8;
  Status status = 9;
  uint64 big = 10;
  optional string note = 11;
}
"""


def order(i: int) -> dict[str, Any]:
    """Order ``i``: every third without a first line or note, tags and lines of varying size."""
    return {
        "id": i,
        "item": f"item-{i}",
        "price": i * 1.25,
        "tags": [f"t{j}" for j in range(i % 3)],
        "placed_at": BASE_TIME + dt.timedelta(seconds=i, microseconds=i % 1000),
        "counts": {f"k{j}": j + i for j in range(i % 2 + 1)},
        "first_line": None if i % 3 == 0 else {"sku": f"s{i}", "quantity": i % 5},
        "lines": [{"sku": f"l{j}", "quantity": j} for j in range(i % 4)],
        "note": None if i % 3 else f"note {i}",
    }


# -- JSON Schema ------------------------------------------------------------------------------


def json_document(o: dict[str, Any]) -> dict[str, Any]:
    """What a producer hands ``JSONSerializer`` for order ``o``."""
    doc = {k: v for k, v in o.items() if v is not None}
    doc["placed_at"] = o["placed_at"].isoformat()
    doc["extra"] = {"n": o["id"], "ok": True}
    return doc


def json_values(registry_url: str, topic: str, n: int) -> list[tuple[bytes, dict[str, Any]]]:
    """``n`` orders through confluent-kafka's ``JSONSerializer``: (framed value, expected row)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    context = SerializationContext(topic, MessageField.VALUE)
    out = []
    with SchemaRegistryClient({"url": registry_url}) as sr:
        serializer = JSONSerializer(json.dumps(ORDER_JSON_SCHEMA), sr)
        for i in range(n):
            o = order(i)
            row = {**o, "extra": json.dumps({"n": i, "ok": True}, separators=(",", ":"))}
            out.append((serializer(json_document(o), context), row))
    return out


def bad_json_values(registry_url: str, topic: str, good: bytes) -> list[tuple[bytes | None, str]]:
    """Values that are not decodable JSON Schema values of ``topic``, with the error expected:
    a tombstone, a wrong magic byte, an unknown id, a body that is not JSON, a document its
    writer schema refuses, one that passes its writer schema but does not fit the reader's
    columns, and an Avro value."""
    client = RegistryClient(registry_url)
    writer_id = int.from_bytes(good[1:5], "big")
    loose = {"type": "object", "properties": {"id": {"type": "string"}}}
    loose_id = client.register(f"{topic}-loose-value", json.dumps(loose), schema_type="JSON")
    avro = AvroSerializer(
        client,
        {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
        f"{topic}-avro-value",
    )
    return [
        (None, "NullValueError"),
        (b"\x01" + good[1:], "WrongMagicByteError"),
        (encode_header(987_654) + good[5:], "UnknownSchemaIdError"),
        (encode_header(writer_id) + b"{not json", "UndecodableJsonError"),
        (encode_header(writer_id) + b'{"id": "seven", "item": "x"}', "InvalidJsonValueError"),
        (encode_header(loose_id) + b'{"id": "seven"}', "JsonValueMismatchError"),
        (avro({"x": 1}), "WrongSchemaTypeError"),
    ]


# -- Protobuf ---------------------------------------------------------------------------------


def order_class(tmp_path: Path) -> Any:
    """The ``Order`` message class, compiled from ``ORDER_PROTO`` by protoc at run time (as a
    user's build would)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    from grpc_tools import protoc

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
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("sluice.typed.Order"))


def protobuf_message(cls: Any, o: dict[str, Any]) -> Any:
    message = cls(id=o["id"], item=o["item"], price=o["price"], tags=o["tags"])
    message.placed_at.FromDatetime(o["placed_at"])
    for k, v in o["counts"].items():
        message.counts[k] = v
    if o["first_line"] is not None:
        message.first_line.sku = o["first_line"]["sku"]
        message.first_line.quantity = o["first_line"]["quantity"]
    for line in o["lines"]:
        message.lines.add(sku=line["sku"], quantity=line["quantity"])
    message.status = o["id"] % 2
    message.big = 2**64 - 1 - o["id"]
    if o["note"] is not None:
        message.note = o["note"]
    return message


def protobuf_values(
    registry_url: str, topic: str, n: int, cls: Any
) -> list[tuple[bytes, dict[str, Any]]]:
    """``n`` orders through confluent-kafka's ``ProtobufSerializer``: (framed value, row)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    context = SerializationContext(topic, MessageField.VALUE)
    out = []
    with SchemaRegistryClient({"url": registry_url}) as sr:
        serializer = ProtobufSerializer(cls, sr, {"use.deprecated.format": False})
        for i in range(n):
            o = order(i)
            row = {
                **o,
                "placed_at": o["placed_at"].replace(microsecond=o["placed_at"].microsecond),
                "first_line": o["first_line"],
                "status": "SHIPPED" if i % 2 else "NEW",
                "big": decimal.Decimal(2**64 - 1 - i),
            }
            out.append((serializer(protobuf_message(cls, o), context), row))
    return out


def bad_protobuf_values(good: bytes) -> list[tuple[bytes | None, str]]:
    """Values that are not decodable Protobuf values of the reader's message, with the error:
    a tombstone, a wrong magic byte, an unknown id, message indexes naming no message, naming
    another message (the nested ``Line``), cut short, and a body that does not parse."""
    header = good[:5]
    return [
        (None, "NullValueError"),
        (b"\x01" + good[1:], "WrongMagicByteError"),
        (encode_header(987_654) + good[5:], "UnknownSchemaIdError"),
        (header + bytes([2, 10]) + good[6:], "MessageIndexError"),  # [5]
        (header + bytes([4, 0, 0]) + good[6:], "WrongMessageTypeError"),  # [0, 0]: Line
        (header + bytes([4, 0]), "MessageIndexError"),  # two indexes announced, one given
        (header + b"\x00" + b"\x0a\xff\xff\xff\xff\x0f", "UndecodableProtobufError"),
    ]
