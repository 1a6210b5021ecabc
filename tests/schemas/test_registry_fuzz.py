"""A fuzz of the REST API: random requests on every route never get a 5xx, a non-JSON answer or
no answer, and the registry still registers and looks up a schema afterwards.

Requests are drawn by Hypothesis: any method on any route template (modes, references, imports,
contexts and metadata included), path parameters from odd
subject names (control characters, ``..``, ``%``, very long), versions and ids of every shape,
the routes' query parameters with random values, bodies of random JSON, random bytes, strict-JSON
traps (``NaN``, lone surrogates, 5,000-digit numbers), deep nesting and near-limit sizes, under
every content type. Once in this process with small limits (so limits are hit), once against a
real registry process with the default ones.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.schemas import schema_path
from sluice.schemas.limits import RegistryLimits
from tests.schemas.in_process import in_process_registry

AUDIT = schema_path("audit_count").read_text()
SMALL = RegistryLimits(
    max_body_size=4096,
    max_request_depth=8,
    max_schema_size=2048,
    max_schema_depth=16,
    max_subject_length=64,
)

ROUTES = [
    "/",
    "/schemas/types",
    "/schemas/ids/{id}",
    "/schemas/ids/{id}/schema",
    "/schemas/ids/{id}/versions",
    "/schemas/ids/{id}/subjects",
    "/subjects",
    "/subjects/{subject}",
    "/subjects/{subject}/versions",
    "/subjects/{subject}/versions/{version}",
    "/subjects/{subject}/versions/{version}/schema",
    "/compatibility/subjects/{subject}/versions",
    "/compatibility/subjects/{subject}/versions/{version}",
    "/config",
    "/config/{subject}",
    "/mode",
    "/mode/{subject}",
    "/schemas",
    "/subjects/{subject}/versions/{version}/referencedby",
    "/subjects/{subject}/metadata",
    "/contexts",
    "/v1/metadata/id",
    "/v1/metadata/version",
    "/no/such/route",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]
QUERY_KEYS = [
    "deleted",
    "deleted_only",
    "permanent",
    "verbose",
    "defaultToGlobal",
    "subjectPrefix",
    "normalize",
    "latestOnly",
    "offset",
    "limit",
    "force",
    "key",
    "value",
    "subject",
    "format",
]
CONTENT_TYPES = [
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/json; charset=utf-16",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=zz",
    "application/octet-stream",
    "",
]

odd_subjects = st.one_of(
    st.text(min_size=1, max_size=30),
    st.sampled_from(["..", ".", "%", "%2F", "__GLOBAL", ":.ctx:s", "-value", " ", "a/b", "\x00"]),
    st.integers(1, 300).map(lambda n: "s" * n),
)
versions = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["latest", "LATEST", "-1", "0", "1", "2", "1.0", "1e3", "٣", "9" * 5000]),
    st.text(max_size=10),
)
ids = st.one_of(
    st.integers(-5, 2**70).map(str),
    st.sampled_from(["1", "2", "0x10", "1_0", " 1", "9" * 5000]),
    st.text(max_size=10),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
schema_texts = st.one_of(
    st.just(AUDIT),
    st.sampled_from(['"string"', '"int"', '{"type":"array","items":"long"}', "", "{", "[]"]),
    json_values.map(json.dumps),
    st.integers(1, 300).map(lambda n: '{"type":"array","items":' * n + '"int"' + "}" * n),
    st.integers(1, 100).map(
        lambda n: (
            "".join(
                f'{{"type":"record","name":"r{i}","fields":[{{"name":"f","type":' for i in range(n)
            )
            + '"int"'
            + "}]}" * n
        )
    ),
    st.sampled_from(
        [
            '{"type":"double","default":NaN}',
            '{"type":"record","name":"R","doc":"\\ud800","fields":[]}',
            '{"type":"fixed","name":"F","size":1' + "0" * 5000 + "}",
            '{"type":"record","name":"R","fields":[{"name":"d","type":"double","default":1e999}]}',
        ]
    ),
    st.integers(1000, 5000).map(lambda n: json.dumps({"type": "string", "doc": "x" * n})),
)
request_objects = st.fixed_dictionaries(
    {},
    optional={
        "schema": st.one_of(schema_texts, json_values),
        "schemaType": st.one_of(st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro"]), json_values),
        "references": st.one_of(
            st.just([]),
            json_values,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.one_of(st.sampled_from(["R", "a.proto", "x.json"]), json_values),
                        "subject": st.one_of(odd_subjects, json_values),
                        "version": st.one_of(st.integers(-2, 3), json_values),
                    }
                ),
                max_size=3,
            ),
        ),
        "id": st.one_of(st.integers(-2, 2**40), json_values),
        "version": st.one_of(st.integers(-2, 2**40), json_values),
        "metadata": st.one_of(st.just({"properties": {"owner": "x"}}), json_values),
        "ruleSet": json_values,
        "mode": st.one_of(
            st.sampled_from(["READWRITE", "READONLY", "IMPORT", "readonly", "bogus"]), json_values
        ),
        "compatibility": st.one_of(
            st.sampled_from(["NONE", "BACKWARD", "full_transitive", "bogus"]), json_values
        ),
        "extra": json_values,
    },
)
bodies = st.one_of(
    st.none(),
    st.binary(max_size=200),
    request_objects.map(lambda o: json.dumps(o).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 20_000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 20_000).map(lambda n: b'{"schema":' * n),
    st.sampled_from([b"NaN", b'{"schema": 1' + b"1" * 5000 + b"}", b'{"a":"\\udfff"}', b"\xff"]),
    st.integers(0, 8192).map(lambda n: b'{"schema":"' + b"x" * n + b'"}'),
    request_objects.map(lambda o: json.dumps(o).encode("utf-16")),
)


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = ""


@st.composite
def calls(draw: st.DrawFn) -> Call:
    route = draw(st.sampled_from(ROUTES))
    path = route.format(
        subject=urllib.parse.quote(draw(odd_subjects), safe=""),
        version=urllib.parse.quote(draw(versions), safe=""),
        id=urllib.parse.quote(draw(ids), safe=""),
    )
    keys = st.one_of(st.sampled_from(QUERY_KEYS), st.text(min_size=1, max_size=8))
    values = st.one_of(st.sampled_from(["true", "True", "false", "", "1"]), st.text(max_size=20))
    return Call(
        method=draw(st.sampled_from(METHODS)),
        path=path,
        params=draw(st.dictionaries(keys, values, max_size=3)),
        body=draw(bodies),
        content_type=draw(st.sampled_from(CONTENT_TYPES)),
    )


def check(call: Call, status: int, headers: Any, content: bytes) -> None:
    """Never a server error; every answer with a body is JSON, every error Confluent's shape."""
    assert status < 500, (call, status, content[:300])
    if call.method == "HEAD":
        return
    assert headers["content-type"] == "application/vnd.schemaregistry.v1+json", (call, headers)
    body = json.loads(content)
    if status >= 400:
        assert set(body) == {"error_code", "message"}, (call, body)
        assert isinstance(body["error_code"], int) and isinstance(body["message"], str)


