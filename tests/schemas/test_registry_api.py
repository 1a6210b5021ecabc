"""The REST API against the running registry: shapes, ids, deletes, config, error codes.

Checked with confluent-kafka's own ``SchemaRegistryClient`` where it has the call, and with
raw HTTP where the exact status and body matter.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any, cast

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
PAGE_VIEW = schema_path("page_view").read_text()
AUDIT = schema_path("audit_count").read_text()


def unique(schema: str, tag: str) -> str:
    """``schema`` with its doc set to ``tag``: a schema no other test registers."""
    doc = json.loads(schema)
    doc["doc"] = tag
    return json.dumps(doc)


def http(
    url: str, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, str, Any]:
    """(status, content type, decoded JSON) of one request, errors included."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": CONTENT_TYPE}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers["Content-Type"], json.loads(e.read())


@pytest.fixture
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


def test_register_lookup_and_read_back(sr: SchemaRegistryClient, subject: str) -> None:
    schema_id = sr.register_schema(subject, Schema(PAGE_VIEW, "AVRO"))
    latest = sr.get_latest_version(subject)
    assert (latest.subject, latest.version, latest.schema_id) == (subject, 1, schema_id)
    assert json.loads(str(latest.schema.schema_str)) == json.loads(PAGE_VIEW)
    found = sr.lookup_schema(subject, Schema(PAGE_VIEW, "AVRO"))
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert json.loads(str(sr.get_schema(schema_id).schema_str)) == json.loads(PAGE_VIEW)
    assert sr.get_version(subject, 1).schema_id == schema_id
    assert sr.get_versions(subject) == [1]
    assert subject in sr.get_subjects()
    versions = sr.get_schema_versions(schema_id)
    assert (subject, 1) in [(v.subject, v.version) for v in versions]


def test_response_shapes(registry_url: str, subject: str) -> None:
    status, ctype, body = http(
        registry_url, "POST", f"/subjects/{subject}/versions", {"schema": AUDIT}
    )
    assert (status, ctype) == (200, CONTENT_TYPE)
    assert set(body) == {"id"}
    status, _, body = http(registry_url, "GET", f"/schemas/ids/{body['id']}")
    assert set(body) == {"schema"}
    status, _, body = http(registry_url, "GET", f"/subjects/{subject}/versions/latest")
    assert set(body) == {"subject", "version", "id", "schema"}
    status, _, body = http(registry_url, "GET", f"/subjects/{subject}/versions/-1/schema")
    assert body == json.loads(AUDIT)
    assert http(registry_url, "GET", "/schemas/types")[2] == ["JSON", "PROTOBUF", "AVRO"]


def test_same_schema_same_id(client: RegistryClient, subject: str) -> None:
    first = client.register(subject, PAGE_VIEW)
    assert client.register(subject, PAGE_VIEW) == first
    # Whitespace and attribute order inside JSON objects do not make a new schema.
    reordered = json.dumps(
        {
            k: v if k != "fields" else [dict(reversed(list(f.items()))) for f in v]
            for k, v in reversed(list(json.loads(PAGE_VIEW).items()))
        },
        indent=8,
    )
    assert client.register(subject, reordered) == first
    assert client.versions(subject) == [1]
    # Another subject shares the id with its own version 1.
    assert client.register(subject + "-other", PAGE_VIEW) == first
    assert client.get_version(subject + "-other", 1)["id"] == first


def test_a_new_default_is_a_new_schema(client: RegistryClient, subject: str) -> None:
    # Parsing Canonical Form would drop the default and give back the old id.
    doc = json.loads(AUDIT)
    first = client.register(subject, json.dumps(doc))
    doc["fields"][-1]["default"] = 0
    assert client.register(subject, json.dumps(doc)) != first


def test_error_codes(registry_url: str, subject: str) -> None:
    url = registry_url
    assert http(url, "GET", f"/subjects/{subject}/versions")[::2] == (
        404,
        {"error_code": 40401, "message": f"Subject '{subject}' not found."},
    )
    http(url, "POST", f"/subjects/{subject}/versions", {"schema": AUDIT})
    assert http(url, "GET", f"/subjects/{subject}/versions/7")[2]["error_code"] == 40402
    status, _, body = http(url, "GET", f"/subjects/{subject}/versions/zero")
    assert (status, body["error_code"]) == (422, 42202)
    assert http(url, "GET", "/schemas/ids/987654")[::2] == (
        404,
        {"error_code": 40403, "message": "Schema 987654 not found"},
    )
    status, _, body = http(url, "POST", f"/subjects/{subject}", {"schema": '"string"'})
    assert (status, body["error_code"]) == (404, 40403)
    for bad in ("{", '{"type": "record"}', '{"type": "nosuchtype"}', ""):
        status, _, body = http(url, "POST", f"/subjects/{subject}/versions", {"schema": bad})
        assert (status, body["error_code"]) == (422, 42201), bad
    status, _, body = http(
        url, "POST", f"/subjects/{subject}/versions", {"schema": "{}", "schemaType": "XML"}
    )
    assert (status, body["error_code"]) == (422, 42201)
    assert "unsupported schema type 'XML'" in body["message"]
    status, _, body = http(url, "POST", f"/subjects/{subject}/versions", raw=b"not json")
    assert (status, body["error_code"]) == (400, 400)
    status, _, body = http(url, "GET", "/no/such/route")
    assert (status, body["error_code"]) == (404, 404)


