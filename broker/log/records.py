"""Records inside a magic-2 batch: encoding (for tests, tools and control records) and
decoding (for timestamp lookups and tools). The broker's append and fetch paths never call
this module: they move whole batches as bytes.

Record layout (varints are zig-zag, as protobuf's ``sint``)::

    Length          varint   bytes after this field
    Attributes      int8     unused, 0
    TimestampDelta  varlong  from the batch's FirstTimestamp
    OffsetDelta     varint   from the batch's BaseOffset
    KeyLength       varint   -1 for a null key
    Key             bytes
    ValueLength     varint   -1 for a null value
    Value           bytes
    HeaderCount     varint
    Headers         [HeaderKeyLength varint, HeaderKey utf-8, HeaderValueLength varint,
                     HeaderValue bytes (-1 null)]

With a codec (attributes bits 0–2), everything after RecordCount is one compressed block:
gzip, snappy (raw, or the xerial framing Kafka's Java producer writes), lz4 (the frame
format) or zstd. All functions are pure and thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import cramjam
from crc32c import crc32c

from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.record_batch import (
    CONTROL_BIT,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    validate_batch,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"

_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True)
class Record:
    """One decoded record. ``offset`` and ``timestamp`` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


# -- varints -------------------------------------------------------------------------------


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` zig-zag encoded (valid for 64-bit signed values)."""
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return (value, next position)."""
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError(f"varint runs past the end of the records at {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes ending at {pos}")
    return (result >> 1) ^ -(result & 1), pos


# -- compression ---------------------------------------------------------------------------


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"expected a codec in {sorted(CODEC_NAMES)}, found {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            raw = bytes(data)
            if raw.startswith(_XERIAL_MAGIC):
                return _xerial_decompress(raw)
            return bytes(cramjam.snappy.decompress_raw(raw))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{CODEC_NAMES[codec]} block does not decompress: {exc}") from exc
    raise CorruptRecordError(f"expected a codec in {sorted(CODEC_NAMES)}, found {codec}")


def _xerial_decompress(raw: bytes) -> bytes:
    # Xerial framing: 8-byte magic, 4-byte version, 4-byte compatible version, then
    # blocks of [int32 length][raw snappy block].
    pos = 16
    out = bytearray()
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        out += cramjam.snappy.decompress_raw(raw[pos : pos + n])
        pos += n
    return bytes(out)


# -- encoding ------------------------------------------------------------------------------


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray(b"\x00")  # attributes
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(headers))
    for hkey, hvalue in headers:
        hk = hkey.encode()
        write_varint(body, len(hk))
        body += hk
        if hvalue is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hvalue))
            body += hvalue
    write_varint(out, len(body))
    out += body


def encode_batch(
    records: Iterable[tuple[bytes | None, bytes | None]]
    | Iterable[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    timestamps: Sequence[int] | None = None,
    codec: int = NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Build one magic-2 batch from (key, value[, headers]) tuples, as a producer would."""
    items = [tuple(r) for r in records]
    if not items:
        raise ValueError("expected at least one record, found none")
    ts = list(timestamps) if timestamps is not None else [0] * len(items)
    if len(ts) != len(items):
        raise ValueError(f"expected {len(items)} timestamps, found {len(ts)}")
    first_ts = ts[0]
    body = bytearray()
    for i, item in enumerate(items):
        key, value = item[0], item[1]
        headers = item[2] if len(item) > 2 else ()
        _encode_record(body, i, ts[i] - first_ts, key, value, headers)  # type: ignore[arg-type]
    payload = compress(codec, bytes(body))
    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(HEADER_SIZE) + payload
    _HEADER.pack_into(
        out, 0, base_offset, length, leader_epoch, MAGIC_V2, 0, attributes, len(items) - 1,
        first_ts, max(ts), producer_id, producer_epoch, base_sequence, len(items),
    )  # fmt: skip
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# -- decoding ------------------------------------------------------------------------------


def decode_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> list[Record]:
    """Validate the batch at ``position`` and decode its records (decompressing if needed)."""
    header = validate_batch(buf, position)
    view = memoryview(buf)[position + HEADER_SIZE : position + header.size]
    data: bytes | memoryview = decompress(header.compression, view) if header.compression else view
    records = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise CorruptRecordError(
                f"record at {pos} in batch {header.base_offset}: length {length} runs past "
                f"the {len(data)} bytes of records"
            )
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos)
        off_delta, pos = read_varint(data, pos)
        blobs: list[bytes | None] = []
        for _ in range(2):
            n, pos = read_varint(data, pos)
            blobs.append(None if n < 0 else bytes(data[pos : pos + n]))
            pos += max(n, 0)
        count, pos = read_varint(data, pos)
        headers = []
        for _ in range(count):
            n, pos = read_varint(data, pos)
            hkey = bytes(data[pos : pos + n]).decode()
            pos += n
            n, pos = read_varint(data, pos)
            headers.append((hkey, None if n < 0 else bytes(data[pos : pos + n])))
            pos += max(n, 0)
        if pos != end:
            raise CorruptRecordError(
                f"record in batch {header.base_offset}: Length says it ends at {end}, "
                f"its fields end at {pos}"
            )
        timestamp = (
            header.max_timestamp if header.timestamp_type else header.first_timestamp + ts_delta
        )
        records.append(
            Record(header.base_offset + off_delta, timestamp, blobs[0], blobs[1], tuple(headers))
        )
    if pos != len(data):
        raise CorruptRecordError(
            f"batch {header.base_offset}: RecordCount {header.record_count} leaves "
            f"{len(data) - pos} bytes unread"
        )
    return records
