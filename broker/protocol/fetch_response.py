"""A hand-written Fetch response encoder (v0–v12) that never copies record bytes (v4+).

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

Version 12 is the first flexible one (KIP-482): the same fields, with the response header v1
(CorrelationId, then an empty TAGGED_FIELDS), every ARRAY / STRING / NULLABLE BYTES in its
compact form (UNSIGNED_VARINT N + 1, 0 = null) and a TAGGED_FIELDS section closing every
struct — the response, each topic, each partition (after its records) and each aborted
transaction. Of a partition's tagged fields only DivergingEpoch (tag 0: Epoch INT32, EndOffset
INT64, its own empty TAGGED_FIELDS; KIP-320) is ever written, when the handler sets it;
CurrentLeader and SnapshotId (tags 1, 2) are left out, their defaults.

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
from .primitives import COMPACT_NULL, INT16, INT32, NO_TAGS, write_compact_length

__all__ = [
    "RecordSlice",
    "Records",
    "FetchPartition",
    "FetchTopic",
    "EncodedFetchResponse",
    "encode_fetch_response",
    "FETCH_RESPONSE_VERSIONS",
]

FETCH_RESPONSE_VERSIONS: Final = range(0, 13)
#: The first flexible version (compact forms and tagged fields; module docstring).
FIRST_FLEXIBLE_VERSION: Final = 12
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
    diverging_epoch: tuple[int, int] | None = None  # v12+: (epoch, end offset), KIP-320


@dataclass(slots=True)
class FetchTopic:
    topic: str
    partitions: Sequence[FetchPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EncodedFetchResponse:
    chunks: list[bytes | Records]
    size: int


_ABORTED: Final = struct.Struct(">qq")
_TOP_V4: Final = struct.Struct(">ii")  # correlation id, throttle
_TOP_V7: Final = struct.Struct(">iihi")  # correlation id, throttle, error code, session id
_PARTITION_V4: Final = struct.Struct(">ihqq")
_PARTITION_V5: Final = struct.Struct(">ihqqq")
_TOP_V12: Final = struct.Struct(">ixihi")  # + an empty header TAGGED_FIELDS (the pad byte 0)
# A partition's TAGGED_FIELDS holding DivergingEpoch: 1 field, tag 0, 13 bytes, then the
# struct (epoch, end offset) and its own empty TAGGED_FIELDS.
_DIVERGING: Final = struct.Struct(">BBBiqB")


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
    """Encode the Fetch response to the request with ``header`` (Fetch v0–v12)."""
    version = header.client_version
    if header.api_key != ApiKey.FETCH or version not in FETCH_RESPONSE_VERSIONS:
        raise LocalProtocolError(
            f"encode_fetch_response handles Fetch v0-v12, got api key {header.api_key} v{version}"
        )
    if version < FIRST_BATCH_VERSION:
        return _encode_legacy(header.correlation_id, version, topics, throttle_time_ms)
    partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V4
    with_replica = version >= 11
    flexible = version >= FIRST_FLEXIBLE_VERSION
    # The length forms (module docstring): an array's count or a string's / the records'
    # length, and null; compact (N + 1, 0 = null) from the first flexible version.
    length = write_compact_length if flexible else INT32.pack
    null = COMPACT_NULL if flexible else INT32.pack(-1)
    tags = NO_TAGS if flexible else b""
    chunks: list[bytes | Records] = []
    buf = bytearray(4)  # size prefix, patched at the end
    if flexible:
        buf += _TOP_V12.pack(header.correlation_id, throttle_time_ms, error_code, session_id)
    elif version >= 7:
        buf += _TOP_V7.pack(header.correlation_id, throttle_time_ms, error_code, session_id)
    else:
        buf += _TOP_V4.pack(header.correlation_id, throttle_time_ms)
    pieces: list[bytearray | Records] = []
    size = 0
    try:
        buf += length(len(topics))
        for topic in topics:
            name = topic.topic.encode("utf-8")
            buf += length(len(name)) if flexible else INT16.pack(len(name))
            buf += name
            buf += length(len(topic.partitions))
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
                    buf += null
                else:
                    buf += length(len(aborted))
                    for producer_id, first_offset in aborted:
                        buf += _ABORTED.pack(producer_id, first_offset)
                        buf += tags
                if with_replica:
                    buf += INT32.pack(p.preferred_read_replica)
                records = p.records
                if records is None:
                    buf += null
                else:
                    records_size = _records_size(records)
                    buf += length(records_size)
                    if records_size:
                        # Cut here: the records go out as they are, between two header pieces.
                        pieces.append(buf)
                        pieces.append(records)
                        size += len(buf) + records_size
                        buf = bytearray()
                if flexible:
                    diverging = p.diverging_epoch
                    if diverging is None:
                        buf += NO_TAGS
                    else:
                        buf += _DIVERGING.pack(1, 0, 13, diverging[0], diverging[1], 0)
            buf += tags  # the topic's
        buf += tags  # the response's
    except struct.error as exc:
        raise LocalProtocolError(f"Fetch response value out of range: {exc}") from exc
    pieces.append(buf)
    size += len(buf)
    first = pieces[0]
    assert isinstance(first, bytearray)
    INT32.pack_into(first, 0, size - 4)
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
    buf = bytearray(INT32.pack(0))  # size prefix, patched below
    buf += INT32.pack(correlation_id)
    if version >= 1:
        buf += INT32.pack(throttle_time_ms)
    try:
        buf += INT32.pack(len(topics))
        for topic in topics:
            name = topic.topic.encode("utf-8")
            buf += INT16.pack(len(name))
            buf += name
            buf += INT32.pack(len(topic.partitions))
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
                    buf += INT32.pack(-1)
                else:
                    buf += INT32.pack(len(converted))
                    buf += converted
    except struct.error as exc:
        raise LocalProtocolError(f"Fetch response value out of range: {exc}") from exc
    INT32.pack_into(buf, 0, len(buf) - 4)
    return EncodedFetchResponse([bytes(buf)], len(buf))
