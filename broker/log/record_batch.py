"""The record batch (magic 2): a read-only view of its header, validation, and the
header rewrite that assigns offsets.

Byte layout (big-endian; offsets from the start of the batch)::

     0  BaseOffset            int64    ┐ LOG_OVERHEAD (12): not covered by the CRC;
     8  Length                int32    ┘ Length counts the bytes after this field
    12  PartitionLeaderEpoch  int32      not covered by the CRC: the broker writes it
    16  Magic                 int8       must be 2
    17  CRC                   uint32     CRC-32C (Castagnoli) of bytes 21 .. end
    21  Attributes            int16      bits 0-2 codec, 3 timestamp type,
                                         4 transactional, 5 control,
                                         6 delete horizon (KIP-534: set by the
                                         log cleaner, FirstTimestamp then holds
                                         the time its tombstones may go)
    23  LastOffsetDelta       int32
    27  FirstTimestamp        int64
    35  MaxTimestamp          int64
    43  ProducerId            int64
    51  ProducerEpoch         int16
    53  BaseSequence          int32
    57  RecordCount           int32
    61  Records ...                      one compressed block when a codec is set

Invariants checked by :func:`validate_batch`: the batch fits in the buffer, ``Length`` is at
least 49 (a header with no records), magic is 2, the CRC matches, ``LastOffsetDelta`` and
``RecordCount`` are not negative. The broker assigns the base offset and leader epoch by
rewriting bytes 0–7 and 12–15 only (:func:`assign_offsets`); since the CRC does not cover
them, the records are never re-encoded on the hot path — the bytes producers sent are the
bytes on disk and the bytes consumers receive.

All functions here are pure and thread-safe: they read or write only the buffer passed in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from crc32c import crc32c

from sluice.broker.log.errors import CorruptRecordError, InvalidRecordError

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # BaseOffset + Length
HEADER_SIZE = 61
MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # a batch with no record bytes at all
CRC_START = 21  # the CRC covers Attributes to the end of the batch

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # BaseOffset, Length
_EPOCH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

# Below this many bytes a copy of the CRC-covered bytes is cheaper than a memoryview slice.
_SMALL_BATCH = 1024
# ``BatchHeader`` built from a ready tuple of its 14 fields, skipping the Python ``__new__``.
_new_header = tuple.__new__

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class BatchHeader(NamedTuple):
    """The parsed 61-byte header of one batch, plus where the batch stood in its buffer."""

    position: int  # byte position of the batch in the buffer (or file) it was read from
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Whole batch size in bytes, log overhead included."""
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones (KIP-534), or None if no
        cleaning has stamped it yet."""
        return self.first_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at 2^31 (Kafka's DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def peek_size(buf: bytes | bytearray | memoryview, position: int = 0) -> int | None:
    """Total size of the batch at ``position`` from its Length field, or ``None`` when fewer
    than 12 bytes remain. The size is not checked against the buffer."""
    if len(buf) - position < LOG_OVERHEAD:
        return None
    _, length = _PREFIX.unpack_from(buf, position)
    return int(length) + LOG_OVERHEAD


def parse_header(
    buf: bytes | bytearray | memoryview, position: int = 0, file_position: int | None = None
) -> BatchHeader:
    """Parse the header at ``position`` without checking the CRC or the body's presence.

    ``file_position``, when given, is recorded as the header's position instead of
    ``position`` (for a block read from the middle of a file).
    """
    where = position if file_position is None else file_position
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"expected a {HEADER_SIZE}-byte batch header at position {where}, "
            f"found {max(len(buf) - position, 0)} bytes"
        )
    return BatchHeader(where, *_HEADER.unpack_from(buf, position))


def validate_batch(
    buf: bytes | bytearray | memoryview, position: int = 0, file_position: int | None = None
) -> BatchHeader:
    """Parse and fully validate the batch at ``position``; return its header.

    Raises :class:`CorruptRecordError` naming the position, the field, what was expected and
    what was found.
    """
    # Every produced batch passes here: the checks read the unpacked tuple and the header is
    # built once, at the end, with ``tuple.__new__`` (a NamedTuple's own ``__new__`` is a
    # Python function taking 14 arguments, about twice as slow).
    where = position if file_position is None else file_position
    size = len(buf)
    if size - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"expected a {HEADER_SIZE}-byte batch header at position {where}, "
            f"found {max(size - position, 0)} bytes"
        )
    fields = _HEADER.unpack_from(buf, position)
    length = fields[1]
    if length < MIN_LENGTH:
        raise CorruptRecordError(
            f"batch at position {where}: expected Length >= {MIN_LENGTH}, found {length}"
        )
    end = position + length + LOG_OVERHEAD
    if end > size:
        raise CorruptRecordError(
            f"batch at position {where}: Length says {length + LOG_OVERHEAD} bytes, "
            f"only {size - position} remain"
        )
    if fields[3] != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {where}: expected magic {MAGIC_V2}, found {fields[3]}"
        )
    if fields[6] < 0 or fields[12] < 0:
        raise CorruptRecordError(
            f"batch at position {where}: expected non-negative LastOffsetDelta and "
            f"RecordCount, found {fields[6]} and {fields[12]}"
        )
    if end - position <= _SMALL_BATCH and not isinstance(buf, memoryview):
        covered: bytes | bytearray | memoryview = buf[position + CRC_START : end]  # a small copy
    else:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        covered = view[position + CRC_START : end]
    actual = crc32c(covered)
    if actual != fields[4]:
        raise CorruptRecordError(
            f"batch at position {where}: CRC-32C mismatch, header says "
            f"{fields[4]:#010x}, bytes give {actual:#010x}"
        )
    return _new_header(BatchHeader, (where, *fields))


def iter_batches(
    buf: bytes | bytearray | memoryview, position: int = 0, end: int | None = None
) -> Iterator[BatchHeader]:
    """Validate and yield every batch in ``buf[position:end]``; raise at the first bad one.

    Trailing bytes that do not make a whole batch are an error too: a producer's record set
    and a segment read are both sequences of whole batches.
    """
    stop = len(buf) if end is None else end
    view = memoryview(buf)[:stop]
    while position < stop:
        header = validate_batch(view, position)
        yield header
        position += header.size


def valid_prefix(buf: bytes | bytearray | memoryview, position: int = 0) -> tuple[int, str | None]:
    """Length of the longest prefix of whole valid batches from ``position``, and why the
    scan stopped (``None`` when every byte belonged to a valid batch). Used by recovery."""
    start = position
    while position < len(buf):
        try:
            header = validate_batch(buf, position)
        except CorruptRecordError as exc:
            return position - start, str(exc)
        position += header.size
    return position - start, None


def assign_offsets(
    buf: bytearray | memoryview, position: int, base_offset: int, epoch: int
) -> None:
    """Rewrite BaseOffset and PartitionLeaderEpoch of the batch at ``position`` in place.

    Neither field is covered by the CRC, so the batch stays valid and nothing else moves.
    """
    _BASE_OFFSET.pack_into(buf, position, base_offset)
    _EPOCH.pack_into(buf, position + 12, epoch)


def compute_crc(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """CRC-32C of the batch at ``position`` as the header should hold it."""
    size = peek_size(buf, position)
    if size is None:
        raise CorruptRecordError(f"no batch at position {position}")
    return int(crc32c(memoryview(buf)[position + CRC_START : position + size]))


def stamp_log_append_time(buf: bytearray, h: BatchHeader, append_time: int) -> BatchHeader:
    """Set the LogAppendTime bit and MaxTimestamp, then the CRC they are covered by."""
    attributes = h.attributes | TIMESTAMP_TYPE_BIT
    _ATTRIBUTES.pack_into(buf, h.position + 21, attributes)
    _TIMESTAMP.pack_into(buf, h.position + 35, append_time)
    end = h.position + h.size
    crc = crc32c(memoryview(buf)[h.position + CRC_START : end])
    _CRC.pack_into(buf, h.position + 17, crc)
    return h._replace(attributes=attributes, max_timestamp=append_time, crc=crc)


def assign_leader_offsets(
    buf: bytearray, headers: list[BatchHeader], next_offset: int, leader_epoch: int, *,
    allow_control: bool, clock: Callable[[], int] | None,
) -> tuple[list[BatchHeader], int]:  # fmt: skip
    """A leader's rewrite of validated batches in place: consecutive offsets from
    ``next_offset``, ``leader_epoch``, and with ``clock`` (LogAppendTime) its time as each
    batch's MaxTimestamp. Returns the new headers and the last time stamped (-1 for none).

    Raises :class:`InvalidRecordError` for a control batch unless ``allow_control`` (a
    coordinator's marker), :class:`CorruptRecordError` unless RecordCount ==
    LastOffsetDelta + 1 > 0; ``buf`` may be partly rewritten then (the caller drops it)."""
    append_time = -1
    rewritten = []
    for h in headers:
        if h.attributes & CONTROL_BIT and not allow_control:
            raise InvalidRecordError(
                f"batch at position {h.position}: clients may not append control batches"
            )
        if h.record_count != h.last_offset_delta + 1 or h.record_count == 0:
            raise CorruptRecordError(
                f"batch at position {h.position}: expected RecordCount = "
                f"LastOffsetDelta + 1 > 0, found RecordCount {h.record_count} and "
                f"LastOffsetDelta {h.last_offset_delta}"
            )
        assign_offsets(buf, h.position, next_offset, leader_epoch)
        # Positional construction: NamedTuple._replace is several times slower.
        h = _new_header(BatchHeader, (h[0], next_offset, h[2], leader_epoch, *h[4:]))
        if clock is not None:
            append_time = clock()
            h = stamp_log_append_time(buf, h, append_time)
        rewritten.append(h)
        next_offset += h.last_offset_delta + 1
    return rewritten, append_time
