"""Rewriting one batch for the log cleaner: Kafka's ``MemoryRecords.filterTo``, per batch.

The cleaner decides, per batch, a :class:`BatchRetention` and, per record, whether it stays;
:func:`filter_batch` then returns the bytes to write in the cleaned segment:

* every record kept and no delete horizon to set — the original bytes, untouched;
* some records kept — a new batch with the same BaseOffset, LastOffsetDelta (so the last
  sequence of an idempotent producer survives), PartitionLeaderEpoch, ProducerId,
  ProducerEpoch, BaseSequence, transactional and control bits and codec (the records are
  recompressed with it); RecordCount is the number kept; each kept record keeps its
  OffsetDelta, so **no offset changes**. FirstTimestamp is the first kept record's
  timestamp, or the delete horizon (below); MaxTimestamp the largest kept one (the
  original for LogAppendTime batches);
* no record kept and ``RETAIN_EMPTY`` — an empty batch (RecordCount 0, no codec) with the
  original offsets and producer fields, FirstTimestamp = MaxTimestamp = the original
  MaxTimestamp (Kafka's ``writeEmptyHeader``);
* otherwise nothing (``None``).

Delete horizon (KIP-534): the first cleaning that keeps a tombstone (a record with a null
value) stamps its batch with attributes bit 6 and sets FirstTimestamp to ``now +
delete.retention.ms``; timestamp deltas are rewritten from that base, so every record's
timestamp is unchanged. A later cleaning drops the batch's tombstones once ``now`` passes
the horizon. Control batches get the same stamp once their transaction's data is gone
(``contains_marker_for_empty_txn``, Kafka's ``BatchRetentionResult``; the cleaner decides it
with ``cleaned_transactions``), and the cleaner drops them after it.

:func:`check_keys` is the append-time rule of a compacted log: every record has a key; it names
every record that has none (``KeylessRecordsError.record_errors``, Kafka's KIP-467 record errors).

Records are never fully decoded here: a kept record's bytes are copied with only its
TimestampDelta varint rewritten. All functions are pure and thread-safe.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from crc32c import crc32c

from sluice.broker.log.compaction_errors import NullKeyOnCompactedTopicError
from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.record_batch import (
    COMPRESSION_MASK,
    CRC_START,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
)
from sluice.broker.log.records import compress, decompress, read_varint, write_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


class BatchRetention(enum.Enum):
    """What happens to a batch whatever its records (Kafka's ``BatchRetention``)."""

    DELETE = "delete"  # drop the whole batch
    DELETE_EMPTY = "delete_empty"  # drop it if no record is kept
    RETAIN_EMPTY = "retain_empty"  # keep at least an empty batch (producer state, last offset)


class RawRecord(NamedTuple):
    """One record of a batch, located in the batch's (decompressed) record bytes."""

    offset: int
    timestamp: int  # FirstTimestamp + TimestampDelta (the record's own CreateTime)
    key: bytes | None
    has_value: bool
    start: int  # first byte of the record (its Length varint)
    body: int  # first byte after its TimestampDelta varint
    end: int


def record_bytes(batch: memoryview, header: BatchHeader) -> bytes | memoryview:
    """The record section of a validated batch, decompressed if it has a codec."""
    payload = batch[HEADER_SIZE : header.size]
    return decompress(header.compression, payload) if header.compression else payload


def iter_records(data: bytes | memoryview, header: BatchHeader) -> Iterator[RawRecord]:
    """The records of a batch whose record section is ``data``; keys only, values skipped."""
    pos = 0
    base, first_ts = header.base_offset, header.first_timestamp
    for _ in range(header.record_count):
        start = pos
        length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise CorruptRecordError(
                f"record at {start} in batch {base}: length {length} runs past the "
                f"{len(data)} bytes of records"
            )
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos)
        body = pos
        offset_delta, pos = read_varint(data, pos)
        key_len, pos = read_varint(data, pos)
        key = None if key_len < 0 else bytes(data[pos : pos + key_len])
        pos += max(key_len, 0)
        value_len, pos = read_varint(data, pos)
        yield RawRecord(
            base + offset_delta, first_ts + ts_delta, key, value_len >= 0, start, body, end
        )
        pos = end
    if pos != len(data):
        raise CorruptRecordError(
            f"batch {base}: RecordCount {header.record_count} leaves {len(data) - pos} bytes unread"
        )


