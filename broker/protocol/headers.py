"""Request and response headers (Kafka's ``RequestHeader.json`` / ``ResponseHeader.json``).

Request header v1 (non-flexible request versions)::

    RequestApiKey      INT16
    RequestApiVersion  INT16
    CorrelationId      INT32
    ClientId           NULLABLE_STRING   INT16 length, -1 = null

Request header v2 (flexible request versions) is v1 followed by a TAGGED_FIELDS section.
ClientId stays a *non-compact* nullable string in v2: Kafka special-cases it
(``"flexibleVersions": "none"`` on the field) so that a broker can always read who is asking,
even for a version it does not understand.

Response header v0::

    CorrelationId      INT32

Response header v1 is v0 followed by TAGGED_FIELDS (Sluice writes none: one zero byte).

Which version a message uses follows the API version's flexibility (``apis.py`` decides);
ApiVersions responses always use header v0 so that a client that sent too new a version can
still parse the answer.

The first 8 bytes (key, version, correlation id) have the same layout in every header version,
which is what lets ``peek_request_ids`` read them before anything is known about the API.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from .errors import LocalProtocolError, RemoteProtocolError
from .primitives import INT16, INT32, skip_tagged_fields

__all__ = [
    "RequestHeader",
    "peek_request_ids",
    "parse_request_header",
    "encode_request_header",
    "encode_response_header",
]

_IDS: Final = struct.Struct(">hhi")
_IDS_SIZE: Final = 8
_IDS_LEN: Final = struct.Struct(">hhih")  # the ids and the client id's INT16 length
_IDS_LEN_SIZE: Final = 10


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header; ``header_version`` is 1 or 2.

    ``wire_version`` is the version the client sent when the codec up-converted the request
    (``legacy``): ``api_version`` is then the version the handler sees and answers, and
    ``encode_response`` / ``encode_fetch_response`` write the answer at ``wire_version``.
    None when the two are the same.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1
    wire_version: int | None = None

    @property
    def client_version(self) -> int:
        """The version on the wire: the one the answer is written at."""
        return self.api_version if self.wire_version is None else self.wire_version


def peek_request_ids(frame: bytes | memoryview) -> tuple[int, int, int]:
    """Read ``(api_key, api_version, correlation_id)`` from the start of a request frame."""
    if len(frame) < _IDS_SIZE:
        raise RemoteProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _IDS.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(
    frame: bytes | memoryview, header_version: int
) -> tuple[RequestHeader, int]:
    """Parse a request header of the given version; return it and the offset of the body."""
    if header_version not in (1, 2):
        raise LocalProtocolError(f"request header version must be 1 or 2, got {header_version}")
    end = len(frame)
    if end < _IDS_LEN_SIZE:  # runs once per request: one unpack for ids and client id length
        peek_request_ids(frame)  # raises if the ids themselves are cut short
        raise RemoteProtocolError("truncated request header: no client id length")
    api_key, api_version, correlation_id, length = _IDS_LEN.unpack_from(frame, 0)
    pos = _IDS_LEN_SIZE
    client_id: str | None
    if length == -1:
        client_id = None
    elif length < 0:
        raise RemoteProtocolError(f"negative client id length {length}")
    elif length > end - pos:
        raise RemoteProtocolError(f"client id of {length} bytes exceeds the {end - pos} left")
    else:
        try:
            client_id = str(frame[pos : pos + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"client id is not UTF-8: {exc}") from None
        pos += length
    if header_version == 2:
        # Request header v2 defines no tagged fields a broker must read; skip whatever came.
        pos = skip_tagged_fields(frame, pos, end)
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, pos


def encode_request_header(header: RequestHeader) -> bytes:
    """Encode a request header (the client side: used by tests and tools)."""
    out = bytearray(_IDS.pack(header.api_key, header.api_version, header.correlation_id))
    if header.client_id is None:
        out += INT16.pack(-1)
    else:
        raw = header.client_id.encode("utf-8")
        out += INT16.pack(len(raw))
        out += raw
    if header.header_version == 2:
        out.append(0)  # no tagged fields
    elif header.header_version != 1:
        raise LocalProtocolError(f"request header version must be 1 or 2: {header}")
    return bytes(out)


_EMPTY_TAGGED_FIELDS: Final = b"\x00"


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Encode a response header v0 (correlation id) or v1 (+ empty tagged fields)."""
    if header_version == 0:
        return INT32.pack(correlation_id)
    if header_version == 1:
        return INT32.pack(correlation_id) + _EMPTY_TAGGED_FIELDS
    raise LocalProtocolError(f"response header version must be 0 or 1, got {header_version}")
