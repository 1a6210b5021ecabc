"""Request header v1/v2 and response header v0/v1, against kio's own header codecs."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2
from kio.serial import entity_writer

from sluice.broker.protocol.errors import LocalProtocolError, RemoteProtocolError
from sluice.broker.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    peek_request_ids,
)

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
client_ids = st.none() | st.text(max_size=30)


def kio_bytes(entity: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@given(i16, i16, i32, client_ids)
@settings(max_examples=100)
def test_v1_matches_kio(key: int, version: int, corr: int, client_id: str | None) -> None:
    raw = kio_bytes(
        KioHeaderV1(
            request_api_key=key,
            request_api_version=version,
            correlation_id=corr,
            client_id=client_id,
        )
    )
    header, pos = parse_request_header(raw + b"body", 1)
    assert header == RequestHeader(key, version, corr, client_id, 1)
    assert raw[pos:] + b"body" == (raw + b"body")[pos:] and pos == len(raw)
    assert encode_request_header(header) == raw


@given(i16, i16, i32, client_ids)
@settings(max_examples=100)
def test_v2_matches_kio(key: int, version: int, corr: int, client_id: str | None) -> None:
    raw = kio_bytes(
        KioHeaderV2(
            request_api_key=key,
            request_api_version=version,
            correlation_id=corr,
            client_id=client_id,
        )
    )
    # client_id stays a legacy INT16-length string in v2, then an empty tagged-field section.
    header, pos = parse_request_header(raw, 2)
    assert header == RequestHeader(key, version, corr, client_id, 2)
    assert pos == len(raw)
    assert raw.endswith(b"\x00")
    assert encode_request_header(header) == raw


def test_v2_skips_unknown_tagged_fields() -> None:
    base = encode_request_header(RequestHeader(18, 3, 42, "rdkafka", 2))[:-1]
    tagged = base + b"\x02" + b"\x05\x03abc" + b"\x07\x00"
    header, pos = parse_request_header(tagged + b"BODY", 2)
    assert header.client_id == "rdkafka" and header.correlation_id == 42
    assert (tagged + b"BODY")[pos:] == b"BODY"


def test_null_client_id() -> None:
    raw = b"\x00\x03\x00\x01\x00\x00\x00\x07\xff\xff"
    header, pos = parse_request_header(raw, 1)
    assert header.client_id is None and pos == 10


@pytest.mark.parametrize(
    ("raw", "version", "match"),
    [
        (b"\x00\x03\x00", 1, "shorter than a header"),
        (b"\x00\x03\x00\x01\x00\x00\x00\x07", 1, "no client id"),
        (b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x09abc", 1, "exceeds"),
        (b"\x00\x03\x00\x01\x00\x00\x00\x07\xff\xfe", 1, "negative"),
        (b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x02\xff\xfe", 1, "UTF-8"),
        (b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x00", 2, "truncated"),
        (b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x00\x7f", 2, "tagged field count"),
        (b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x00\x01\x00\x09", 2, "exceeds"),
    ],
)
def test_malformed_headers(raw: bytes, version: int, match: str) -> None:
    with pytest.raises(RemoteProtocolError, match=match):
        parse_request_header(raw, version)


def test_peek_ids() -> None:
    assert peek_request_ids(b"\x00\x12\x00\x03\x00\x00\x01\x00") == (18, 3, 256)


def test_response_headers() -> None:
    assert encode_response_header(7, 0) == b"\x00\x00\x00\x07"
    assert encode_response_header(-1, 1) == b"\xff\xff\xff\xff\x00"
    with pytest.raises(LocalProtocolError):
        encode_response_header(7, 2)
    with pytest.raises(LocalProtocolError):
        parse_request_header(b"\x00" * 10, 0)
