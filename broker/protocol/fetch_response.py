"""A hand-written Fetch response encoder (v0–v11) that never copies record bytes (v4+).

kio would need the records of every partition as one ``bytes`` object and would copy them
into its output buffer; a fetch of 50 MiB would be read into memory and copied twice. This
encoder writes only the bytes *around* the records and hands the records back untouched, as
``bytes`` or as the storage layer's opaque file slice (anything with an integer ``size``), so
the server can ``os.sendfile`` them from the segment file (design decision 4, zero copy).

Output: ``EncodedFetchResponse(chunks, size)``. ``chunks`` is, in order, ``bytes`` pieces and
the records objects exactly as given (a zero-length records value adds no chunk); the first
piece starts with the 4-byte size prefix and the response header; ``size`` is the total bytes
on the wire, prefix included. Concatenating the chunks (a slice standing for its ``size``
bytes) gives exactly what kio's encoder writes for the same response; the tests check that for
every version.

Layout (non-flexible versions 4–11; response header v0 = CorrelationId INT32)::

    ThrottleTimeMs          INT32
    ErrorCode               INT16            v7+
    SessionId               INT32            v7+
    Responses               ARRAY (INT32 count)
      Topic                 STRING (INT16 length)
      Partitions            ARRAY
        PartitionIndex      INT32
        ErrorCode           INT16
        HighWatermark       INT64
        LastStableOffset    INT64
        LogStartOffset      INT64            v5+
        AbortedTransactions NULLABLE ARRAY   (-1 = null)
          ProducerId        INT64
          FirstOffset       INT64
        PreferredReadReplica INT32           v11+
        Records             NULLABLE BYTES   (INT32 length, -1 = null)

Versions 0–3 (Kafka 4.0 dropped them; 3.x answers them) are older clients that read message
sets of magic 0 (v0–v1) or magic 1 (v2–v3), not batches. Their records are read into memory
(``records.read()`` for a file slice) and down-converted (``legacy_records.to_message_set``:
control batches skipped, headers dropped, offsets and timestamps kept), so these responses
lose zero copy — as they do on Kafka, which down-converts in the broker too. A partition with
a zstd batch answers UNSUPPORTED_COMPRESSION_TYPE with no records (zstd needs magic 2 and
Fetch v10, KIP-110), as Kafka does. Their layout::

    ThrottleTimeMs          INT32            v1+
    Responses               ARRAY
      Topic                 STRING
      Partitions            ARRAY
        PartitionIndex      INT32
        ErrorCode           INT16
        HighWatermark       INT64
        Records             NULLABLE BYTES   a message set

The handler sees such a request up-converted to v4 (``legacy``): ``header.api_version`` is 4
and ``header.wire_version`` the client's, which picks the layout here.

Thread-safety: pure functions of their arguments.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from sluice.broker.log.legacy_records import codecs, to_message_set
from sluice.broker.log.records import ZSTD

from .apis import ApiKey
from .errors import Errors, LocalProtocolError
from .headers import RequestHeader

__all__ = [
    "RecordSlice",
    "Records",
    "FetchPartition",
    "FetchTopic",
    "EncodedFetchResponse",
    "encode_fetch_response",
    "FETCH_RESPONSE_VERSIONS",
]

FETCH_RESPONSE_VERSIONS: Final = range(0, 12)
#: Below this version the records are message sets (magic 0 up to v1, magic 1 from v2).
FIRST_BATCH_VERSION: Final = 4


class RecordSlice(Protocol):
    """What the encoder needs of a storage file slice: its length in bytes."""

    @property
    def size(self) -> int: ...


Records = bytes | memoryview | RecordSlice
"""A partition's record bytes: in memory, or a slice of a segment file to send with sendfile."""


@dataclass(slots=True)
class FetchPartition:
    """One partition of a Fetch response; field names and defaults as Kafka's schema."""

    partition_index: int
    error_code: int = Errors.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1  # v5+
    aborted_transactions: Sequence[tuple[int, int]] | None = None  # (producer id, first offset)
    preferred_read_replica: int = -1  # v11+
    records: Records | None = None


@dataclass(slots=True)
class FetchTopic:
    topic: str
    partitions: Sequence[FetchPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EncodedFetchResponse:
    chunks: list[bytes | Records]
    size: int


_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_ABORTED: Final = struct.Struct(">qq")
_TOP_V4: Final = struct.Struct(">ii")  # correlation id, throttle
_TOP_V7: Final = struct.Struct(">iihi")  # correlation id, throttle, error code, session id
_PARTITION_V4: Final = struct.Struct(">ihqq")
_PARTITION_V5: Final = struct.Struct(">ihqqq")


def _records_size(records: Records) -> int:
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records) if not isinstance(records, memoryview) else records.nbytes
    size = records.size
    if not isinstance(size, int) or size < 0:
        raise LocalProtocolError(f"records slice has an invalid size {size!r}")
    return size


