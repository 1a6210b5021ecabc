"""The records of ``__share_group_state`` in Kafka's binary schemas (``ShareSnapshotKey/Value``,
``ShareUpdateKey/Value``, Kafka's ``share-coordinator/src/main/resources/common/message``), so
that a tool reading the topic directly decodes what Sluice writes, and Sluice what Kafka writes.

A share-partition is one topic partition as one share group consumes it; its durable state is
its start offset, its state epoch, the leader epoch of the partition leader that wrote it, and
the in-flight records from the start offset on as *state batches* (a run of offsets with one
delivery state and one delivery count). Every key and value starts with an INT16: a key's is
the record *type* (0 a snapshot, 1 an update: Kafka's ``apiKey`` of the coordinator record), a
value's its schema version (0). Keys are not flexible: a string is an INT16 length then UTF-8.
Values are flexible: an array is an unsigned varint of count + 1, and every struct ends with
tagged fields (an unsigned varint count, then per field its tag, its size and its bytes; tags
this reader does not know are skipped)::

    key (type 0 ShareSnapshotKey, type 1 ShareUpdateKey)
        GroupId     STRING
        TopicId     UUID (16 bytes)
        Partition   INT32

    ShareSnapshotValue v0 (value of type 0)      ShareUpdateValue v0 (value of type 1)
        SnapshotEpoch    INT32                       SnapshotEpoch   INT32
        StateEpoch       INT32                       LeaderEpoch     INT32
        LeaderEpoch      INT32                       StartOffset     INT64 (-1: unchanged)
        StartOffset      INT64                       StateBatches    [StateBatch]
        CreateTimestamp  INT64                       tag 0 DeliveryCompleteCount INT32 (-1)
        WriteTimestamp   INT64
        StateBatches     [StateBatch]
        tag 0 DeliveryCompleteCount INT32 (default -1, Kafka 4.2's KIP-1226)

    StateBatch: FirstOffset INT64 · LastOffset INT64 · DeliveryState INT8 (0 available,
                2 acknowledged, 4 archived) · DeliveryCount INT16 · tagged fields

A snapshot is the whole state; an update changes it: its batches replace what they cover and a
start offset other than -1 moves the start (``apply``). A null value is a tombstone: the
share-partition's state was deleted. Both key types of one share-partition go to the same
partition of the topic, ``abs(java_hash("<group>:<topic id>:<partition>")) % partitions``
(Kafka's ``SharePartitionKey.asCoordinatorKey``, the topic id in Kafka's URL-safe base64), so
one partition's log, read in order, gives every share-partition's state there.

Pure; thread-safe (nothing here changes after import).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sluice.broker.groups.offset_store import partition_for as string_partition

__all__ = [
    "ShareUpdate",
    "from_batches",
    "to_batches",
    "SNAPSHOT",
    "UPDATE",
    "CorruptShareStateRecordError",
    "ShareState",
    "ShareStateKey",
    "StateBatch",
    "apply",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_snapshot",
    "encode_update",
    "partition_for",
]

#: The record types (the key's INT16): Kafka's ShareSnapshotKey and ShareUpdateKey.
SNAPSHOT, UPDATE = 0, 1
VALUE_VERSION = 0
#: DeliveryCompleteCount's tag, and its "unknown" default.
_DELIVERY_COMPLETE_TAG = 0

_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")
_BATCH = struct.Struct(">qqbh")


class CorruptShareStateRecordError(ValueError):
    """A ``__share_group_state`` key or value does not match its schema (too short, too long,
    an unknown value version, a bad varint)."""


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """One share-partition: the group, the topic's id and the partition."""

    group: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``groupId:topicId:partition``, the topic id as ``Uuid.toString`` spells it."""
        encoded = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group}:{encoded}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    first: int
    last: int
    state: int  # 0 available, 2 acknowledged, 4 archived (Kafka's RecordState ids)
    count: int


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's durable state: what a snapshot carries."""

    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    state_epoch: int = 0
    leader_epoch: int = -1
    snapshot_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1
    delivery_complete_count: int = -1
    #: updates replayed since the last snapshot (not a field of any record)
    updates: int = field(default=0, compare=False)


def partition_for(key: ShareStateKey, partitions: int) -> int:
    """The partition of ``__share_group_state`` that holds ``key``'s records."""
    return string_partition(key.coordinator_key(), partitions)


# -- writing --------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_key(record_type: int, key: ShareStateKey) -> bytes:
    if record_type not in (SNAPSHOT, UPDATE):
        raise ValueError(f"expected record type 0 or 1, found {record_type}")
    group = key.group.encode()
    return (
        _I16.pack(record_type) + _I16.pack(len(group)) + group + key.topic_id.bytes
        + _I32.pack(key.partition)
    )  # fmt: skip


def _batches(batches: Sequence[StateBatch]) -> bytes:
    out = bytearray(_uvarint(len(batches) + 1))
    for b in batches:
        out += _BATCH.pack(b.first, b.last, b.state, b.count) + b"\x00"
    return bytes(out)


def _tags(delivery_complete_count: int) -> bytes:
    if delivery_complete_count == -1:
        return b"\x00"
    return b"\x01" + _uvarint(_DELIVERY_COMPLETE_TAG) + b"\x04" + _I32.pack(delivery_complete_count)


def encode_snapshot(state: ShareState) -> bytes:
    """A ShareSnapshotValue v0."""
    return (
        _I16.pack(VALUE_VERSION) + _I32.pack(state.snapshot_epoch) + _I32.pack(state.state_epoch)
        + _I32.pack(state.leader_epoch) + _I64.pack(state.start_offset)
        + _I64.pack(state.create_timestamp) + _I64.pack(state.write_timestamp)
        + _batches(state.batches) + _tags(state.delivery_complete_count)
    )  # fmt: skip


