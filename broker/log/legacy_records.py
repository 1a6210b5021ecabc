"""Message sets of magic 0 and 1 (Kafka's log format before 0.11), converted to and from
magic-2 record batches: what old producers send (Produce v0–v2) and old consumers read
(Fetch v0–v3). Kafka 3.x converts the same way (``LogValidator`` up, ``RecordsUtil.
downConvert`` down); the log itself only ever holds magic-2 batches.

A message set is a sequence of entries, big-endian, with no count::

    Offset      int64    absolute (or, inside a magic-1 wrapper, relative: see below)
    MessageSize int32    bytes that follow
    Crc         uint32   CRC-32 (IEEE, zlib's) of Magic .. end
    Magic       int8     0 or 1
    Attributes  int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
                         bit 3 timestamp type (magic 1: 0 CreateTime, 1 LogAppendTime)
    Timestamp   int64    magic 1 only
    Key         bytes    int32 length, -1 null
    Value       bytes    int32 length, -1 null

A compressed set is one *wrapper* message whose value is the compressed inner message set
(same magic, no key). In a magic-1 wrapper the inner offsets are relative (0 .. n-1) and the
wrapper's offset is the absolute offset of the last inner message, so a reader computes
``wrapper - last_relative + relative``; a LogAppendTime wrapper gives every inner message its
timestamp. In a magic-0 wrapper the inner offsets are absolute. Snappy is written with the
xerial framing the Java clients use (both framings are read); LZ4 is the frame format (magic 1,
KIP-57). zstd does not exist below magic 2 (KIP-110): a batch of it cannot be down-converted
(Kafka answers UNSUPPORTED_COMPRESSION_TYPE, see ``codecs``).

Up-conversion (:func:`to_record_batch`): every message's CRC is checked (``CorruptRecordError``,
Kafka's CORRUPT_MESSAGE), wrappers are opened (an inner message of another magic, a nested
wrapper or a keyed wrapper is ``InvalidRecordError``, as in ``LogValidator``), and the
messages become **one** magic-2 batch, compressed with the set's codec, offsets 0 .. n-1 (the
log assigns the real ones, as it does for any batch), CreateTime timestamps as sent (magic 0:
none, -1 = NO_TIMESTAMP), no producer id. Headers do not exist below magic 2.

Down-conversion (:func:`to_message_set`): control batches are skipped, headers dropped, each
batch becomes its messages (uncompressed) or one wrapper (compressed with the batch's codec;
LZ4 only at magic 1 — Kafka's magic-0 LZ4 has a broken frame checksum, so magic 0 gets LZ4
batches uncompressed), offsets and (magic 1) timestamps kept.

Pure functions of their arguments; thread-safe.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import cramjam

from sluice.broker.log.errors import CorruptRecordError, InvalidRecordError
from sluice.broker.log.record_batch import NO_TIMESTAMP, iter_batches
from sluice.broker.log.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decode_batch,
    decompress,
    encode_batch,
)

__all__ = [
    "LegacyMessage",
    "read_message_set",
    "write_message_set",
    "to_record_batch",
    "to_message_set",
    "codecs",
]

LOG_OVERHEAD: Final = 12  # Offset + MessageSize
_PREFIX: Final = struct.Struct(">qi")  # Offset, MessageSize
_CRC: Final = struct.Struct(">I")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
# Crc, Magic, Attributes, Key length + Value length: the smallest magic-0 message.
_MIN_SIZE: Final = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}
_CODEC_MASK: Final = 0x07
_LOG_APPEND_TIME_BIT: Final = 0x08
_XERIAL_HEADER: Final = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024  # the Java SnappyOutputStream's default block size


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One message, as sent or stored: ``offset`` is the entry's Offset field (inside a
    wrapper, as the wrapper holds it); ``codec`` is set on wrappers only."""

    offset: int
    magic: int
    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP  # magic 1
    log_append_time: bool = False  # magic 1, timestamp type bit
    codec: int = NONE


