"""``OffsetStore``: committed consumer offsets (and groups' metadata), durable in the internal
``__consumer_offsets`` topic, as Kafka keeps them.

Why a log and not a file or ZooKeeper: the offsets then live in the same crash-safe,
checksummed storage as the data, survive restarts through the same recovery, and in cluster
mode replicate like any partition, so a coordinator failover finds them on the new leader.
ZooKeeper (the 0.8 design) does not scale to a commit per second per consumer.

A group's offsets live in partition ``abs(java_hash(group)) % offsets.topic.num.partitions``
(Kafka's ``Utils.abs(groupId.hashCode) % n``), whose leader is the group's coordinator.

Each commit request is one batch; each committed partition one record, in Kafka's binary
schemas (``sluice.broker.groups.offsets_topic_records``): key version 1 (group, topic,
partition), value ``OffsetCommitValue`` v3 (offset, leader epoch, metadata, commit timestamp)
or null once the offset is deleted. A consumer group's (KIP-848) records — key types 3 and
5–8, Kafka 4's — are kept as they are, the last value per key
(:meth:`OffsetStore.store_consumer_records`, :meth:`OffsetStore.consumer_records_in`). A
group's metadata (:meth:`OffsetStore.store_group`) is key
version 2 with a ``GroupMetadataValue`` v3 (null once the group is gone); a partition's load
reads its groups' last records back, and the group coordinator rebuilds its groups from them
(:meth:`OffsetStore.groups_in`, ``GroupCoordinator.load_groups``). Every record has a key (a
group's topic-partition, or the group), so the topic may be compacted
(``cleanup.policy=compact``): the cleaner keeps each key's last record and drops tombstones
past their horizon. Kafka has no null metadata ("" is its ``NoMetadata``):
a commit without metadata is written as "" and reads back as ``None``.

**Migration of Sluice's JSON records.** Sluice used to write JSON (``{"version": 1, "group":
…}``). Such a log is migrated rather than refused, so an upgrade needs no step and loses no
offsets: the loader reads JSON and binary records alike, in log order. It then rewrites the
JSON entries: on a standalone broker (the partition's only replica) at once, with the rewrite
below; with followers, in the partition's next write, whose batch first carries the live
entries in binary and a tombstone for each JSON key (so compaction drops the JSON records and
a later binary tombstone cannot be undone by a surviving JSON record).

**Transactional offsets** (KIP-98's TxnOffsetCommit; Kafka's ``storeOffsets`` with a producer
id, ``loadGroupsAndOffsets``, ``handleTxnCompletion``): :meth:`OffsetStore.commit_txn` appends
them as a *transactional* batch (the producer's id and epoch, sequence 0, the transactional
attribute set; the same key and value bytes as a plain commit; appended as the coordinator's, so
the log checks the epoch and not the sequence) and holds them as **pending**
(``PendingTxnOffsets``) — not visible to OffsetFetch — until the transaction's marker is
written to the partition like any partition's (``Log.append_marker``);
:meth:`OffsetStore.complete_txn` then commits (COMMIT) or drops (ABORT) the producer's pending
offsets. A pending offset becomes the committed one only if its batch is later in the log
than the committed offset's (Kafka's ``olderThan``): each committed offset remembers the base
offset of the batch that wrote it. Because the records and markers are in the log, loading a
partition rebuilds all of it: a transactional record is pending for its producer id until that
producer's next marker in the log (COMMIT: committed, by the same rule; ABORT: dropped); an
empty marker (its transaction's data cleaned away) changes nothing, as in Kafka. Offsets
still pending at the log end stay pending — their transaction's coordinator (on this broker or
another) resends the marker. The log cleaner removes aborted records and markers as Kafka's
does, so a cleaned log loads to the same state.

The store replays a partition into a map when this broker becomes its leader (all of them
at startup on a standalone broker, which leads every partition). The only replica of a
partition (a standalone broker) rewrites it as it loads it when its records outnumber live
entries by far and no transaction holds pending offsets in it: the live entries are appended
again and the log start offset moves past the old records, whose segments retention then
deletes. Thread-safe: one lock around the maps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from sluice.broker.groups.offsets_topic_records import (
    CorruptOffsetsRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_legacy_key,
    decode_legacy_value,
    decode_offset_commit_value,
    decode_record_key,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    is_legacy_json,
)
from sluice.broker.groups.pending_txn_offsets import PendingTxnOffsets
from sluice.broker.log.control_batch import COMMIT, read_marker
from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import BatchHeader, iter_batches
from sluice.broker.log.records import decode_batch, encode_batch
from sluice.broker.protocol.errors import Errors

log = logging.getLogger(__name__)

#: The record types of Kafka 4's consumer groups (KIP-848) this store keeps, as they are.
CONSUMER_GROUP_RECORD_TYPES = frozenset({3, 5, 6, 7, 8})

TOPIC = "__consumer_offsets"
COMPACT_SLACK = 10_000


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    h = java_string_hash(group)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int


Key = tuple[str, str, int]
RawRecord = tuple[bytes, bytes | None]


#: Durably append a batch to a partition; returns the batch's base offset in the log.
Appender = Callable[[int, bytes], Awaitable[int]]


class OffsetCommitFailedError(Exception):
    """A commit batch was not made durable (e.g. the partition's leadership moved)."""

    def __init__(self, error_code: Errors, message: str) -> None:
        super().__init__(f"offset commit failed with error {error_code}: {message}")
        self.error_code = error_code


class OffsetsPartitionLoadError(Exception):
    """A record of ``__consumer_offsets`` could not be read while loading a partition."""


class OffsetStore:
    """Committed offsets in memory, made durable by appending to ``__consumer_offsets``.

    ``append(partition, batch)`` writes a commit batch durably: the broker passes a replicated
    append (acks=-1) through its replica manager — standalone, the broker is the partition's
    only replica and the append commits at once. A broker holds the offsets of the
    partitions it leads: ``load_partition`` replays one when it becomes its leader,
    ``unload_partition`` forgets it when leadership moves away. So ``loaded`` is the set of
    partitions this broker leads, and :meth:`coordinates` answers whether it is a group's
    coordinator.
    """

    def __init__(self, num_partitions: int, append: Appender) -> None:
        self._lock = threading.Lock()
        self.num_partitions = num_partitions
        self._append = append
        self._offsets: dict[Key, CommittedOffset] = {}
        # key → base offset of the batch that wrote its committed offset (``olderThan``)
        self._appended: dict[Key, int] = {}
        # offsets partition → its transactional offsets without a marker yet
        self._pending: dict[int, PendingTxnOffsets[CommittedOffset]] = {}
        self._group_metadata: dict[str, GroupMetadataValue] = {}
        # consumer group (KIP-848) → its live records, key bytes → value bytes
        self._consumer_records: dict[str, dict[bytes, bytes]] = {}
        # partition → the JSON keys still in its log (see "Migration" in the module docstring)
        self._legacy: dict[int, dict[bytes, Key]] = {}
        self.loaded: set[int] = set()

    @staticmethod
    def _batches(partition_log: Log) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch of the log (to its end), with the buffer its header positions in."""
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            result = partition_log.read(offset, 1 << 20, upper_bound="log_end")
            if result.slice is None:
                break
            raw = result.slice.read()
            for header in iter_batches(raw):
                if header.next_offset > offset:
                    yield header, raw
                offset = header.next_offset

    def load_partition(self, partition: int, partition_log: Log, *, compact: bool = False) -> int:
        """Replay one partition of the offsets topic; returns how many offsets are live.

        ``compact``: the caller is the partition's only replica (a standalone broker), so it
        may rewrite the partition when its records outnumber the live entries by far, or when
        it holds JSON records (see the module docstring) — unless transactional offsets are
        pending in it (a rewrite would lose their producer ids). A partition with followers
        is never rewritten: they would not follow the moved log start. Raises
        ``OffsetsPartitionLoadError`` naming the record that cannot be read."""
        live, groups = self._load(partition, partition_log)
        stale = partition_log.log_end_offset - partition_log.log_start_offset - 2 * (live + groups)
        legacy = len(self._legacy.get(partition, {}))
        if legacy:
            log.warning(
                "%s-%d holds %d JSON offset record(s) of an older Sluice: migrating them to "
                "Kafka's binary format%s", TOPIC, partition, legacy,
                " now" if compact else " with the partition's next write",
            )  # fmt: skip
        with self._lock:
            pending = bool(self._pending.get(partition))
        if compact and (stale > COMPACT_SLACK or legacy) and not pending:
            self._compact(partition, partition_log)
            self._load(partition, partition_log)  # the rewritten entries' appended offsets
        return live

    def _load(self, partition: int, partition_log: Log) -> tuple[int, int]:
        with self._lock:
            self._forget(partition)
            legacy: dict[bytes, Key] = {}
            pending = self._pending[partition] = PendingTxnOffsets()
            for header, raw in self._batches(partition_log):
                at = header.base_offset  # the record being read, for the error
                try:
                    if header.is_control:
                        marker = read_marker(raw, header)
                        if marker is not None:  # an empty one: its data was cleaned away
                            self._complete(pending, header.producer_id, marker.kind == COMMIT)
                        continue
                    for record in decode_batch(raw, header.position):
                        at = record.offset
                        if record.key is None:
                            continue
                        if header.is_transactional:
                            self._replay_txn(pending, header, record.key, record.value)
                        else:
                            self._replay(header.base_offset, record.key, record.value, legacy)
                except (CorruptOffsetsRecordError, CorruptRecordError) as exc:
                    raise OffsetsPartitionLoadError(
                        f"{TOPIC}-{partition} offset {at}: {exc}; the partition cannot be "
                        f"loaded (its groups' offsets would be wrong)"
                    ) from exc
            if legacy:
                self._legacy[partition] = legacy
            self.loaded.add(partition)
            live = sum(1 for g, _, _ in self._offsets if self.partition_for(g) == partition)
            groups = sum(1 for g in self._group_metadata if self.partition_for(g) == partition)
            return live, groups

    def _replay(
        self, appended: int, key: bytes, value: bytes | None, legacy: dict[bytes, Key]
    ) -> None:
        """Apply one record of a plain batch at ``appended`` (the caller holds the lock)."""
        if is_legacy_json(key):
            k = decode_legacy_key(key)
            legacy[key] = (k.group, k.topic, k.partition)
            self._set_offset(k, appended, None if value is None else decode_legacy_value(value))
            return
        if len(key) >= 2 and (key[0] << 8 | key[1]) in CONSUMER_GROUP_RECORD_TYPES:
            self._keep_consumer_record(key, value)
            return
        decoded = decode_key(key)
        if decoded is None:  # a record type of a newer Kafka: skipped, as Kafka's loader does
            log.warning("%s: skipping a record with key version %d", TOPIC, key[0] << 8 | key[1])
        elif isinstance(decoded, OffsetCommitKey):
            value_ = None if value is None else decode_offset_commit_value(value)
            self._set_offset(decoded, appended, value_)
        elif value is None:
            self._group_metadata.pop(decoded.group, None)
        else:
            self._group_metadata[decoded.group] = decode_group_metadata_value(value)

    def _keep_consumer_record(self, key: bytes, value: bytes | None) -> None:
        """A consumer group's record: its last value per key (a tombstone removes it)."""
        _type, decoded = decode_record_key(key)
        records = self._consumer_records.setdefault(decoded.group, {})
        if value is None:
            records.pop(key, None)
            if not records:
                del self._consumer_records[decoded.group]
        else:
            records[key] = value

    @staticmethod
    def _replay_txn(
        pending: PendingTxnOffsets[CommittedOffset], header: BatchHeader, key: bytes,
        value: bytes | None,
    ) -> None:  # fmt: skip
        """A record of a transactional batch: pending for the batch's producer id. Only
        offset commits are written in transactions (Kafka's loader ignores anything else)."""
        decoded = decode_key(key)
        if not isinstance(decoded, OffsetCommitKey):
            log.warning("%s: skipping a transactional record that is no offset commit", TOPIC)
            return
        ident = (decoded.group, decoded.topic, decoded.partition)
        committed = None if value is None else _committed(decode_offset_commit_value(value))
        pending.add(header.producer_id, ident, header.base_offset, committed)

    def _set_offset(
        self, key: OffsetCommitKey, appended: int, value: OffsetCommitValue | None
    ) -> None:
        ident = (key.group, key.topic, key.partition)
        if value is None:
            self._offsets.pop(ident, None)
            self._appended.pop(ident, None)
        else:
            self._offsets[ident] = _committed(value)
            self._appended[ident] = appended

    def _complete(
        self, pending: PendingTxnOffsets[CommittedOffset], producer_id: int, commit: bool
    ) -> None:
        """A marker of ``producer_id``: its pending offsets become committed (COMMIT: each one
        later in the log than the committed offset of its key) or are dropped (ABORT)."""
        taken = pending.take(producer_id)
        if not commit:
            return
        for ident, (appended, value) in taken.items():
            if value is not None and self._appended.get(ident, -1) < appended:
                self._offsets[ident] = value
                self._appended[ident] = appended

    def unload_partition(self, partition: int) -> None:
        with self._lock:
            self._forget(partition)
            self.loaded.discard(partition)

    def _forget(self, partition: int) -> None:
        for key in [k for k in self._offsets if self.partition_for(k[0]) == partition]:
            del self._offsets[key]
            self._appended.pop(key, None)
        for group in [g for g in self._group_metadata if self.partition_for(g) == partition]:
            del self._group_metadata[group]
        for group in [g for g in self._consumer_records if self.partition_for(g) == partition]:
            del self._consumer_records[group]
        self._legacy.pop(partition, None)
        self._pending.pop(partition, None)

    def _compact(self, partition: int, partition_log: Log) -> None:
        """Rewrite the live entries and move the log start past the stale ones (standalone:
        the only replica; retention or the cleaner then deletes the old segments)."""
        with self._lock:
            keys = sorted(k for k in self._offsets if self.partition_for(k[0]) == partition)
            records = [_commit_record(k, self._offsets[k]) for k in keys]
            records += [
                _group_record(g, v)
                for g, v in sorted(self._group_metadata.items())
                if self.partition_for(g) == partition
            ]
            records += [
                (k, v)
                for g, held in sorted(self._consumer_records.items())
                if self.partition_for(g) == partition
                for k, v in held.items()
            ]
            self._legacy.pop(partition, None)
        partition_log.roll()
        start = partition_log.log_end_offset
        for i in range(0, len(records), 500):
            partition_log.append(_batch(records[i : i + 500]))
        partition_log.flush()
        # The only replica is the whole ISR: what it just wrote is committed.
        partition_log.high_watermark = partition_log.log_end_offset
        partition_log.increment_log_start_offset(start)
        partition_log.delete_old_segments()

    def partition_for(self, group: str) -> int:
        return partition_for(group, self.num_partitions)

    def coordinates(self, group: str) -> bool:
        """Whether this broker is ``group``'s coordinator: it leads (so has loaded) the
        group's partition."""
        return self.partition_for(group) in self.loaded

    async def _write(self, partition: int, records: list[RawRecord]) -> int:
        """Append ``records`` as one batch, after the partition's pending JSON migration (in
        the same batch: both or neither); returns the batch's base offset."""
        with self._lock:
            legacy = self._legacy.get(partition, {})
            migrated = sorted(ident for ident in set(legacy.values()) if ident in self._offsets)
            migration: list[RawRecord] = [(raw, None) for raw in legacy]
            migration += [_commit_record(ident, self._offsets[ident]) for ident in migrated]
        base = await self._append(partition, _batch(migration + records))
        if legacy:
            with self._lock:
                if self._legacy.get(partition) is legacy:
                    del self._legacy[partition]
                for ident in migrated:
                    if ident in self._appended:
                        self._appended[ident] = max(self._appended[ident], base)
            log.info("%s-%d: JSON offset records migrated", TOPIC, partition)
        return base

    async def commit(self, group: str, offsets: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        """Durably record one commit request's offsets (one batch, so all or nothing)."""
        if not offsets:
            return
        offsets = [(t, p, _normal(c)) for t, p, c in offsets]
        base = await self._write(
            self.partition_for(group), [_commit_record((group, t, p), c) for t, p, c in offsets]
        )
        with self._lock:
            for topic, partition, c in offsets:
                ident = (group, topic, partition)
                # A transaction's marker may have committed a later record meanwhile.
                if self._appended.get(ident, -1) <= base:
                    self._offsets[ident] = c
                    self._appended[ident] = base

    async def commit_txn(
        self, group: str, producer_id: int, producer_epoch: int,
        offsets: Sequence[tuple[str, int, CommittedOffset]],
    ) -> None:  # fmt: skip
        """Durably append a TxnOffsetCommit's offsets as one transactional batch of
        ``producer_id`` (its ``producer_epoch``, which the log checks; sequence 0, as Kafka
        writes it: a coordinator's batch carries no sequence the log checks) and hold them
        as pending until the
        producer's marker (:meth:`complete_txn`). Raises ``OffsetCommitFailedError`` if the
        batch was not made durable, and the log's ``InvalidProducerEpochError`` for a fenced
        producer. (A JSON migration waits for the next plain write: its records must not be
        part of a transaction.)"""
        if not offsets:
            return
        offsets = [(t, p, _normal(c)) for t, p, c in offsets]
        partition = self.partition_for(group)
        records = [_commit_record((group, t, p), c) for t, p, c in offsets]
        base = await self._append(
            partition,
            _batch(records, producer_id=producer_id, producer_epoch=producer_epoch),
        )  # fmt: skip
        with self._lock:
            if partition not in self.loaded:  # leadership moved meanwhile: the log has them
                return
            pending = self._pending.setdefault(partition, PendingTxnOffsets())
            for topic, p, c in offsets:
                pending.add(producer_id, (group, topic, p), base, c)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """``producer_id``'s marker is in ``partition`` (and replicated): commit or drop its
        pending offsets there (Kafka's ``handleTxnCompletion``)."""
        with self._lock:
            pending = self._pending.get(partition)
            if pending is not None:
                self._complete(pending, producer_id, commit)

    def has_pending_txn(self, group: str, topic: str, partition: int) -> bool:
        """Whether a transaction holds a pending offset for the group's ``topic``-``partition``
        (OffsetFetch with ``require_stable`` then answers UNSTABLE_OFFSET_COMMIT)."""
        with self._lock:
            pending = self._pending.get(self.partition_for(group))
            return pending is not None and pending.has(group, topic, partition)

    def pending_txn(self, partition: int) -> dict[int, dict[Key, CommittedOffset | None]]:
        """Producer id → its pending offsets in ``partition`` (diagnostics and tests)."""
        with self._lock:
            pending = self._pending.get(partition)
            return {} if pending is None else pending.producers()

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((group, topic, partition))

    def committed(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        with self._lock:
            return {(t, p): c for (g, t, p), c in self._offsets.items() if g == group}

    def groups(self) -> set[str]:
        with self._lock:
            return {g for g, _, _ in self._offsets}

    async def delete(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Delete the group's offsets of ``partitions`` (a tombstone each), pending
        transactional ones included (Kafka's ``removeOffsets``)."""
        wanted = list(partitions)
        with self._lock:
            gone = [(t, p) for t, p in wanted if (group, t, p) in self._offsets]
            pending = self._pending.get(self.partition_for(group))
            if pending is not None:
                pending.remove((group, t, p) for t, p in wanted)
        if gone:
            await self._write(
                self.partition_for(group), [_commit_record((group, t, p), None) for t, p in gone]
            )
            with self._lock:
                for t, p in gone:
                    self._offsets.pop((group, t, p), None)
                    self._appended.pop((group, t, p), None)

    async def store_group(self, group: str, value: GroupMetadataValue | None) -> None:
        """Durably record a group's metadata (Kafka's ``storeGroup``): its generation, leader,
        protocol and members with their assignments; ``None`` writes a tombstone (the group
        was deleted)."""
        await self._write(self.partition_for(group), [_group_record(group, value)])
        with self._lock:
            if value is None:
                self._group_metadata.pop(group, None)
            else:
                self._group_metadata[group] = value

    async def store_consumer_records(
        self, group: str, records: Sequence[tuple[bytes, bytes | None]]
    ) -> None:
        """Durably write a consumer group's (KIP-848) records (key and value bytes, None a
        tombstone) in one batch, as Kafka's coordinator writes a heartbeat's records."""
        await self._write(self.partition_for(group), list(records))
        with self._lock:
            for key, value in records:
                self._keep_consumer_record(key, value)

    def consumer_records_in(self, partition: int) -> dict[str, dict[bytes, bytes]]:
        """Consumer group id → its live records, of every consumer group of ``partition``:
        what ``ConsumerGroupCoordinator.load_groups`` rebuilds the groups from."""
        with self._lock:
            return {
                g: dict(held)
                for g, held in self._consumer_records.items()
                if self.partition_for(g) == partition
            }

    def group_metadata(self, group: str) -> GroupMetadataValue | None:
        """The group's last stored metadata, if this broker loaded its partition."""
        with self._lock:
            return self._group_metadata.get(group)

    def groups_in(self, partition: int) -> dict[str, GroupMetadataValue]:
        """Group id → last stored metadata of every group of ``partition`` (loaded with it):
        what the group coordinator rebuilds its groups from when it takes the partition
        over (``GroupCoordinator.load_groups``)."""
        with self._lock:
            return {
                g: v for g, v in self._group_metadata.items() if self.partition_for(g) == partition
            }


def _normal(c: CommittedOffset) -> CommittedOffset:
    """ "" and no metadata are one thing in Kafka's schema: keep ``None`` for both."""
    if c.metadata == "":
        return CommittedOffset(c.offset, c.leader_epoch, None, c.commit_timestamp)
    return c


def _commit_record(ident: Key, c: CommittedOffset | None) -> RawRecord:
    key = encode_key(OffsetCommitKey(*ident))
    if c is None:
        return key, None
    value = OffsetCommitValue(c.offset, c.leader_epoch, c.metadata or "", c.commit_timestamp)
    return key, encode_offset_commit_value(value)


def _group_record(group: str, value: GroupMetadataValue | None) -> RawRecord:
    key = encode_key(GroupMetadataKey(group))
    return key, None if value is None else encode_group_metadata_value(value)


def _committed(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(
        value.offset, value.leader_epoch, value.metadata or None, value.commit_timestamp
    )


def _batch(
    records: Sequence[RawRecord], *, producer_id: int = -1, producer_epoch: int = -1,
) -> bytes:  # fmt: skip
    """One batch of ``records``; with a producer id, a transactional one (sequence 0, as
    Kafka's group coordinator writes it)."""
    now = int(time.time() * 1000)
    return encode_batch(
        list(records), timestamps=[now] * len(records), producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=0 if producer_id >= 0 else -1,
        transactional=producer_id >= 0,
    )  # fmt: skip