def encode_fetch_response(
    header: RequestHeader,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = Errors.NONE,
    session_id: int = 0,
) -> EncodedFetchResponse:
    """Encode the Fetch response to the request with ``header`` (Fetch v0–v11)."""
    version = header.client_version
    if header.api_key != ApiKey.FETCH or version not in FETCH_RESPONSE_VERSIONS:
        raise LocalProtocolError(
            f"encode_fetch_response handles Fetch v0-v11, got api key {header.api_key} v{version}"
        )
    if version < FIRST_BATCH_VERSION:
        return _encode_legacy(header.correlation_id, version, topics, throttle_time_ms)
    partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V4
    with_replica = version >= 11
    chunks: list[bytes | Records] = []
    buf = bytearray(4)  # size prefix, patched at the end
    if version >= 7:
        buf += _TOP_V7.pack(header.correlation_id, throttle_time_ms, error_code, session_id)
    else:
        buf += _TOP_V4.pack(header.correlation_id, throttle_time_ms)
    pieces: list[bytearray | Records] = []
    size = 0
    try:
        buf += _I32.pack(len(topics))
        for topic in topics:
            name = topic.topic.encode("utf-8")
            buf += _I16.pack(len(name))
            buf += name
            buf += _I32.pack(len(topic.partitions))
            for p in topic.partitions:
                if version >= 5:
                    buf += partition_struct.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                    )
                else:
                    buf += partition_struct.pack(
                        p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                    )
                aborted = p.aborted_transactions
                if aborted is None:
                    buf += _I32.pack(-1)
                else:
                    buf += _I32.pack(len(aborted))
                    for producer_id, first_offset in aborted:
                        buf += _ABORTED.pack(producer_id, first_offset)
                if with_replica:
                    buf += _I32.pack(p.preferred_read_replica)
                records = p.records
                if records is None:
                    buf += _I32.pack(-1)
                    continue
                records_size = _records_size(records)
                buf += _I32.pack(records_size)
                if records_size:
                    # Cut here: the records go out as they are, between two header pieces.
                    pieces.append(buf)
                    pieces.append(records)
                    size += len(buf) + records_size
                    buf = bytearray()
    except struct.error as exc:
        raise LocalProtocolError(f"Fetch response value out of range: {exc}") from exc
    pieces.append(buf)
    size += len(buf)
    first = pieces[0]
    assert isinstance(first, bytearray)
    _I32.pack_into(first, 0, size - 4)
    for piece in pieces:
        if isinstance(piece, bytearray):
            if piece:
                chunks.append(bytes(piece))
        else:
            chunks.append(piece)
    return EncodedFetchResponse(chunks, size)


_PARTITION_V0: Final = struct.Struct(">ihq")


def _read(records: Records) -> bytes | memoryview:
    if isinstance(records, bytes | memoryview):
        return records
    read = getattr(records, "read", None)
    if read is None:
        raise LocalProtocolError(
            f"Fetch v0-v3 down-converts its records: expected bytes or a slice with read(), "
            f"found {type(records).__name__}"
        )
    data = read()
    if not isinstance(data, bytes):
        raise LocalProtocolError(f"records slice read() returned {type(data).__name__}")
    return data


def _encode_legacy(
    correlation_id: int, version: int, topics: Sequence[FetchTopic], throttle_time_ms: int
) -> EncodedFetchResponse:
    """A Fetch v0–v3 response, all in memory, its batches down-converted (module docstring)."""
    magic = 0 if version < 2 else 1
    buf = bytearray(_I32.pack(0))  # size prefix, patched below
    buf += _I32.pack(correlation_id)
    if version >= 1:
        buf += _I32.pack(throttle_time_ms)
    try:
        buf += _I32.pack(len(topics))
        for topic in topics:
            name = topic.topic.encode("utf-8")
            buf += _I16.pack(len(name))
            buf += name
            buf += _I32.pack(len(topic.partitions))
            for p in topic.partitions:
                error_code = p.error_code
                converted: bytes | None = None
                if p.records is not None:
                    data = _read(p.records)
                    if ZSTD in codecs(data):
                        error_code, converted = Errors.UNSUPPORTED_COMPRESSION_TYPE, b""
                    else:
                        converted = to_message_set(data, magic)
                buf += _PARTITION_V0.pack(p.partition_index, error_code, p.high_watermark)
                if converted is None:
                    buf += _I32.pack(-1)
                else:
                    buf += _I32.pack(len(converted))
                    buf += converted
    except struct.error as exc:
        raise LocalProtocolError(f"Fetch response value out of range: {exc}") from exc
    _I32.pack_into(buf, 0, len(buf) - 4)
    return EncodedFetchResponse([bytes(buf)], len(buf))
