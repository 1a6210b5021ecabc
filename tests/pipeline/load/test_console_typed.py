"""``sluice produce|consume --value-format json-schema|protobuf`` (``sluice.cli.value_formats``)
against the session's broker and registry: JSON lines in, the same documents out; the values
are what confluent-kafka's own deserializers read, and a line the schema refuses is exit 1
naming its number."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.broker import create_topic
from tests.pipeline.source.typed_values import ORDER_JSON_SCHEMA, ORDER_PROTO, order_class
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

LINES = 50


def _sluice(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args], input=stdin, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def _round_trip(
    bootstrap: str, registry: str, topic: str, fmt: str, schema: Path, lines: list[str]
) -> list[Any]:
    create_topic(bootstrap, topic, 1)
    produced = _sluice(
        "produce", "--bootstrap-server", bootstrap, "--topic", topic, "--value-format", fmt,
        "--value-schema", str(schema), "--registry", registry, stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = _sluice(
        "consume", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", str(len(lines)), "--timeout-ms", "10000", "--value-format", fmt,
        "--registry", registry,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    return [json.loads(line) for line in consumed.stdout.splitlines()]


def _json_order(i: int) -> dict[str, Any]:
    return {
        "id": i, "item": f"item-{i}", "placed_at": f"2024-03-01T12:00:{i % 60:02d}+00:00",
        "lines": [{"sku": f"l{j}", "quantity": j} for j in range(i % 3)],
        "counts": {"a": i}, **({"note": f"n{i}"} if i % 2 else {}),
    }  # fmt: skip


def test_json_schema_lines_round_trip(
    kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = tmp_path / "order.json"
    schema.write_text(json.dumps(ORDER_JSON_SCHEMA))
    orders = [_json_order(i) for i in range(LINES)]
    out = _round_trip(kafka_broker.bootstrap, registry_url, topic_name, "json-schema", schema,
                      [json.dumps(o) for o in orders])  # fmt: skip
    assert out == orders
    context = SerializationContext(topic_name, MessageField.VALUE)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        deserializer = JSONDeserializer(None, schema_registry_client=sr)
        read = [deserializer(r.value, context) for r in read_all(kafka_broker.bootstrap,
                                                                  topic_name)]  # fmt: skip
    assert read == orders

    refused = _sluice(
        "produce", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--value-format", "json-schema", "--value-schema", str(schema), "--registry",
        registry_url, stdin=json.dumps(orders[0]) + "\n" + '{"id": "seven", "item": "x"}\n',
    )  # fmt: skip
    assert refused.returncode == 1
    assert "line 2: not valid against schema id" in refused.stderr


def test_protobuf_lines_round_trip(
    kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import json_format

    cls = order_class(tmp_path)  # writes order.proto
    orders = [
        {"id": str(i), "item": f"item-{i}", "tags": [f"t{i}"] * (i % 3 + 1),
         "placed_at": f"2024-03-01T12:00:{i % 60:02d}Z", "counts": {"a": i + 1},
         "first_line": {"sku": f"s{i}", "quantity": i % 4 + 1}, "status": "SHIPPED",
         "big": str(2**64 - 1 - i)}
        for i in range(1, LINES + 1)
    ]  # fmt: skip
    out = _round_trip(kafka_broker.bootstrap, registry_url, topic_name, "protobuf",
                      tmp_path / "order.proto", [json.dumps(o) for o in orders])  # fmt: skip
    assert out == orders  # Protobuf's JSON mapping: int64 as strings, enums by name
    context = SerializationContext(topic_name, MessageField.VALUE)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False}, sr)
        read = [deserializer(r.value, context) for r in read_all(kafka_broker.bootstrap,
                                                                  topic_name)]  # fmt: skip
    assert read == [json_format.ParseDict(o, cls()) for o in orders]
    assert (tmp_path / "order.proto").read_text() == ORDER_PROTO

    refused = _sluice(
        "produce", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--value-format", "protobuf", "--value-schema", str(tmp_path / "order.proto"),
        "--registry", registry_url, stdin='{"nope": 1}\n',
    )  # fmt: skip
    assert refused.returncode == 1 and "line 1:" in refused.stderr
    usage = _sluice(
        "produce", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--value-format", "json-schema", "--value-schema", "x.json", "--registry",
        registry_url, "--value-message", "a.B",
    )  # fmt: skip
    assert usage.returncode == 2
    assert "--value-message: expected only with --value-format protobuf" in usage.stderr
