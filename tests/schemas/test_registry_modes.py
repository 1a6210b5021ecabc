"""Modes (READWRITE, READONLY, IMPORT), ``GET /schemas``, metadata, ``/v1/metadata`` and
contexts, through the REST API and confluent-kafka's ``SchemaRegistryClient``.

Per-subject modes run on the shared session registry; the global mode runs on a private
in-process registry (it would change every other test's registry otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    Metadata,
    MetadataProperties,
    Schema,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError
from starlette.testclient import TestClient

from sluice import __version__
from sluice.schemas.limits import RegistryLimits
from tests.schemas.in_process import in_process_registry
from tests.schemas.test_registry_api import http


def record(tag: str, *fields: str) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "R",
            "doc": tag,
            "fields": [{"name": f, "type": "int", "default": 0} for f in fields],
        }
    )


@pytest.fixture
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


@pytest.fixture
def app(tmp_path: Path) -> Iterator[TestClient]:
    with in_process_registry(tmp_path / "data", RegistryLimits()) as client:
        yield client


def answer(response: Any) -> tuple[int, Any]:
    return response.status_code, response.json()


def test_readonly_subject_refuses_writes(
    registry_url: str, sr: SchemaRegistryClient, subject: str
) -> None:
    first = sr.register_schema(subject, Schema(record("v1"), "AVRO"))
    with pytest.raises(SchemaRegistryError) as e:
        sr.get_mode(subject)
    assert e.value.error_code == 40409
    assert http(registry_url, "GET", f"/mode/{subject}?defaultToGlobal=true")[2] == {
        "mode": "READWRITE"
    }
    assert sr.update_mode(subject, "READONLY") == "READONLY"
    assert sr.get_mode(subject) == "READONLY"

    status, _, body = http(
        registry_url, "POST", f"/subjects/{subject}/versions", {"schema": record("v2", "a")}
    )
    assert (status, body["error_code"]) == (422, 42205)
    assert body["message"] == f"Subject {subject} is not in read-write mode"
    status, _, body = http(registry_url, "DELETE", f"/subjects/{subject}/versions/1")
    assert (status, body["error_code"]) == (422, 42205)
    # Reads still work.
    assert sr.get_latest_version(subject).schema_id == first

    assert sr.delete_mode(subject) == "READONLY"
    assert sr.register_schema(subject, Schema(record("v2", "a"), "AVRO")) > first
    status, _, body = http(registry_url, "PUT", f"/mode/{subject}", {"mode": "WRITEONLY"})
    assert (status, body["error_code"]) == (422, 42204)


def test_import_keeps_ids_and_versions(app: TestClient) -> None:
    assert answer(app.put("/mode", json={"mode": "IMPORT"})) == (200, {"mode": "IMPORT"})
    body = {"schema": record("imported"), "id": 42, "version": 3}
    assert answer(app.post("/subjects/orders-value/versions", json=body)) == (200, {"id": 42})
    assert app.get("/schemas/ids/42").json() == {"schema": record("imported").replace(" ", "")}
    assert app.get("/subjects/orders-value/versions/3").json()["id"] == 42
    # The same import again is idempotent; another schema under that id is refused.
    assert answer(app.post("/subjects/orders-value/versions", json=body))[1] == {"id": 42}
    status, error = answer(
        app.post("/subjects/other-value/versions", json={"schema": record("x"), "id": 42})
    )
    assert (status, error["error_code"]) == (422, 42205)
    assert error["message"] == "Overwrite new schema with id 42 is not permitted."
    # Without an id, IMPORT refuses; no compatibility check applies to an import.
    status, error = answer(app.post("/subjects/orders-value/versions", json={"schema": '"int"'}))
    assert (status, error["error_code"]) == (422, 42205)
    incompatible = {"schema": '"string"', "id": 7}
    assert answer(app.post("/subjects/orders-value/versions", json=incompatible))[1] == {"id": 7}
    assert app.get("/subjects/orders-value/versions").json() == [3, 4]

    # Back in READWRITE, an explicit id is refused and new ids start above the imported ones.
    assert app.put("/mode", json={"mode": "READWRITE"}).json() == {"mode": "READWRITE"}
    status, error = answer(
        app.post("/subjects/new-value/versions", json={"schema": '"long"', "id": 50})
    )
    assert (status, error["error_code"]) == (422, 42205)
    assert error["message"] == "Subject new-value is not in import mode"
    assert app.post("/subjects/new-value/versions", json={"schema": '"long"'}).json() == {"id": 43}

    # IMPORT over existing subjects needs force, globally and per subject.
    status, error = answer(app.put("/mode", json={"mode": "IMPORT"}))
    assert (status, error["error_code"]) == (422, 42205)
    assert error["message"] == "Cannot import since found existing subjects"
    status, error = answer(app.put("/mode/new-value", json={"mode": "IMPORT"}))
    assert (status, error["error_code"]) == (422, 42205)
    assert answer(app.put("/mode/new-value?force=true", json={"mode": "IMPORT"}))[0] == 200
    assert app.put("/mode/empty-value", json={"mode": "IMPORT"}).status_code == 200


def test_state_survives_a_restart(tmp_path: Path) -> None:
    with in_process_registry(tmp_path / "data", RegistryLimits()) as app:
        app.put("/mode", json={"mode": "IMPORT"})
        app.post("/subjects/a-value/versions", json={"schema": record("a"), "id": 100})
        app.put("/mode", json={"mode": "READWRITE"})
        app.put("/mode/a-value", json={"mode": "READONLY"})
        uses_r = {"type": "record", "name": "B", "fields": [{"name": "r", "type": "R"}]}
        body = {
            "schema": json.dumps(uses_r),
            "references": [{"name": "R", "subject": "a-value", "version": 1}],
            "metadata": {"properties": {"owner": "team-b"}},
            "ruleSet": {"domainRules": [{"name": "r", "kind": "CONDITION", "type": "CEL"}]},
        }
        b_id = app.post("/subjects/b-value/versions", json=body).json()["id"]
    with in_process_registry(tmp_path / "data", RegistryLimits()) as app:
        assert app.get("/mode").json() == {"mode": "READWRITE"}
        assert app.get("/mode/a-value").json() == {"mode": "READONLY"}
        served = app.get(f"/schemas/ids/{b_id}").json()
        assert served["references"] == body["references"]
        assert served["metadata"] == body["metadata"]
        assert served["ruleSet"] == body["ruleSet"]
        assert app.get("/subjects/a-value/versions/1/referencedby").json() == [b_id]
        fresh = app.post("/subjects/c-value/versions", json={"schema": '"int"'}).json()["id"]
        assert fresh > 100


def test_list_schemas_metadata_and_server_metadata(
    registry_url: str, sr: SchemaRegistryClient, subject: str
) -> None:
    owned = Schema(
        record("owned"), "AVRO", metadata=Metadata(None, MetadataProperties({"owner": "a"}), None)
    )
    sr.register_schema(subject, Schema(record("plain"), "AVRO"))
    owned_id = sr.register_schema(subject, owned)
    sr.register_schema(f"{subject}-other", Schema('"int"', "AVRO"))

    latest = sr.get_latest_with_metadata(subject, {"owner": "a"})
    assert (latest.schema_id, latest.version) == (owned_id, 2)
    assert latest.schema.metadata is not None
    assert latest.schema.metadata.properties == MetadataProperties({"owner": "a"})
    status, _, body = http(registry_url, "GET", f"/subjects/{subject}/metadata?key=owner&value=b")
    assert (status, body["error_code"]) == (404, 40403)

    status, _, body = http(registry_url, "GET", f"/schemas?subjectPrefix={subject}")
    assert status == 200
    assert [(s["subject"], s["version"]) for s in body] == [
        (subject, 1),
        (subject, 2),
        (f"{subject}-other", 1),
    ]
    assert body[1]["metadata"] == {"properties": {"owner": "a"}}
    latest_only = http(registry_url, "GET", f"/schemas?subjectPrefix={subject}&latestOnly=true")
    assert [s["version"] for s in latest_only[2]] == [2, 1]
    paged = http(registry_url, "GET", f"/schemas?subjectPrefix={subject}&offset=1&limit=1")[2]
    assert [(s["subject"], s["version"]) for s in paged] == [(subject, 2)]

    assert http(registry_url, "GET", "/v1/metadata/version")[2]["version"] == __version__
    assert http(registry_url, "GET", "/v1/metadata/id")[0] == 200
    # The session registry is shared: other tests may have added contexts after the default.
    contexts = sr.get_contexts()
    assert contexts[0] == "." and contexts == sorted(contexts)
