"""Requests in, responses out: frames ↔ (header, kio dataclass).

A request frame (what ``FrameDecoder.next_frame`` returns, without the size prefix)::

    RequestHeader  v1 or v2, see headers.py
    Body           the API's request message at RequestApiVersion (kio schema)

A response on the wire::

    Size           INT32, bytes that follow
    ResponseHeader v0 or v1 (always v0 for ApiVersions)
    Body           the API's response message at the request's version

Decoding, in order, each failure with its own error:

1. Read key, version and correlation id (8 bytes, the same in every header version).
2. Unknown key, or a version outside the implemented range → ``UnsupportedVersion``, carrying
   the correlation id so the server can answer an ApiVersions request (below) and log the rest.
3. Parse the header of the version the API version implies → ``RemoteProtocolError`` if bad.
4. ``bounds.check_bounds`` walks the body so that kio never sees an absurd array count (kio
   would abort the process, see bounds.py) → ``RemoteProtocolError``.
5. kio parses the body. Whatever kio raises on peer bytes (its ``DecodeError`` family,
   ``ValueError``, ``KeyError`` for an unknown tagged field, ``UnicodeDecodeError``...) becomes a
   ``RemoteProtocolError`` chained to the original.

6. A version below the API's ``handler_min`` (one Kafka 4.0 dropped) is up-converted to it
   (``legacy.up_convert``); the header then carries the handler's version as ``api_version``
   and the client's as ``wire_version``, and ``encode_response`` down-converts the answer.

Bytes after the body are ignored, as Kafka ignores them. Produce skips steps 4 to 6: its
hand-written decoder (``produce_codec``) checks every length itself, and its records come out as
``memoryview`` slices of the frame holding exactly the bytes the producer sent; nothing
re-encodes them — except at v0–2, whose magic 0/1 message sets it up-converts to one v2 batch.

Unsupported versions, what Sluice does and why (it is what Kafka does):

* **ApiVersions** at a version we do not implement (librdkafka starts at v3, kafka-python 3 at
  v4): answer with an ApiVersionsResponse **v0** (header v0) carrying error code 35
  UNSUPPORTED_VERSION and the api_keys list, then keep the connection. The client reads the
  ApiVersions entry and retries at a version we speak. Kafka (``ApiVersionsRequest.
  getErrorResponse``, KIP-511) lists only the ApiVersions key there; Sluice lists every API it
  advertises, a superset the clients read the same way (they look up key 18). Built by
  ``encode_unsupported_version``.
* **Any other API**: no response; the server closes the connection (Kafka's ``SocketServer``
  closes it on an ``InvalidRequestException`` from ``RequestContext.parseRequest``). The client
  sees a disconnect, re-bootstraps and renegotiates versions through ApiVersions. A response
  with error 35 in some error field would need a per-API error body and would be read as a
  per-partition error by clients that never asked for that version.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from typing import Any, Final

from kio.serial import entity_reader, entity_writer

from .apis import (
    ApiKey,
    request_header_version,
    request_type,
    response_header_version,
    response_type,
    spec_for,
    supported_api_versions,
)
from .bounds import check_bounds
from .errors import Errors, LocalProtocolError, RemoteProtocolError, UnsupportedVersion
from .headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    peek_request_ids,
)
from .legacy import down_convert, up_convert
from .primitives import INT32, skip_tagged_fields
from .produce_codec import decode_produce_body

__all__ = [
    "Request",
    "decode_request",
    "encode_response",
    "encode_unsupported_version",
    "encode_request",
    "decode_response",
]

_SIZE_PLACEHOLDER: Final = b"\x00\x00\x00\x00"
_PRODUCE: Final = int(ApiKey.PRODUCE)  # a plain int: compared once per request


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header and kio's body dataclass (e.g. ``ProduceRequest`` v8)."""

    header: RequestHeader
    body: Any

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def _readonly(frame: bytes | bytearray | memoryview) -> bytes | memoryview:
    # kio's native reader refuses writable buffers (it may one day release the GIL).
    if isinstance(frame, bytes):
        return frame
    if isinstance(frame, bytearray):
        return bytes(frame)
    return frame if frame.readonly else frame.toreadonly()


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode one request frame (without its size prefix).

    Raises ``UnsupportedVersion`` for an API key or version Sluice does not implement and
    ``RemoteProtocolError`` for anything malformed; never anything else for peer bytes.
    """
    data = _readonly(frame)
    api_key, api_version, correlation_id = peek_request_ids(data)
    spec = spec_for(api_key)
    if spec is None:
        raise UnsupportedVersion(api_key, api_version, correlation_id, f"unknown api key {api_key}")
    if not spec.implements(api_version):
        raise UnsupportedVersion(
            api_key,
            api_version,
            correlation_id,
            f"{spec.name} v{api_version} is not supported "
            f"(Sluice implements v{spec.min_version}-v{spec.max_version})",
        )
    header, pos = parse_request_header(data, request_header_version(api_key, api_version))
    if api_key == _PRODUCE:
        # The hot path: hand-written, zero-copy records (see produce_codec).
        return Request(header, decode_produce_body(data, pos, api_version))
    body_type = request_type(api_key, api_version)
    check_bounds(body_type, data, pos)
    try:
        body, _size = entity_reader(body_type)(data, pos)
    except Exception as exc:  # kio's errors on peer bytes are many; all mean "malformed"
        raise RemoteProtocolError(
            f"malformed {spec.name} v{api_version} request body: {type(exc).__name__}: {exc}"
        ) from exc
    if api_version < spec.handler_min:
        body = up_convert(api_key, body, request_type(api_key, spec.handler_min))
        header = replace(header, api_version=spec.handler_min, wire_version=api_version)
    return Request(header, body)


def _encode(prefix: bytes, body: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(_SIZE_PLACEHOLDER)
    buf.write(prefix)
    try:
        entity_writer(type(body))(buf, body)
    except Exception as exc:  # a value out of range, a wrong type: our bug, not the peer's
        raise LocalProtocolError(
            f"cannot encode {type(body).__name__}: {type(exc).__name__}: {exc}"
        ) from exc
    view = buf.getbuffer()
    INT32.pack_into(view, 0, len(view) - 4)
    del view  # release the export so getvalue() may proceed
    return buf.getvalue()


def _check_body(body: Any, api_key: int, api_version: int, kind: str) -> None:
    try:
        key, version = body.__api_key__, body.__version__
    except AttributeError:
        raise LocalProtocolError(f"{type(body).__name__} is not a kio {kind} payload") from None
    if (key, version) != (api_key, api_version) or body.__type__.name != kind:
        raise LocalProtocolError(
            f"expected a {kind} for api key {api_key} v{api_version}, "
            f"got {type(body).__name__} (api key {key} v{version})"
        )


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """Encode a response to the request with ``header``: size prefix, header, body.

    ``body`` must be kio's response dataclass of the request's API and version (the version
    the handler saw), else ``LocalProtocolError``; it is down-converted to the client's
    version when the codec up-converted the request.
    """
    _check_body(body, header.api_key, header.api_version, "response")
    version = header.client_version
    if version != header.api_version:
        body = down_convert(header.api_key, body, response_type(header.api_key, version))
    header_version = response_header_version(header.api_key, version)
    return _encode(encode_response_header(header.correlation_id, header_version), body)


def encode_unsupported_version(exc: UnsupportedVersion) -> bytes:
    """The answer to an ApiVersions request at a version Sluice does not implement.

    An ApiVersionsResponse v0 (header v0) with error 35 and the advertised api_keys. For any
    other API there is no answer (close the connection): ``LocalProtocolError``.
    """
    if exc.api_key != ApiKey.API_VERSIONS:
        raise LocalProtocolError(
            f"only ApiVersions is answered at an unsupported version, not api key {exc.api_key}"
        )
    body = response_type(ApiKey.API_VERSIONS, 0)(
        error_code=Errors.UNSUPPORTED_VERSION.code,
        api_keys=supported_api_versions(0),
    )
    return _encode(encode_response_header(exc.correlation_id, 0), body)


# ---------------------------------------------------------------------------------------------
# The client side: replica fetchers, tools and tests send requests and read responses.
# ---------------------------------------------------------------------------------------------


def encode_request(correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """Encode a request (size prefix, header of the right version, body) from a kio dataclass."""
    api_key, api_version = int(body.__api_key__), int(body.__version__)
    _check_body(body, api_key, api_version, "request")
    header = RequestHeader(
        api_key,
        api_version,
        correlation_id,
        client_id,
        request_header_version(api_key, api_version),
    )
    return _encode(encode_request_header(header), body)


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Any]:
    """Decode a response frame (without its size prefix) to ``(correlation_id, body)``."""
    data = _readonly(frame)
    try:
        body_type = response_type(api_key, api_version)
    except KeyError:
        raise LocalProtocolError(f"no schema for api key {api_key} v{api_version}") from None
    if len(data) < 4:
        raise RemoteProtocolError(f"response of {len(data)} bytes has no correlation id")
    (correlation_id,) = INT32.unpack_from(data, 0)
    pos = 4
    if response_header_version(api_key, api_version) == 1:
        pos = skip_tagged_fields(data, pos, len(data))
    check_bounds(body_type, data, pos)
    try:
        body, _size = entity_reader(body_type)(data, pos)
    except Exception as exc:
        raise RemoteProtocolError(
            f"malformed response body (api key {api_key} v{api_version}): {exc}"
        ) from exc
    return correlation_id, body