def send(client: httpx.Client | Any, call: Call) -> tuple[int, Any, bytes]:
    headers = {"Content-Type": call.content_type} if call.content_type else {}
    r = client.request(
        call.method, call.path, params=call.params, content=call.body, headers=headers
    )
    return r.status_code, r.headers, r.content


def still_serves(client: httpx.Client | Any) -> None:
    """A normal register and lookup, as a producer would do them (once the registry is back in
    READWRITE: the fuzz may have left it READONLY or IMPORT)."""
    assert client.put("/mode", json={"mode": "READWRITE"}).status_code == 200
    client.delete("/mode/after-the-fuzz-value")
    body = json.dumps({"schema": AUDIT}).encode()
    r = client.post("/subjects/after-the-fuzz-value/versions", content=body)
    assert r.status_code == 200, r.text
    schema_id = r.json()["id"]
    r = client.post("/subjects/after-the-fuzz-value", content=body)
    assert (r.status_code, r.json()["id"]) == (200, schema_id)
    assert json.loads(client.get(f"/schemas/ids/{schema_id}").json()["schema"]) == json.loads(AUDIT)


def fuzz(client: httpx.Client | Any, examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(calls())
    def one(call: Call) -> None:
        check(call, *send(client, call))

    one()


def test_fuzz_in_process(tmp_path: Path) -> None:
    with in_process_registry(tmp_path / "registry", SMALL) as client:
        fuzz(client, 300)
        still_serves(client)


def test_fuzz_a_registry_process(start_registry: Callable[..., Any]) -> None:
    process = start_registry("fuzzed")
    # A timeout is a hung request: httpx raises, the test fails.
    with httpx.Client(base_url=process.url, timeout=10) as client:
        fuzz(client, 200)
        still_serves(client)
    assert process.proc.poll() is None, process.log()
    assert "Traceback" not in process.log(), process.log()[-3000:]
