"""JSON Schema and Protobuf through the registry's REST API, against the session registry.

Register, look up by schema (another text of the same schema finds the same id), read by id
with ``schemaType``, and compatibility: an incompatible change refused with 409 and
Confluent's ``Difference`` wording, a compatible one accepted.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.registry import Registry
from sluice.schemas.store import SchemaStore
from sluice.schemas.zk_store import ZooKeeperSchemaStore

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def http(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": CONTENT_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


OPEN_V1 = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
CLOSED_V1 = {**OPEN_V1, "additionalProperties": False}


def register(url: str, subject: str, schema: str, schema_type: str) -> tuple[int, Any]:
    return http(
        url, "POST", f"/subjects/{subject}/versions", {"schema": schema, "schemaType": schema_type}
    )


def test_json_register_lookup_and_read(registry_url: str, subject: str) -> None:
    status, body = register(registry_url, subject, json.dumps(OPEN_V1, indent=2), "JSON")
    assert status == 200
    schema_id = body["id"]
    # The same schema with other whitespace and key order is the same schema.
    reordered = json.dumps(dict(reversed(list(OPEN_V1.items()))))
    status, body = http(
        registry_url, "POST", f"/subjects/{subject}", {"schema": reordered, "schemaType": "JSON"}
    )
    assert status == 200
    assert (body["id"], body["version"], body["schemaType"]) == (schema_id, 1, "JSON")
    assert register(registry_url, subject, reordered, "JSON") == (200, {"id": schema_id})
    status, body = http(registry_url, "GET", f"/schemas/ids/{schema_id}")
    assert (status, body["schemaType"], json.loads(body["schema"])) == (200, "JSON", OPEN_V1)
    # The same text as Avro is another schema: JSON and AVRO texts never share an id.
    status, body = http(
        registry_url, "POST", f"/subjects/{subject}", {"schema": reordered, "schemaType": "AVRO"}
    )
    assert status in (404, 422)


def test_json_incompatible_change_refused_with_confluents_message(
    registry_url: str, subject: str
) -> None:
    assert register(registry_url, subject, json.dumps(OPEN_V1), "JSON")[0] == 200
    # Adding a typed property to an open content model breaks BACKWARD (Confluent's rule: the
    # old writer may have put anything under that name).
    added = {**OPEN_V1, "properties": {**OPEN_V1["properties"], "name": {"type": "string"}}}
    status, body = register(registry_url, subject, json.dumps(added), "JSON")
    assert (status, body["error_code"]) == (409, 409)
    assert 'errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"' in body["message"]
    assert "at path '#/properties/name' which is missing in the old schema" in body["message"]
    status, body = http(
        registry_url,
        "POST",
        f"/compatibility/subjects/{subject}/versions/latest",
        {"schema": json.dumps(added), "schemaType": "JSON"},
    )
    assert (status, body["is_compatible"]) == (200, False)


def test_json_compatible_change_accepted(registry_url: str, subject: str) -> None:
    assert register(registry_url, subject, json.dumps(CLOSED_V1), "JSON")[0] == 200
    # A closed content model may gain an optional property; a string may lose its bound.
    added = {**CLOSED_V1, "properties": {**CLOSED_V1["properties"], "note": {"type": "string"}}}
    status, body = register(registry_url, subject, json.dumps(added), "JSON")
    assert status == 200
    status, versions = http(registry_url, "GET", f"/subjects/{subject}/versions")
    assert versions == [1, 2]
    # ...but may not have a property removed, nor have a new one required.
    required = {**added, "required": ["id", "note"]}
    status, body = register(registry_url, subject, json.dumps(required), "JSON")
    assert status == 409
    assert 'errorType:"REQUIRED_ATTRIBUTE_ADDED"' in body["message"]


PROTO_V1 = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  google.protobuf.Timestamp placed_at = 3;
}
"""


def test_protobuf_register_lookup_and_serialized_format(registry_url: str, subject: str) -> None:
    status, body = register(registry_url, subject, PROTO_V1, "PROTOBUF")
    assert status == 200
    schema_id = body["id"]
    status, body = http(registry_url, "GET", f"/schemas/ids/{schema_id}")
    assert (status, body["schemaType"], body["schema"]) == (200, "PROTOBUF", PROTO_V1)
    # Other whitespace and comments: the same descriptor, the same schema.
    spaced = "// an order\n" + PROTO_V1.replace("\n", "\n\n")
    status, body = http(
        registry_url, "POST", f"/subjects/{subject}", {"schema": spaced, "schemaType": "PROTOBUF"}
    )
    assert (status, body["id"], body["version"]) == (200, schema_id, 1)


def test_protobuf_base64_descriptor_is_the_same_schema(registry_url: str, subject: str) -> None:
    from sluice.schemas.protobuf_schema import parse_protobuf_schema

    status, body = register(registry_url, subject, PROTO_V1, "PROTOBUF")
    serialized = parse_protobuf_schema(PROTO_V1).formatted("serialized")
    assert base64.b64decode(serialized)  # what confluent-kafka's serializer sends
    assert register(registry_url, subject, serialized, "PROTOBUF") == (200, {"id": body["id"]})