def encode_update(
    snapshot_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: Sequence[StateBatch],
    delivery_complete_count: int = -1,
) -> bytes:
    """A ShareUpdateValue v0 (``start_offset`` -1: the start does not move)."""
    return (
        _I16.pack(VALUE_VERSION) + _I32.pack(snapshot_epoch) + _I32.pack(leader_epoch)
        + _I64.pack(start_offset) + _batches(batches) + _tags(delivery_complete_count)
    )  # fmt: skip


# -- reading --------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptShareStateRecordError(
                f"{self.what}: expected {size} more bytes at byte {self.pos}, "
                f"found {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def integer(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack(self.take(fmt.size))
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptShareStateRecordError(f"{self.what}: a varint longer than 5 bytes")

    def tags(self) -> int:
        """The tagged fields of a struct; DeliveryCompleteCount's value (-1 if absent)."""
        found = -1
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            raw = self.take(size)
            if tag == _DELIVERY_COMPLETE_TAG and size == _I32.size:
                (found,) = _I32.unpack(raw)
        return found

    def batches(self) -> tuple[StateBatch, ...]:
        count = self.uvarint() - 1
        if count < 0 or count * (_BATCH.size + 1) > len(self.data) - self.pos:
            raise CorruptShareStateRecordError(f"{self.what}: state batch count {count}")
        out = []
        for _ in range(count):
            first, last, state, delivered = _BATCH.unpack(self.take(_BATCH.size))
            self.tags()
            out.append(StateBatch(first, last, state, delivered))
        return tuple(out)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CorruptShareStateRecordError(
                f"{self.what}: expected {self.pos} bytes, found {len(self.data)}"
            )


def decode_key(data: bytes) -> tuple[int, ShareStateKey] | None:
    """(record type, key); ``None`` for a record type this reader does not know (skipped, as
    Kafka's loader skips them)."""
    reader = _Reader(data, "__share_group_state key")
    record_type = reader.integer(_I16)
    if record_type not in (SNAPSHOT, UPDATE):
        return None
    size = reader.integer(_I16)
    try:
        group = reader.take(size).decode()
    except UnicodeDecodeError as exc:
        raise CorruptShareStateRecordError(f"__share_group_state key: group {exc}") from None
    topic_id = uuid.UUID(bytes=reader.take(16))
    partition = reader.integer(_I32)
    reader.done()
    return record_type, ShareStateKey(group, topic_id, partition)


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


def decode_value(record_type: int, data: bytes) -> ShareState | ShareUpdate:
    """The value of a record of ``record_type``: a snapshot's ``ShareState`` or a
    ``ShareUpdate``."""
    what = "ShareSnapshotValue" if record_type == SNAPSHOT else "ShareUpdateValue"
    reader = _Reader(data, what)
    version = reader.integer(_I16)
    if version != VALUE_VERSION:
        raise CorruptShareStateRecordError(f"{what}: expected version 0, found {version}")
    value: ShareState | ShareUpdate
    if record_type == SNAPSHOT:
        snapshot_epoch, state_epoch, leader_epoch = (reader.integer(_I32) for _ in range(3))
        start, created, written = (reader.integer(_I64) for _ in range(3))
        batches = reader.batches()
        value = ShareState(
            start, batches, state_epoch, leader_epoch, snapshot_epoch, created, written,
            reader.tags(),
        )  # fmt: skip
    else:
        snapshot_epoch, leader_epoch = reader.integer(_I32), reader.integer(_I32)
        start = reader.integer(_I64)
        value = ShareUpdate(snapshot_epoch, leader_epoch, start, reader.batches(), reader.tags())
    reader.done()
    return value


# -- replay ---------------------------------------------------------------------------------


def apply(state: ShareState | None, value: ShareState | ShareUpdate | None) -> ShareState | None:
    """The state after one record of the key (in log order): a snapshot replaces it, an update
    merges into it (its batches win where they overlap; a start offset other than -1 moves the
    start and drops what lies below), a tombstone deletes it. An update without a snapshot
    before it (its snapshot compacted away cannot happen: compaction keeps the last of each
    key type) starts from its own batches."""
    if value is None or isinstance(value, ShareState):
        return value
    base = state if state is not None else ShareState(max(value.start_offset, 0))
    start = base.start_offset if value.start_offset == -1 else value.start_offset
    offsets: dict[int, tuple[int, int]] = {}
    for b in (*base.batches, *value.batches):
        for offset in range(max(b.first, start), b.last + 1):
            offsets[offset] = (b.state, b.count)
    return replace(
        base,
        start_offset=start,
        batches=tuple(to_batches(sorted((o, s, c) for o, (s, c) in offsets.items()))),
        leader_epoch=value.leader_epoch,
        snapshot_epoch=value.snapshot_epoch,
        delivery_complete_count=value.delivery_complete_count,
        updates=base.updates + 1,
    )


def to_batches(records: Sequence[tuple[int, int, int]]) -> list[StateBatch]:
    """``(offset, state, count)`` in offset order as state batches (runs of consecutive
    offsets with one state and one count)."""
    out: list[StateBatch] = []
    for offset, state, count in records:
        last = out[-1] if out else None
        if (
            last is not None
            and last.last == offset - 1
            and last.state == state
            and (last.count == count)
        ):
            out[-1] = StateBatch(last.first, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return out


def from_batches(batches: Sequence[StateBatch]) -> list[tuple[int, int, int]]:
    """State batches as ``(offset, state, count)`` per offset."""
    return [(o, b.state, b.count) for b in batches for o in range(b.first, b.last + 1)]
