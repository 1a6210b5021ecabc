"""The request-body size limit: at, just below and just above it, declared or chunked; a
declared 50 MB body refused before it is sent; a chunked one refused while it streams."""

from __future__ import annotations

import dataclasses
import json
import select
import socket
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from sluice.schemas.limits import RegistryLimits
from tests.schemas.in_process import in_process_registry

LIMIT = 2048
DEFAULT_LIMIT = 1_048_576
FIFTY_MB = 50 * 1024 * 1024


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[TestClient]:
    limits = dataclasses.replace(RegistryLimits(), max_body_size=LIMIT)
    with in_process_registry(tmp_path / "registry", limits) as c:
        yield c


def register_body(size: int, name: str = "R") -> str:
    """A register request body of exactly ``size`` characters (ASCII): a record whose doc pads."""

    def build(doc: str) -> str:
        record = {"type": "record", "name": name, "doc": doc, "fields": []}
        return json.dumps({"schema": json.dumps(record)})

    text = build("x" * (size - len(build(""))))
    assert len(text) == size
    return text


@pytest.mark.parametrize(("size", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
def test_declared_length(app_client: TestClient, size: int, status: int) -> None:
    r = app_client.post("/subjects/declared-value/versions", content=register_body(size, "D"))
    assert r.request.headers["content-length"] == str(size)
    assert r.status_code == status, r.text
    if status == 413:
        assert r.json() == {
            "error_code": 413,
            "message": f"Request body of {size} bytes is too large: the limit is "
            f"size.limit.filter.max.request.body.size={LIMIT} bytes",
        }


@pytest.mark.parametrize(("size", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
def test_chunked_length(app_client: TestClient, size: int, status: int) -> None:
    text = register_body(size, "C").encode()
    r = app_client.post(
        "/subjects/chunked-value/versions", content=iter([text[:1000], text[1000:]])
    )
    assert "content-length" not in r.request.headers
    assert r.status_code == status, r.text
    if status == 413:
        assert r.json()["error_code"] == 413
        assert "Request body is too large" in r.json()["message"]


def test_an_over_limit_declared_body_is_never_read(app_client: TestClient) -> None:
    def never() -> Iterator[bytes]:
        raise AssertionError("the body was read")
        yield b""  # a generator

    r = app_client.post(
        "/subjects/early-value/versions",
        content=never(),
        headers={"Content-Length": str(FIFTY_MB)},
    )
    assert (r.status_code, r.json()["error_code"]) == (413, 413)


def test_a_lying_content_length_is_counted_anyway(app_client: TestClient) -> None:
    body = register_body(LIMIT + 500, "L").encode()
    r = app_client.post(
        "/subjects/lying-value/versions",
        content=iter([body]),
        headers={"Content-Length": "10", "Transfer-Encoding": ""},
    )
    assert (r.status_code, r.json()["error_code"]) == (413, 413)


# -- the real registry process (default limit, 1 MiB) ------------------------------------------


def _connect(url: str) -> socket.socket:
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def _response(sock: socket.socket) -> tuple[int, dict[str, object]]:
    """Read one HTTP/1.1 response with a Content-Length; (status, JSON body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    headers = {k.lower(): v for k, v in headers.items()}
    assert headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    while len(rest) < int(headers["content-length"]):
        rest += sock.recv(65536)
    return int(lines[0].split()[1]), json.loads(rest)


def _head(path: str, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: registry", "Content-Type: application/json", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_declared_50_mb_body_is_refused_before_it_is_sent(registry_url: str) -> None:
    with _connect(registry_url) as sock:
        started = time.monotonic()
        sock.sendall(_head("/subjects/fifty-value/versions", f"Content-Length: {FIFTY_MB}"))
        status, body = _response(sock)  # not one byte of the body sent
        assert (status, body["error_code"]) == (413, 413)
        assert time.monotonic() - started < 5


def test_a_chunked_body_is_refused_while_it_streams(registry_url: str) -> None:
    chunk = b"x" * 65536
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    sent = 0
    with _connect(registry_url) as sock:
        sock.sendall(_head("/subjects/stream-value/versions", "Transfer-Encoding: chunked"))
        while sent < FIFTY_MB:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            sock.sendall(framed)
            sent += len(chunk)
        else:
            pytest.fail("the registry read 50 MB without answering")
        status, body = _response(sock)
    assert (status, body["error_code"]) == (413, 413)
    # Answered after the limit and long before the end (what is in flight in the kernel's
    # socket buffers when the answer comes varies, so no closer bound).
    assert DEFAULT_LIMIT < sent < FIFTY_MB


@pytest.mark.parametrize(
    ("size", "status"), [(DEFAULT_LIMIT - 1, 200), (DEFAULT_LIMIT, 200), (DEFAULT_LIMIT + 1, 413)]
)
def test_default_limit(registry_url: str, size: int, status: int) -> None:
    body = register_body(size, f"Default{size}")
    with httpx.Client(base_url=registry_url, timeout=30) as c:
        r = c.post(f"/subjects/default-limit-{size}-value/versions", content=body)
        assert r.status_code == status, r.text[:200]
        assert r.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