def test_protobuf_incompatible_change_refused_with_confluents_message(
    registry_url: str, subject: str
) -> None:
    assert register(registry_url, subject, PROTO_V1, "PROTOBUF")[0] == 200
    changed = PROTO_V1.replace("int64 id = 1;", "string id = 1;")
    status, body = register(registry_url, subject, changed, "PROTOBUF")
    assert (status, body["error_code"]) == (409, 409)
    assert (
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
        "path '#/Order/1' in the new schema does not match its kind in the old schema\"}"
    ) in body["message"]
    assert "{oldSchemaVersion: 1}" in body["message"]
    assert "{compatibility: 'BACKWARD'}" in body["message"]
    message_changed = PROTO_V1.replace("google.protobuf.Timestamp placed_at", "string placed_at")
    status, body = register(registry_url, subject, message_changed, "PROTOBUF")
    assert status == 409
    assert (
        '{errorType:"FIELD_KIND_CHANGED", description:"The type of a field at path '
        "'#/Order/3' in the new schema does not match the old schema\"}"
    ) in body["message"]


def test_protobuf_compatible_change_accepted(registry_url: str, subject: str) -> None:
    assert register(registry_url, subject, PROTO_V1, "PROTOBUF")[0] == 200
    # Renaming a field, widening int64 to uint64 (the same varint), adding a field and a
    # message, removing a field: all compatible under Confluent's Protobuf rules.
    changed = (
        PROTO_V1.replace("string item = 2;", "uint64 quantity = 4;")
        .replace("int64 id = 1;", "uint64 order_id = 1;")
        .replace("}\n", "}\nmessage Refund { int64 order_id = 1; }\n")
    )
    status, body = register(registry_url, subject, changed, "PROTOBUF")
    assert status == 200, body
    status, body = http(registry_url, "GET", f"/subjects/{subject}/versions/2")
    assert (body["schemaType"], body["schema"]) == ("PROTOBUF", changed)


def test_invalid_schemas_and_type_changes(registry_url: str, subject: str) -> None:
    for schema, schema_type in (
        ('{"type": "objekt"}', "JSON"),
        ("[1, 2]", "JSON"),
        ('syntax = "proto3"; message A { strin x = 1; }', "PROTOBUF"),
        ('syntax = "proto3"; import "other.proto"; message A { int32 x = 1; }', "PROTOBUF"),
        ('"string"', "XML"),
    ):
        status, body = register(registry_url, subject, schema, schema_type)
        assert (status, body["error_code"]) == (422, 42201), (schema, body)
    assert register(registry_url, subject, '"string"', "AVRO")[0] == 200
    status, body = register(registry_url, subject, '{"type": "string"}', "JSON")
    assert status == 409
    assert "Incompatible because of different schema type" in body["message"]


@pytest.mark.parametrize("backend", ["file", "zookeeper"])
def test_types_survive_a_reopened_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A restarted registry reads each stored schema with its own type's parser: lookups,
    the serialized format and compatibility checks work on what the last process stored."""

    def open_store() -> SchemaStore:
        if backend == "file":
            return FileSchemaStore(tmp_path)
        return ZooKeeperSchemaStore(request.getfixturevalue("zk_connect"))

    json_text = json.dumps(CLOSED_V1)
    store = open_store()
    registry = Registry(store)
    json_id = registry.register("orders-json", json_text, "JSON")
    proto_id = registry.register("orders-proto", PROTO_V1, "PROTOBUF")
    store.close()
    store = open_store()
    try:
        registry = Registry(store)
        assert registry.lookup("orders-json", json_text, "JSON").id == json_id
        assert registry.schema_by_id(proto_id).schema_type == "PROTOBUF"
        serialized = registry.schema_by_id(proto_id, fmt="serialized").text
        assert registry.lookup("orders-proto", serialized, "PROTOBUF").id == proto_id
        changed = PROTO_V1.replace("int64 id = 1;", "string id = 1;")
        assert registry.test_compatibility("orders-proto", None, changed, "PROTOBUF") == [
            '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
            "path '#/Order/1' in the new schema does not match its kind in the old schema\"}",
            "{oldSchemaVersion: 1}",
            "{compatibility: 'BACKWARD'}",
        ]
    finally:
        store.close()


def test_serialized_format_by_version(tmp_path: Path) -> None:
    """What ``GET /subjects/{s}/versions/{v}?format=serialized`` answers (the call
    confluent-kafka's Protobuf serde makes with ``use.latest.version``): the base64
    descriptor of a Protobuf schema; other formats and types give the stored text."""
    store = FileSchemaStore(tmp_path)
    try:
        registry = Registry(store)
        registry.register("orders-proto", PROTO_V1, "PROTOBUF")
        registry.register("orders-json", json.dumps(OPEN_V1), "JSON")
        serialized = registry.get_version("orders-proto", "latest", fmt="serialized").schema
        assert base64.b64decode(serialized, validate=True)
        assert registry.lookup("orders-proto", serialized, "PROTOBUF").version == 1
        assert registry.get_version("orders-proto", 1).schema == PROTO_V1
        json_text = registry.get_version("orders-json", 1, fmt="serialized").schema
        assert json.loads(json_text) == OPEN_V1
    finally:
        store.close()