class RecordError(NamedTuple):
    """One refused record of a produced batch, as Kafka's ``RecordError`` (KIP-467): its index
    in the batch (0 for the first record) and why it was refused."""

    batch_index: int
    message: str


class KeylessRecordsError(NullKeyOnCompactedTopicError):
    """The records of a batch for a compacted log that have no key, each named
    (``record_errors``, in batch order), so Produce v8+ can answer them per record as Kafka's
    ``RecordValidationException`` does; the message says how many and names the first three."""

    def __init__(self, message: str, record_errors: tuple[RecordError, ...]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


def check_keys(buf: bytes | bytearray | memoryview, headers: list[BatchHeader], name: str) -> None:
    """Raise :class:`KeylessRecordsError` naming every record of these batches (validated,
    positions relative to ``buf``) that has no key; each batch's records are indexed from 0,
    as Kafka's ``LogValidator`` indexes them."""
    view = memoryview(buf)
    errors: list[RecordError] = []
    for header in headers:
        batch = view[header.position : header.position + header.size]
        for index, record in enumerate(iter_records(record_bytes(batch, header), header)):
            if record.key is None:
                errors.append(
                    RecordError(
                        index,
                        f"Compacted topic cannot accept message without key in topic "
                        f"partition {name}.",
                    )
                )
    if errors:
        first = ", ".join(str(e.batch_index) for e in errors[:3])
        raise KeylessRecordsError(
            f"{name}: a compacted topic expects a key on every record, found {len(errors)} "
            f"without one (batch index {first}{', ...' if len(errors) > 3 else ''})",
            tuple(errors),
        )


def filter_batch(
    batch: memoryview,
    header: BatchHeader,
    retention: BatchRetention,
    keep: Callable[[RawRecord], bool],
    *,
    now_ms: int,
    delete_retention_ms: int,
    contains_marker_for_empty_txn: bool = False,
) -> tuple[bytes | memoryview | None, int]:
    """The bytes that replace ``batch`` in the cleaned segment (None: dropped) and the number
    of records kept. ``keep`` is asked about each record unless ``retention`` is DELETE."""
    if retention is BatchRetention.DELETE:
        return None, 0
    data = record_bytes(batch, header)
    kept: list[RawRecord] = []
    contains_tombstones = False
    for record in iter_records(data, header):
        if keep(record):
            kept.append(record)
            contains_tombstones = contains_tombstones or not record.has_value
    set_horizon = (
        contains_tombstones or contains_marker_for_empty_txn
    ) and header.delete_horizon_ms is None
    if kept and len(kept) == header.record_count and not set_horizon:
        return batch, len(kept)
    if kept:
        horizon = now_ms + delete_retention_ms if set_horizon else header.delete_horizon_ms
        return _rebuild(data, header, kept, horizon), len(kept)
    if retention is BatchRetention.RETAIN_EMPTY:
        return empty_batch(header), 0
    return None, 0


def _rebuild(
    data: bytes | memoryview, header: BatchHeader, kept: list[RawRecord], horizon: int | None
) -> bytes:
    base_ts = kept[0].timestamp if horizon is None else horizon
    body = bytearray()
    for record in kept:
        # Length, Attributes, TimestampDelta change; the rest of the record is copied.
        rec = bytearray(b"\x00")  # attributes (unused, 0)
        write_varint(rec, record.timestamp - base_ts)
        rec += data[record.body : record.end]
        write_varint(body, len(rec))
        body += rec
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    max_ts = header.max_timestamp if log_append_time else max(r.timestamp for r in kept)
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if horizon is not None:
        attributes |= DELETE_HORIZON_BIT
    payload = compress(header.compression, bytes(body))
    return _pack(header, attributes, base_ts, max_ts, len(kept), payload)


def empty_batch(header: BatchHeader) -> bytes:
    """An empty batch holding ``header``'s offsets and producer fields (no codec)."""
    attributes = header.attributes & ~COMPRESSION_MASK & ~DELETE_HORIZON_BIT
    return _pack(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _pack(
    header: BatchHeader, attributes: int, first_ts: int, max_ts: int, count: int, payload: bytes
) -> bytes:
    out = bytearray(HEADER_SIZE) + payload
    _HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch, MAGIC_V2, 0, attributes, header.last_offset_delta,
        first_ts, max_ts, header.producer_id, header.producer_epoch, header.base_sequence, count,
    )  # fmt: skip
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
