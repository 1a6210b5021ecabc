"""Schema references for the three types, through the REST API and confluent-kafka.

An Avro record registered under one subject is used by name from a schema under another,
which confluent-kafka's ``AvroSerializer`` registers with its references and its
``AvroDeserializer`` reads back; the referenced version cannot be deleted (42206) while a
version refers to it. JSON ``$ref`` and Protobuf imports name their references the same way;
confluent-kafka's ``ProtobufSerializer`` registers a message's imported file as a reference
and its deserializer reads the message back, and its ``JSONSerializer`` and
``JSONDeserializer`` resolve a ``$ref`` through the references the registry serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.registry import Registry
from sluice.schemas.schema_request import SchemaRequest
from tests.schemas.test_registry_api import http

ADDRESS = json.dumps(
    {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}],
    }
)
CUSTOMER = json.dumps(
    {
        "type": "record",
        "name": "Customer",
        "namespace": "com.acme",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "home", "type": "com.acme.Address"},
            {"name": "work", "type": ["null", "com.acme.Address"], "default": None},
        ],
    }
)


@pytest.fixture
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


def test_avro_reference_serializes_and_guards_its_subject(
    registry_url: str, sr: SchemaRegistryClient, subject: str
) -> None:
    address_subject = f"{subject}-address"
    address_id = sr.register_schema(address_subject, Schema(ADDRESS, "AVRO"))
    refs = [SchemaReference("com.acme.Address", address_subject, 1)]
    customer = Schema(CUSTOMER, "AVRO", refs)

    serializer = AvroSerializer(sr, customer, conf={"auto.register.schemas": True})
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    record = {"name": "Ada", "home": {"street": "Main", "zip": 1}, "work": None}
    payload = serializer(record, ctx)
    assert payload is not None
    customer_id = int.from_bytes(payload[1:5], "big")
    assert customer_id != address_id

    deserializer = AvroDeserializer(sr)
    assert deserializer(payload, ctx) == record

    # Served with its references, by version and by id; the referenced version knows its user.
    status, _, body = http(registry_url, "GET", f"/subjects/{subject}/versions/latest")
    assert status == 200
    assert body["references"] == [
        {"name": "com.acme.Address", "subject": address_subject, "version": 1}
    ]
    assert (
        http(registry_url, "GET", f"/schemas/ids/{customer_id}")[2]["references"]
        == (body["references"])
    )
    assert sr.get_referenced_by(address_subject, 1) == [customer_id]

    # Lookup by schema counts the references: without them it is another schema.
    found = sr.lookup_schema(subject, customer)
    assert (found.schema_id, found.version) == (customer_id, 1)
    status, _, body = http(registry_url, "POST", f"/subjects/{subject}", {"schema": CUSTOMER})
    assert status == 422  # com.acme.Address is unknown without the reference
    assert body["error_code"] == 42201

    # The referenced subject and version cannot be deleted while referenced.
    for path in (f"/subjects/{address_subject}", f"/subjects/{address_subject}/versions/1"):
        status, _, body = http(registry_url, "DELETE", path)
        assert (status, body["error_code"]) == (422, 42206), path
        assert body["message"].startswith("One or more references exist to the schema")
    # Once the referring subject is gone for good, it can.
    sr.delete_subject(subject)
    assert http(registry_url, "DELETE", f"/subjects/{address_subject}")[0] == 422
    sr.delete_subject(subject, permanent=True)
    assert sr.get_referenced_by(address_subject, 1) == []
    assert sr.delete_subject(address_subject) == [1]


def test_missing_reference_is_invalid(registry_url: str, subject: str) -> None:
    body = {
        "schema": CUSTOMER,
        "references": [{"name": "com.acme.Address", "subject": "no-such-subject", "version": 1}],
    }
    status, _, answer = http(registry_url, "POST", f"/subjects/{subject}/versions", body)
    assert (status, answer["error_code"]) == (422, 42201)
    assert "no-such-subject" in answer["message"]
    for bad in ([{"name": "x"}], "x", [{"name": "x", "subject": "s", "version": "1"}]):
        body = {"schema": '"string"', "references": bad}
        status, _, answer = http(registry_url, "POST", f"/subjects/{subject}/versions", body)
        assert (status, answer["error_code"]) == (422, 42201), bad


def test_json_ref_to_a_reference(registry_url: str, subject: str) -> None:
    address = {"type": "object", "properties": {"street": {"type": "string"}}}
    http(
        registry_url,
        "POST",
        f"/subjects/{subject}-address/versions",
        {"schema": json.dumps(address), "schemaType": "JSON"},
    )
    order = {"type": "object", "properties": {"ship_to": {"$ref": "address.json"}}}
    refs = [{"name": "address.json", "subject": f"{subject}-address", "version": 1}]
    status, _, body = http(
        registry_url,
        "POST",
        f"/subjects/{subject}/versions",
        {"schema": json.dumps(order), "schemaType": "JSON", "references": refs},
    )
    assert status == 200, body
    version = http(registry_url, "GET", f"/subjects/{subject}/versions/1")[2]
    assert (version["schemaType"], version["references"]) == ("JSON", refs)
    assert http(registry_url, "GET", f"/subjects/{subject}-address/versions/1/referencedby")[2] == [
        body["id"]
    ]


def test_protobuf_import_by_reference_name(registry_url: str, subject: str) -> None:
    money = 'syntax = "proto3";\npackage acme;\nmessage Money { int64 cents = 1; }\n'
    status, _, _ = http(
        registry_url,
        "POST",
        f"/subjects/{subject}-money/versions",
        {"schema": money, "schemaType": "PROTOBUF"},
    )
    assert status == 200
    order = (
        'syntax = "proto3";\npackage acme;\nimport "acme/money.proto";\n'
        "message Order { acme.Money total = 1; }\n"
    )
    refs = [{"name": "acme/money.proto", "subject": f"{subject}-money", "version": 1}]
    status, _, body = http(
        registry_url,
        "POST",
        f"/subjects/{subject}/versions",
        {"schema": order, "schemaType": "PROTOBUF", "references": refs},
    )
    assert status == 200, body
    served = http(registry_url, "GET", f"/schemas/ids/{body['id']}")[2]
    assert (served["schemaType"], served["references"]) == ("PROTOBUF", refs)
    # The descriptor a deserializer asks for builds against the referenced file.
    assert http(registry_url, "GET", f"/schemas/ids/{body['id']}?format=serialized")[0] == 200
    # Without the reference the import is unknown.
    status, _, answer = http(
        registry_url,
        "POST",
        f"/subjects/{subject}/versions",
        {"schema": order, "schemaType": "PROTOBUF"},
    )
    assert (status, answer["error_code"]) == (422, 42201)


MONEY_PROTO = 'syntax = "proto3";\npackage acme;\nmessage Money { int64 cents = 1; }\n'
INVOICE_PROTO = (
    'syntax = "proto3";\npackage acme;\nimport "acme/money.proto";\n'
    "message Invoice { string number = 1; acme.Money total = 2; }\n"
)


def _invoice_class(tmp_path: Path) -> Any:
    """``acme.Invoice``, compiled by protoc at run time with the file it imports."""
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "money.proto").write_text(MONEY_PROTO)
    (tmp_path / "acme" / "invoice.proto").write_text(INVOICE_PROTO)
    out = tmp_path / "invoice.desc"
    args = ["protoc", f"-I{tmp_path}", "--include_imports", f"--descriptor_set_out={out}"]
    assert protoc.main([*args, "acme/invoice.proto"]) == 0
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Invoice"))


def test_protobuf_serializer_registers_its_import_as_a_reference(
    sr: SchemaRegistryClient, subject: str, tmp_path: Path
) -> None:
    invoice_class = _invoice_class(tmp_path)
    serializer = ProtobufSerializer(invoice_class, sr, {"use.deprecated.format": False})
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    message = invoice_class(number="A-1")
    message.total.cents = 1250
    payload = serializer(message, ctx)
    assert payload is not None
    registered = sr.get_latest_version(subject)
    # confluent-kafka registers the imported file under its own name, then the schema with
    # a reference to it.
    assert [(r.name, r.subject) for r in registered.schema.references] == [
        ("acme/money.proto", "acme/money.proto")
    ]
    assert int.from_bytes(payload[1:5], "big") == registered.schema_id
    deserializer = ProtobufDeserializer(invoice_class, {"use.deprecated.format": False}, sr)
    assert deserializer(payload, ctx) == message


def test_shared_references_are_resolved_once(tmp_path: Path) -> None:
    """Twenty levels of diamonds (A_i and B_i both use A_i-1 and B_i-1): 2^20 paths to the
    bottom, resolved in the number of versions, not of paths."""
    store = FileSchemaStore(tmp_path / "data")
    try:
        registry = Registry(store)
        for name in ("A0", "B0"):
            registry.register(
                f"{name}-value", json.dumps({"type": "fixed", "name": name, "size": 1})
            )
        for i in range(1, 21):
            below = [f"A{i - 1}", f"B{i - 1}"]
            refs = [{"name": n, "subject": f"{n}-value", "version": 1} for n in below]
            for name in (f"A{i}", f"B{i}"):
                fields = [{"name": n.lower(), "type": n} for n in below]
                text = json.dumps({"type": "record", "name": name, "fields": fields})
                registry.register(f"{name}-value", SchemaRequest(text, references=refs))
        top = registry.get_version("A20-value", 1)
        assert [r.name for r in top.references] == ["A19", "B19"]
        # A fresh registry parses the stored top schema with every level below it.
        assert (
            Registry(store)
            .lookup(
                "A20-value",
                SchemaRequest(top.schema, references=[r.to_json() for r in top.references]),
            )
            .version
            == 1
        )
    finally:
        store.close()


def test_json_serializer_with_a_reference(sr: SchemaRegistryClient, subject: str) -> None:
    address = {
        "$id": "address.json",
        "type": "object",
        "properties": {"street": {"type": "string"}},
        "required": ["street"],
    }
    sr.register_schema(f"{subject}-address", Schema(json.dumps(address), "JSON"))
    order = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}},
        "required": ["id", "ship_to"],
    }
    refs = [SchemaReference("address.json", f"{subject}-address", 1)]
    serializer = JSONSerializer(Schema(json.dumps(order), "JSON", refs), sr)
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    value = {"id": 7, "ship_to": {"street": "Main"}}
    payload = serializer(value, ctx)
    assert payload is not None
    registered = sr.get_latest_version(subject)
    assert [(r.name, r.version) for r in registered.schema.references] == [("address.json", 1)]
    assert JSONDeserializer(None, schema_registry_client=sr)(payload, ctx) == value