def _blob(buf: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError(f"message {what} length needs 4 bytes, {end - pos} left")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise CorruptRecordError(f"message {what} length {n}: expected -1 .. {end - pos}")
    return bytes(buf[pos : pos + n]), pos + n


def _entries(data: bytes | bytearray | memoryview) -> Iterator[LegacyMessage]:
    """Each entry of one level of a message set, CRC checked; trailing bytes are an error."""
    buf = memoryview(data)
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"message set entry at {pos}: needs {LOG_OVERHEAD} header bytes, {end - pos} left"
            )
        offset, size = _PREFIX.unpack_from(buf, pos)
        start = pos + LOG_OVERHEAD
        if size < _MIN_SIZE[0] or size > end - start:
            raise CorruptRecordError(
                f"message at offset {offset}: size {size} is not in {_MIN_SIZE[0]} .. {end - start}"
            )
        stop = start + size
        (crc,) = _CRC.unpack_from(buf, start)
        actual = zlib.crc32(buf[start + 4 : stop])
        if crc != actual:
            raise CorruptRecordError(
                f"message at offset {offset}: CRC {crc:#010x} stored, {actual:#010x} computed"
            )
        magic, attributes = buf[start + 4], buf[start + 5]
        if magic not in (0, 1):
            raise CorruptRecordError(f"message at offset {offset}: magic {magic}, expected 0 or 1")
        if size < _MIN_SIZE[magic]:
            raise CorruptRecordError(
                f"message at offset {offset}: size {size} under magic {magic}'s {_MIN_SIZE[magic]}"
            )
        pos = start + 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _I64.unpack_from(buf, pos)
            pos += 8
        key, pos = _blob(buf, pos, stop, "key")
        value, pos = _blob(buf, pos, stop, "value")
        if pos != stop:
            raise CorruptRecordError(
                f"message at offset {offset}: {stop - pos} bytes after its value"
            )
        codec = attributes & _CODEC_MASK
        if codec > LZ4:
            raise InvalidRecordError(
                f"message at offset {offset}: codec {codec}, expected 0-3 below magic 2"
            )
        yield LegacyMessage(
            offset,
            magic,
            key,
            value,
            timestamp,
            bool(magic == 1 and attributes & _LOG_APPEND_TIME_BIT),
            codec,
        )
        pos = stop


def _inner(wrapper: LegacyMessage) -> list[LegacyMessage]:
    if wrapper.key is not None:
        raise InvalidRecordError(
            f"wrapper message at offset {wrapper.offset}: expected no key, found one"
        )
    if wrapper.value is None:
        raise InvalidRecordError(
            f"wrapper message at offset {wrapper.offset}: expected compressed messages, found null"
        )
    inner = list(_entries(decompress(wrapper.codec, wrapper.value)))
    if not inner:
        raise InvalidRecordError(f"wrapper message at offset {wrapper.offset} holds no messages")
    for message in inner:
        if message.magic != wrapper.magic:
            raise InvalidRecordError(
                f"inner message at offset {message.offset}: magic {message.magic}, "
                f"expected the wrapper's {wrapper.magic}"
            )
        if message.codec != NONE:
            raise InvalidRecordError(
                f"inner message at offset {message.offset}: expected no codec, found "
                f"{message.codec} (nested compression)"
            )
    return inner


def read_message_set(data: bytes | bytearray | memoryview) -> list[LegacyMessage]:
    """Every message of a message set, wrappers opened: absolute offsets and effective
    timestamps (a LogAppendTime wrapper's for its inner messages). Raises
    ``CorruptRecordError`` (bad CRC, truncation) or ``InvalidRecordError`` (a malformed
    wrapper)."""
    return _read(data)[0]