def test_incompatible_is_409_with_reason(sr: SchemaRegistryClient, subject: str) -> None:
    sr.register_schema(subject, Schema(AUDIT, "AVRO"))
    doc = json.loads(AUDIT)
    doc["fields"].append({"name": "region", "type": "string"})
    with pytest.raises(SchemaRegistryError) as err:
        sr.register_schema(subject, Schema(json.dumps(doc), "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (409, 409)
    assert "region" in err.value.error_message
    assert sr.test_compatibility(subject, Schema(json.dumps(doc), "AVRO")) is False


def test_soft_then_permanent_delete(
    sr: SchemaRegistryClient, registry_url: str, subject: str
) -> None:
    url = registry_url
    audit = unique(AUDIT, subject)
    sid = sr.register_schema(subject, Schema(audit, "AVRO"))
    doc = json.loads(audit)
    doc["fields"].append({"name": "dc", "type": "string", "default": "live"})
    sr.register_schema(subject, Schema(json.dumps(doc), "AVRO"))

    # Permanent delete needs a soft delete first.
    status, _, body = http(url, "DELETE", f"/subjects/{subject}/versions/1?permanent=true")
    assert (status, body["error_code"]) == (404, 40407)
    assert sr.delete_version(subject, 1) == 1
    status, _, body = http(url, "DELETE", f"/subjects/{subject}/versions/1")
    assert body["error_code"] == 40406
    assert sr.get_versions(subject) == [2]
    assert http(url, "GET", f"/subjects/{subject}/versions?deleted=true")[2] == [1, 2]
    assert http(url, "GET", f"/subjects/{subject}/versions/1")[2]["error_code"] == 40402
    assert http(url, "GET", f"/subjects/{subject}/versions/1?deleted=true")[2]["id"] == sid
    # Soft-deleted schemas stay readable by id: consumers still hold data written with them.
    assert http(url, "GET", f"/schemas/ids/{sid}")[0] == 200

    status, _, body = http(url, "DELETE", f"/subjects/{subject}?permanent=true")
    assert (status, body["error_code"]) == (404, 40405)
    assert sr.delete_subject(subject) == [2]
    assert subject not in sr.get_subjects()
    assert subject in sr.get_subjects(deleted=True)
    assert http(url, "DELETE", f"/subjects/{subject}")[2]["error_code"] == 40404
    assert sr.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in sr.get_subjects(deleted=True)
    assert http(url, "GET", f"/schemas/ids/{sid}")[2]["error_code"] == 40403
    assert http(url, "DELETE", f"/subjects/{subject}")[2]["error_code"] == 40401


def test_ids_not_reused_after_permanent_delete(client: RegistryClient, subject: str) -> None:
    audit = unique(AUDIT, subject)
    old = client.register(subject, audit)
    client.delete_subject(subject)
    client.delete_subject(subject, permanent=True)
    new = client.register(subject, unique(AUDIT, subject + " (another)"))
    assert new > old
    assert client.versions(subject) == [1]
    # The very same schema again also gets a fresh id: the old one is gone for good.
    assert client.register(subject + "-again", audit) not in (old, new)


def test_register_after_soft_delete_continues_versions(
    client: RegistryClient, subject: str
) -> None:
    sid = client.register(subject, AUDIT)
    client.delete_subject(subject)
    assert client.register(subject, AUDIT) == sid
    assert client.versions(subject) == [2]


def test_config(sr: SchemaRegistryClient, registry_url: str, subject: str) -> None:
    assert sr.get_compatibility() == "BACKWARD"
    status, _, body = http(registry_url, "GET", f"/config/{subject}")
    assert (status, body["error_code"]) == (404, 40408)
    assert http(registry_url, "GET", f"/config/{subject}?defaultToGlobal=true")[2] == {
        "compatibilityLevel": "BACKWARD"
    }
    # confluent-kafka annotates this as str; it returns the response body.
    assert cast(Any, sr.set_compatibility(subject, "full_transitive")) == {
        "compatibility": "FULL_TRANSITIVE"
    }
    assert sr.get_compatibility(subject) == "FULL_TRANSITIVE"
    status, _, body = http(registry_url, "PUT", f"/config/{subject}", {"compatibility": "SOME"})
    assert (status, body["error_code"]) == (422, 42203)
    assert http(registry_url, "DELETE", f"/config/{subject}")[2] == {
        "compatibilityLevel": "FULL_TRANSITIVE"
    }
    assert sr.get_compatibility() == "BACKWARD"
