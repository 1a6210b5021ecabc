"""Request limits: each key at, just below and just above its limit, through the HTTP API.

In-process (Starlette's TestClient over the ASGI app) with small limits, so each boundary is
cheap to reach; the default limits and the 5,000-records-deep schema against the real registry
process; the configuration keys through ``RegistryConfig``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from sluice.common.options import InvalidOptionError
from sluice.schemas.app import CONTENT_TYPE
from sluice.schemas.avro_schema import parse_schema
from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.limits import MAX_SAFE_DEPTH, RegistryLimits
from sluice.schemas.registry import Registry
from sluice.schemas.server import RegistryConfig
from tests.schemas.in_process import in_process_registry

SMALL = RegistryLimits(
    max_body_size=2048,
    max_request_depth=8,
    max_schema_size=1024,
    max_schema_depth=12,
    max_subject_length=40,
)


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[TestClient]:
    with in_process_registry(tmp_path / "registry", SMALL) as c:
        yield c


def record(doc: str = "", name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "doc": doc, "fields": [{"name": "a", "type": "int"}]}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def sized(build: Callable[[str], str], size: int) -> str:
    """``build(doc)`` with the doc padded so the result is exactly ``size`` characters."""
    base = build("")
    return build("x" * (size - len(base)))


def register(c: TestClient, subject: str, body: bytes | str) -> tuple[int, Any]:
    r = c.post(f"/subjects/{subject}/versions", content=body)
    assert r.headers["content-type"] == CONTENT_TYPE
    return r.status_code, r.json()


def code(result: tuple[int, Any]) -> tuple[int, int | None]:
    status, body = result
    return status, body.get("error_code") if isinstance(body, dict) else None


# -- request nesting -------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "ok"), [(7, True), (8, True), (9, False)])
def test_body_nesting_depth(app_client: TestClient, depth: int, ok: bool) -> None:
    nested = "[" * (depth - 1) + "]" * (depth - 1)
    r = app_client.put("/config", content=f'{{"compatibility": {nested}}}')
    # Within the limit the body decodes and the level is refused for what it is (42203).
    assert (r.status_code, r.json()["error_code"]) == ((422, 42203) if ok else (400, 400))
    if not ok:
        assert "schema.registry.max.request.depth" in r.json()["message"]


# -- schema size and depth -------------------------------------------------------------------


def schema_of(size: int) -> str:
    text = sized(lambda doc: compact(record(doc)), size)
    assert len(text) == size
    return text


@pytest.mark.parametrize(("size", "ok"), [(1023, True), (1024, True), (1025, False)])
def test_schema_size(app_client: TestClient, size: int, ok: bool) -> None:
    result = register(app_client, f"size-{size}-value", compact({"schema": schema_of(size)}))
    if ok:
        assert result[0] == 200, result
    else:
        assert code(result) == (422, 42209)
        assert "schema.registry.max.schema.size=1024" in result[1]["message"]


def test_schema_size_counts_utf8_bytes(app_client: TestClient) -> None:
    text = sized(lambda doc: json.dumps(record(doc), ensure_ascii=False), 1010)
    heavy = text.replace("x" * 20, "é" * 20)  # 1,030 bytes in UTF-8, 1,010 characters
    body = json.dumps({"schema": text})
    assert register(app_client, "utf8-value", body)[0] == 200
    body = json.dumps({"schema": heavy}, ensure_ascii=False)
    assert code(register(app_client, "utf8-value", body.encode())) == (422, 42209)


def nested_records(levels: int) -> str:
    """Records nested ``levels`` deep (JSON depth 3 * levels), built without recursion."""
    head = "".join(
        f'{{"type":"record","name":"r{i}","fields":[{{"name":"f","type":' for i in range(levels)
    )
    return head + '"int"' + "}]}" * levels


def nested_arrays(depth: int) -> str:
    return '{"type":"array","items":' * depth + '"int"' + "}" * depth


@pytest.mark.parametrize(("depth", "ok"), [(11, True), (12, True), (13, False)])
def test_schema_depth(app_client: TestClient, depth: int, ok: bool) -> None:
    result = register(app_client, f"depth-{depth}-value", compact({"schema": nested_arrays(depth)}))
    if ok:
        assert result[0] == 200, result
    else:
        assert code(result) == (422, 42201)
        assert "schema.registry.max.schema.depth" in result[1]["message"]
    # Lookup and the compatibility check hold schemas to the same limit.
    body = compact({"schema": nested_arrays(depth)})
    lookup = app_client.post(f"/subjects/depth-{depth}-value", content=body)
    check = app_client.post(f"/compatibility/subjects/depth-{depth}-value/versions", content=body)
    assert (lookup.status_code == 200) is ok and (check.status_code == 200) is ok


@pytest.mark.parametrize("build", [nested_arrays, nested_records])
def test_schemas_at_the_safe_depth_ceiling_parse(tmp_path: Path, build: Any) -> None:
    """At MAX_SAFE_DEPTH the recursive parser and checker still have room: no RecursionError."""
    ceiling = RegistryLimits(max_schema_depth=MAX_SAFE_DEPTH)
    with in_process_registry(tmp_path / "registry", ceiling) as c:
        levels = MAX_SAFE_DEPTH if build is nested_arrays else MAX_SAFE_DEPTH // 3
        body = compact({"schema": build(levels)})
        assert c.post("/subjects/ceiling-value/versions", content=body).status_code == 200
        assert c.post("/subjects/ceiling-value", content=body).status_code == 200
        check = c.post("/compatibility/subjects/ceiling-value/versions", content=body)
        assert check.json() == {"is_compatible": True}
        assert c.get("/schemas/ids/1/schema").json() == json.loads(build(levels))


# -- subject names ---------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "ok"), [(39, True), (40, True), (41, False)])
def test_subject_length(app_client: TestClient, length: int, ok: bool) -> None:
    subject = "s" * length
    result = register(app_client, subject, compact({"schema": '"string"'}))
    config = app_client.put(f"/config/{subject}", json={"compatibility": "NONE"})
    if ok:
        assert result[0] == 200 and config.status_code == 200
    else:
        assert code(result) == (422, 42208)
        assert "schema.registry.max.subject.length=40" in result[1]["message"]
        assert config.json()["error_code"] == 42208
    # Reading is not limited: an unknown long subject is simply not found.
    assert app_client.get(f"/subjects/{'s' * 500}/versions").json()["error_code"] == 40401


@pytest.mark.parametrize("subject", ["a%00b", "tab%09", "del%7F", "c1%C2%85"])
def test_subjects_with_control_characters_are_refused(app_client: TestClient, subject: str) -> None:
    assert code(register(app_client, subject, compact({"schema": '"string"'}))) == (422, 42208)
    r = app_client.put(f"/config/{subject}", json={"compatibility": "NONE"})
    assert r.json()["error_code"] == 42208


# -- the real process, default limits --------------------------------------------------------


def test_a_schema_5000_records_deep_is_a_422_naming_the_limit(registry_url: str) -> None:
    deep = nested_records(5000)
    with httpx.Client(base_url=registry_url, timeout=30) as c:
        for path in ("/subjects/deep-value/versions", "/subjects/deep-value"):
            r = c.post(path, content=compact({"schema": deep}))
            assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text[:200]
            assert "schema.registry.max.schema.depth" in r.json()["message"]
            assert "more than 128 levels" in r.json()["message"]
        r = c.post("/compatibility/subjects/deep-value/versions", content=compact({"schema": deep}))
        assert (r.status_code, r.json()["error_code"]) == (422, 42201)
        # The same nesting as the body itself, not inside the schema string: a 400.
        r = c.post("/subjects/deep-value/versions", content=b"[" * 20_000 + b"]" * 20_000)
        assert (r.status_code, r.json()["error_code"]) == (400, 400)
        assert "schema.registry.max.request.depth" in r.json()["message"]


# -- configuration ---------------------------------------------------------------------------


def test_keys_and_defaults() -> None:
    assert RegistryConfig.from_properties({}).limits == RegistryLimits()
    assert RegistryLimits() == RegistryLimits(1_048_576, 64, 1_048_576, 128, 1024)
    limits = RegistryConfig.from_properties(
        {
            "size.limit.filter.max.request.body.size": "10",
            "schema.registry.max.request.depth": "3",
            "schema.registry.max.schema.size": "20",
            "schema.registry.max.schema.depth": "4",
            "schema.registry.max.subject.length": "5",
        }
    ).limits
    assert limits == RegistryLimits(10, 3, 20, 4, 5)
    off = RegistryLimits.from_properties({"size.limit.filter.enabled": "false"})
    assert off.max_body_size is None


@pytest.mark.parametrize(
    "props",
    [
        {"size.limit.filter.max.request.body.size": "0"},
        {"size.limit.filter.max.request.body.size": "1MB"},
        {"size.limit.filter.enabled": "yes"},
        {"schema.registry.max.schema.depth": str(MAX_SAFE_DEPTH + 1)},
        {"schema.registry.max.request.depth": "-1"},
        {"schema.registry.max.subject.length": "many"},
    ],
)
def test_bad_values_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(InvalidOptionError, match=next(iter(props))):
        RegistryConfig.from_properties(props)


# -- the backstops ---------------------------------------------------------------------------


def test_a_recursion_error_that_gets_past_the_limits_is_a_422(
    app_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def overflow(*args: object) -> int:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Registry, "register", overflow)
    result = register(app_client, "overflow-value", compact({"schema": '"int"'}))
    assert code(result) == (422, 42201)
    assert "schema.registry.max.schema.depth" in result[1]["message"]


def test_parse_schema_never_raises_recursion_error() -> None:
    # Called directly (a stored text, a library user), without the request limits in front.
    with pytest.raises(InvalidSchemaError, match=f"more than {MAX_SAFE_DEPTH} levels"):
        parse_schema(nested_records(5000))
    with pytest.raises(InvalidSchemaError, match=f"more than {MAX_SAFE_DEPTH} levels"):
        parse_schema(nested_arrays(MAX_SAFE_DEPTH + 1))
    assert parse_schema(nested_arrays(MAX_SAFE_DEPTH)).text == nested_arrays(MAX_SAFE_DEPTH)
