"""The wire format against confluent-kafka's serializers, both directions, byte for byte."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import (
    TruncatedPayloadError,
    UndecodableAvroError,
    UnencodableRecordError,
    UnknownSchemaIdError,
    WrongMagicByteError,
)
from sluice.schemas.serde import AvroDeserializer, AvroSerializer, decode_header, encode_header

PAGE_VIEW = schema_path("page_view").read_text()
AUDIT = schema_path("audit_count").read_text()


def page_view(i: int, referrer: str | None = None) -> dict[str, Any]:
    return {
        "event_id": f"ev-{i}",
        "timestamp": datetime(2011, 6, 12, 8, 30, i % 60, 123000, tzinfo=UTC),
        "server": "fe-1",
        "user_id": f"u{i}",
        "page": "/home",
        "referrer": referrer,
        "duration_ms": 17 + i,
    }


@pytest.fixture
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


def test_header_layout() -> None:
    assert encode_header(0x01020304) == b"\x00\x01\x02\x03\x04"
    schema_id, body = decode_header(b"\x00\x00\x00\x00\x07abc")
    assert (schema_id, bytes(body)) == (7, b"abc")


def test_confluent_to_sluice_and_back_byte_identical(
    sr: SchemaRegistryClient, client: RegistryClient
) -> None:
    topic = "page_views"
    ctx = SerializationContext(topic, MessageField.VALUE)
    theirs = ConfluentSerializer(sr, PAGE_VIEW)
    ours = AvroSerializer(client, PAGE_VIEW, f"{topic}-value")
    for record in (page_view(1), page_view(2, referrer="https://example.org/")):
        confluent_bytes = theirs(record, ctx)
        sluice_bytes = ours.serialize(record)
        assert sluice_bytes == confluent_bytes
        assert AvroDeserializer(client).deserialize(confluent_bytes) == record
        assert ConfluentDeserializer(sr)(sluice_bytes, ctx) == record
    assert ours.schema_id == client.get_version(f"{topic}-value")["id"]


def test_reader_schema_resolution(client: RegistryClient) -> None:
    ours = AvroSerializer(client, PAGE_VIEW, "resolution-value")
    reader = json.loads(PAGE_VIEW)
    reader["fields"] = [f for f in reader["fields"] if f["name"] in ("event_id", "page")]
    reader["fields"].append({"name": "browser", "type": "string", "default": "unknown"})
    value = AvroDeserializer(client, reader_schema=reader).deserialize(ours(page_view(3)))
    assert value == {"event_id": "ev-3", "page": "/home", "browser": "unknown"}


def test_one_registry_request_per_schema_id(registry_url: str) -> None:
    with RegistryClient(registry_url) as producer_client, RegistryClient(registry_url) as c:
        views = AvroSerializer(producer_client, PAGE_VIEW, "count-views-value")
        counts = AvroSerializer(producer_client, AUDIT, "count-audit-value")
        messages = [views(page_view(i)) for i in range(20)]
        messages += [
            counts(
                {
                    "producer": "fe-1",
                    "topic": "page_views",
                    "window_start": 0,
                    "window_end": 600_000,
                    "count": i,
                }
            )
            for i in range(20)
        ]
        assert producer_client.requests_sent == 2  # one registration per serializer

        deserializer = AvroDeserializer(c)
        threads = [
            threading.Thread(target=lambda: [deserializer(m) for m in messages]) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert c.requests_sent == 2  # one lookup per distinct id, under concurrency too


def test_lookup_only_serializer(client: RegistryClient) -> None:
    AvroSerializer(client, AUDIT, "lookup-only-value").schema_id  # noqa: B018 - registers
    lookup = AvroSerializer(client, AUDIT, "lookup-only-value", auto_register=False)
    assert lookup.schema_id == client.get_version("lookup-only-value")["id"]


def test_wrong_magic_byte(client: RegistryClient) -> None:
    with pytest.raises(WrongMagicByteError, match="expected magic byte 0.*found 1"):
        AvroDeserializer(client).deserialize(b"\x01\x00\x00\x00\x01\x02")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x01"])
def test_truncated_header(client: RegistryClient, data: bytes) -> None:
    with pytest.raises(TruncatedPayloadError, match=f"at least 5 bytes.*found {len(data)}"):
        AvroDeserializer(client).deserialize(data)


def test_truncated_body(client: RegistryClient) -> None:
    data = AvroSerializer(client, PAGE_VIEW, "truncated-value")(page_view(4))
    with pytest.raises(TruncatedPayloadError, match="ended early"):
        AvroDeserializer(client).deserialize(data[:-3])


def test_unknown_schema_id(client: RegistryClient) -> None:
    with pytest.raises(UnknownSchemaIdError, match="schema id 99999 "):
        AvroDeserializer(client).deserialize(encode_header(99999) + b"\x00")


def test_undecodable_body(client: RegistryClient) -> None:
    union = json.dumps(
        {"type": "record", "name": "U", "fields": [{"name": "v", "type": ["null", "string"]}]}
    )
    ser = AvroSerializer(client, union, "undecodable-value")
    good = ser({"v": "x"})
    with pytest.raises(UndecodableAvroError, match="does not decode"):
        AvroDeserializer(client).deserialize(encode_header(ser.schema_id) + b"\x0a")
    with pytest.raises(UndecodableAvroError, match="found 1 bytes more"):
        AvroDeserializer(client).deserialize(good + b"\x00")


def test_unencodable_record(client: RegistryClient) -> None:
    ser = AvroSerializer(client, AUDIT, "unencodable-value")
    with pytest.raises(UnencodableRecordError, match="AuditCount"):
        ser({"producer": "fe-1"})
