"""The few Kafka primitive types the codec reads and writes by hand.

kio reads and writes message bodies; the codec itself only touches the frame size prefix, the
request and response headers, the Fetch response around its record bytes, and the array
counts it checks before kio allocates. They need:

    INT16 / INT32 / INT64      big-endian, two's complement (``struct`` ``>h``, ``>i``, ``>q``)
    UNSIGNED_VARINT            7 bits a byte, least significant group first, high bit set on
                               every byte but the last; at most 5 bytes for 32-bit values
    STRING                     INT16 length N (-1 = null when nullable), then N bytes of UTF-8
    COMPACT_STRING / ARRAY     UNSIGNED_VARINT N + 1 (0 = null), then N bytes / N items
    TAGGED_FIELDS              UNSIGNED_VARINT count, then per field: tag, size, size bytes

Readers take ``(buffer, pos, end)`` and return ``(value, new_pos)``; they raise
``RemoteProtocolError`` when the bytes end early, because everything they read came from a peer.
"""

from __future__ import annotations

import struct
from typing import Final

from .errors import RemoteProtocolError

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
#: An empty TAGGED_FIELDS section (count 0), which closes every struct of a flexible message
#: the hand-written encoders write.
NO_TAGS: Final = b"\x00"
#: A null compact ARRAY / STRING / BYTES: length 0.
COMPACT_NULL: Final = b"\x00"

# Kafka's ByteUtils.readUnsignedVarint rejects varints longer than 5 bytes; so do we, which also
# bounds the loop below whatever the peer sends.
_MAX_UVARINT_BYTES: Final = 5


def read_uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read an UNSIGNED_VARINT (32-bit) at ``pos``; return ``(value, new_pos)``."""
    value = 0
    shift = 0
    for i in range(_MAX_UVARINT_BYTES):
        if pos + i >= end:
            raise RemoteProtocolError("truncated unsigned varint")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise RemoteProtocolError("unsigned varint longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an UNSIGNED_VARINT."""
    if value < 0:
        raise ValueError(f"unsigned varint must be >= 0, got {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE: Final = tuple(bytes((n,)) for n in range(0x80))


def write_compact_length(n: int) -> bytes:
    """A compact ARRAY's count or STRING's / BYTES' length ``n``: UNSIGNED_VARINT ``n + 1``
    (a lookup below 127, which nearly every length is: encoders write several per item)."""
    return _ONE_BYTE[n + 1] if 0 <= n < 0x7F else write_uvarint(n + 1)


def read_compact_length(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A compact count or length at ``pos`` (UNSIGNED_VARINT N + 1): ``(N, new_pos)``, N -1
    for null. One byte, the usual, is read inline."""
    if pos < end and (byte := buf[pos]) < 0x80:
        return byte - 1, pos + 1
    n, pos = read_uvarint(buf, pos, end)
    return n - 1, pos


def skip_tagged_fields(buf: bytes | memoryview, pos: int, end: int) -> int:
    """Skip a TAGGED_FIELDS section whose tags we do not interpret; return the new position.
    An empty one (count 0), the usual, is skipped inline."""
    if pos < end and buf[pos] == 0:
        return pos + 1
    count, pos = read_uvarint(buf, pos, end)
    # Every tagged field takes at least 2 bytes (tag and size), so a larger count is a lie and
    # we refuse it before looping.
    if count * 2 > end - pos:
        raise RemoteProtocolError(f"tagged field count {count} exceeds the {end - pos} bytes left")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise RemoteProtocolError(f"tagged field of {size} bytes exceeds the bytes left")
        pos += size
    return pos
