"""Contexts: ``:.ctx:subject`` names a subject of the context ``.ctx``, whose ids are its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from starlette.testclient import TestClient

from sluice.schemas.context_path import rewrite
from sluice.schemas.limits import RegistryLimits
from tests.schemas.in_process import in_process_registry


@pytest.fixture
def app(tmp_path: Path) -> Iterator[TestClient]:
    with in_process_registry(tmp_path / "data", RegistryLimits()) as client:
        yield client


def test_ids_are_per_context(app: TestClient) -> None:
    assert app.post("/subjects/orders-value/versions", json={"schema": '"int"'}).json() == {"id": 1}
    assert app.post("/subjects/other-value/versions", json={"schema": '"long"'}).json() == {"id": 2}
    # The first schema of another context is its id 1 too, and a different schema.
    ctx_subject = ":.billing:orders-value"
    assert app.post(f"/subjects/{ctx_subject}/versions", json={"schema": '"string"'}).json() == {
        "id": 1
    }
    assert app.get("/schemas/ids/1").json() == {"schema": '"int"'}
    assert app.get(f"/schemas/ids/1?subject={ctx_subject}").json() == {"schema": '"string"'}
    assert app.get(f"/schemas/ids/1/versions?subject={ctx_subject}").json() == [
        {"subject": ctx_subject, "version": 1}
    ]
    assert app.get("/schemas/ids/2?subject=:.billing:x").status_code == 404
    assert app.get(f"/subjects/{ctx_subject}/versions/1").json()["id"] == 1
    assert app.get("/subjects").json() == [ctx_subject, "orders-value", "other-value"]
    assert app.get("/contexts").json() == [".", ".billing"]
    # ":.:name" is the default context's "name".
    assert app.get("/subjects/:.:orders-value/versions/1").json()["subject"] == "orders-value"
    # A reference without a context is in the referring subject's.
    body = {
        "schema": '{"type":"record","name":"R","fields":[{"name":"f","type":"E"}]}',
        "references": [{"name": "E", "subject": "enum-value", "version": 1}],
    }
    enum = '{"type":"enum","name":"E","symbols":["A"]}'
    app.post("/subjects/:.billing:enum-value/versions", json={"schema": enum})
    answer = app.post("/subjects/:.billing:records-value/versions", json=body)
    assert answer.status_code == 200, answer.json()
    assert app.get("/subjects/:.billing:enum-value/versions/1/referencedby").json() == [
        answer.json()["id"]
    ]
    assert app.delete("/subjects/:.billing:enum-value").json()["error_code"] == 42206
    assert app.post("/subjects/x-value/versions", json=body).json()["error_code"] == 42201


def test_contexts_survive_a_restart(tmp_path: Path) -> None:
    with in_process_registry(tmp_path / "data", RegistryLimits()) as app:
        app.post("/subjects/:.a:s/versions", json={"schema": '"int"'})
        app.post("/subjects/:.a:s/versions", json={"schema": '"long"'})
    with in_process_registry(tmp_path / "data", RegistryLimits()) as app:
        assert app.post("/subjects/:.a:t/versions", json={"schema": '"string"'}).json() == {"id": 3}
        assert app.post("/subjects/t/versions", json={"schema": '"string"'}).json() == {"id": 1}
        assert app.get("/schemas/ids/2?subject=:.a:s").json() == {"schema": '"long"'}


def test_confluent_client_in_a_context(registry_url: str, subject: str) -> None:
    qualified = f":.h14ctx:{subject}"
    with SchemaRegistryClient({"url": registry_url}) as sr:
        schema_id = sr.register_schema(qualified, Schema('"bytes"', "AVRO"))
        assert sr.get_schema(schema_id, subject_name=qualified).schema_str == '"bytes"'
        assert sr.get_latest_version(qualified).schema_id == schema_id
        assert ".h14ctx" in sr.get_contexts()


def test_a_context_in_import_mode(app: TestClient) -> None:
    """Migration into a context: IMPORT on ``:.src:`` while the default context is in use."""
    app.post("/subjects/local-value/versions", json={"schema": '"int"'})
    assert app.put("/mode/:.src:", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    imported = {"schema": '"string"', "id": 5}
    assert app.post("/subjects/:.src:orders-value/versions", json=imported).json() == {"id": 5}
    assert app.get("/mode/:.src:orders-value?defaultToGlobal=true").json() == {"mode": "IMPORT"}
    # The default context is still READWRITE; the imported context refuses plain writes.
    assert app.post("/subjects/local-value/versions", json={"schema": '"int"'}).json() == {"id": 1}
    refused = app.post("/subjects/:.src:orders-value/versions", json={"schema": '"long"'})
    assert refused.json()["error_code"] == 42205
    # A context with subjects needs force, as the registry does.
    app.post("/subjects/:.busy:s/versions", json={"schema": '"int"'})
    answer = app.put("/mode/:.busy:", json={"mode": "IMPORT"})
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42205)
    # A context's compatibility level applies to its subjects.
    app.put("/config/:.src:", json={"compatibility": "NONE"})
    assert app.get("/config/:.src:orders-value?defaultToGlobal=true").json() == {
        "compatibilityLevel": "NONE"
    }


# Confluent's ContextFilterTest cases, as the path and query a request is served as.
@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        (
            "/contexts/.test-ctx/subjects/test-subject/versions",
            "",
            "/subjects/:.test-ctx:test-subject/versions",
        ),
        ("/contexts/:.:/subjects/test-subject/versions", "", "/subjects/test-subject/versions"),
        ("/contexts/:.:/subjects", "", "/subjects?subjectPrefix="),
        (
            "/contexts/test-ctx/subjects/test-subject/versions",
            "",
            "/subjects/:.test-ctx:test-subject/versions",
        ),
        ("/contexts/.test-ctx/subjects/test-subject/", "", "/subjects/:.test-ctx:test-subject"),
        ("/contexts/.test-ctx/schemas/ids/1/", "", "/schemas/ids/1?subject=:.test-ctx:"),
        ("/contexts/:.:/schemas/", "subjectPrefix=:*:", "/schemas?subjectPrefix=:*:"),
        (
            "/contexts/.test-ctx/subjects/:.test-ctx:test-subject/versions",
            "",
            "/subjects/:.test-ctx:test-subject/versions",
        ),
        (
            "/contexts/.test-ctx/subjects/%3A.test-ctx%3Atest-subject/versions",
            "",
            "/subjects/%3A.test-ctx%3Atest-subject/versions",
        ),
        (
            "/contexts/.test-ctx/subjects/slash%2Fin%2Fmiddle/",
            "",
            "/subjects/:.test-ctx:slash%2Fin%2Fmiddle",
        ),
        ("/contexts/.test-ctx/config/test-subject", "", "/config/:.test-ctx:test-subject"),
        ("/contexts/.test-ctx/config", "", "/config/:.test-ctx:"),
        ("/contexts/.test-ctx/mode/test-subject", "", "/mode/:.test-ctx:test-subject"),
        ("/contexts/.test-ctx/mode", "", "/mode/:.test-ctx:"),
        ("/contexts/:.:/mode", "", "/mode"),
        ("/contexts/.c/subjects", "subjectPrefix=orders", "/subjects?subjectPrefix=:.c:orders"),
    ],
)
def test_context_urls_rewrite_as_confluents_filter(path: str, query: str, expected: str) -> None:
    expected_path, _, expected_query = expected.partition("?")
    assert rewrite(path, query) == (expected_path, expected_query)


@pytest.mark.parametrize(
    "path",
    [
        "/chc/live",
        "/other/config/test",
        "/subjects/contexts/versions",
        "/contexts",
        "/contexts/.foo",
    ],
)
def test_paths_without_a_context_prefix_are_left_alone(path: str) -> None:
    assert rewrite(path, "") is None


def test_a_context_url_is_served_in_that_context(app: TestClient) -> None:
    base = "/contexts/.billing"
    assert app.post(f"{base}/subjects/orders-value/versions", json={"schema": '"int"'}).json() == {
        "id": 1
    }
    assert app.post("/subjects/orders-value/versions", json={"schema": '"long"'}).json() == {
        "id": 1
    }
    assert app.get("/subjects/:.billing:orders-value/versions/1").json()["schema"] == '"int"'
    assert app.get(f"{base}/subjects/orders-value/versions/1").json()["schema"] == '"int"'
    assert app.get(f"{base}/schemas/ids/1").json() == {"schema": '"int"'}
    assert app.get("/schemas/ids/1").json() == {"schema": '"long"'}
    assert app.get(f"{base}/subjects").json() == [":.billing:orders-value"]
    assert app.put(f"{base}/config", json={"compatibility": "NONE"}).status_code == 200
    assert app.get("/config/:.billing:").json()["compatibilityLevel"] == "NONE"
    refused = app.get("/contexts/a:b/subjects")
    assert refused.status_code == 400
    assert refused.json() == {
        "error_code": 400,
        "message": "Context name 'a:b' cannot contain a colon",
    }