def _read(data: bytes | bytearray | memoryview) -> tuple[list[LegacyMessage], int]:
    """``read_message_set`` and the set's codec (its first wrapper's; NONE if it has none)."""
    out: list[LegacyMessage] = []
    codec = NONE
    for entry in _entries(data):
        if entry.codec == NONE:
            out.append(entry)
            continue
        codec = codec or entry.codec
        inner = _inner(entry)
        base = entry.offset - inner[-1].offset if entry.magic == 1 else 0
        append_time = entry.magic == 1 and entry.log_append_time
        for m in inner:
            out.append(
                LegacyMessage(
                    base + m.offset,
                    m.magic,
                    m.key,
                    m.value,
                    entry.timestamp if append_time else m.timestamp,
                    append_time or m.log_append_time,
                )
            )
    return out, codec


def _entry(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
           key: bytes | None, value: bytes | None) -> None:  # fmt: skip
    start = len(out)
    out += _PREFIX.pack(offset, 0)
    out += b"\x00\x00\x00\x00"  # CRC, below
    out.append(magic)
    out.append(attributes)
    if magic == 1:
        out += _I64.pack(timestamp)
    for blob in (key, value):
        if blob is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(blob))
            out += blob
    _I32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    _CRC.pack_into(out, start + LOG_OVERHEAD, zlib.crc32(memoryview(out)[start + 16 :]))


def _xerial(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def write_message_set(
    messages: list[tuple[int, int, bytes | None, bytes | None]],
    *,
    magic: int,
    codec: int = NONE,
    log_append_time: bool = False,
) -> bytes:
    """A message set of ``(offset, timestamp, key, value)`` messages (absolute offsets),
    as one wrapper if ``codec`` is set. ``timestamp`` is ignored at magic 0."""
    if magic not in (0, 1):
        raise ValueError(f"expected magic 0 or 1, found {magic}")
    if codec not in (NONE, GZIP, SNAPPY, LZ4) or (codec == LZ4 and magic == 0):
        raise ValueError(f"expected a codec of magic {magic}, found {codec}")
    time_bit = _LOG_APPEND_TIME_BIT if magic == 1 and log_append_time else 0
    out = bytearray()
    if codec == NONE:
        for offset, timestamp, key, value in messages:
            _entry(out, offset, magic, time_bit, timestamp, key, value)
        return bytes(out)
    if not messages:
        return b""
    first = messages[0][0]
    inner = bytearray()
    for offset, timestamp, key, value in messages:
        _entry(inner, offset - first if magic == 1 else offset, magic, time_bit, timestamp,
               key, value)  # fmt: skip
    payload = _xerial(bytes(inner)) if codec == SNAPPY else compress(codec, bytes(inner))
    max_timestamp = max(m[1] for m in messages)
    _entry(out, messages[-1][0], magic, codec | time_bit, max_timestamp, None, payload)
    return bytes(out)


def to_record_batch(data: bytes | bytearray | memoryview) -> bytes:
    """One magic-2 batch holding every message of a Produce v0–v2 message set (see the
    module docstring); ``b""`` for an empty set."""
    messages, codec = _read(data)
    if not messages:
        return b""
    return encode_batch(
        [(m.key, m.value) for m in messages],
        timestamps=[m.timestamp if m.magic == 1 else NO_TIMESTAMP for m in messages],
        codec=codec,
    )


def codecs(batches: bytes | bytearray | memoryview) -> set[int]:
    """The codecs of the (non-control) magic-2 batches in ``batches``."""
    return {h.compression for h in iter_batches(batches) if not h.is_control}


def to_message_set(batches: bytes | bytearray | memoryview, magic: int) -> bytes:
    """The magic-0/1 message set of a sequence of magic-2 batches (see the module
    docstring). A zstd batch is ``ValueError``: check :func:`codecs` first."""
    out = bytearray()
    for header in iter_batches(batches):
        if header.is_control:
            continue
        codec = header.compression
        if codec == ZSTD:
            raise ValueError(f"batch {header.base_offset} is zstd, which magic {magic} lacks")
        if codec == LZ4 and magic == 0:
            codec = NONE
        records = decode_batch(batches, header.position)
        if not records:
            continue
        out += write_message_set(
            [(r.offset, r.timestamp, r.key, r.value) for r in records],
            magic=magic,
            codec=codec,
            log_append_time=bool(header.timestamp_type),
        )
    return bytes(out)
