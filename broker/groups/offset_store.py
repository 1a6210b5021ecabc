"""``OffsetStore``: committed consumer offsets, durable in the internal ``__consumer_offsets``
topic, as Kafka keeps them.

Why a log and not a file or ZooKeeper: the offsets then live in the same crash-safe,
checksummed storage as the data, survive restarts through the same recovery, and in cluster
mode replicate like any partition, so a coordinator failover finds them on the new leader.
ZooKeeper (the 0.8 design) does not scale to a commit per second per consumer.

A group's offsets live in partition ``abs(java_hash(group)) % offsets.topic.num.partitions``
(Kafka's ``Utils.abs(groupId.hashCode) % n``), whose leader is the group's coordinator.

Each commit request is one batch; each committed partition one record::

    key   = {"version": 1, "group": g, "topic": t, "partition": p}           (JSON, UTF-8)
    value = {"version": 1, "offset": o, "leader_epoch": e, "metadata": m,
             "commit_timestamp": ms}                      (null: the offset was deleted)

The store replays a partition into a map when this broker becomes its leader (all of them
at startup on a standalone broker, which leads every partition). With no log compaction, the
only replica of a partition (a standalone broker) rewrites it as it loads it when its records
outnumber live entries by far: the live entries are appended again and the log start offset
moves past the old records, whose segments retention then deletes. Thread-safe: one lock
around the map.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch, encode_batch
from sluice.broker.protocol.errors import Errors

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


Appender = Callable[[int, bytes], Awaitable[None]]


class OffsetCommitFailedError(Exception):
    """A commit batch was not made durable (e.g. the partition's leadership moved)."""

    def __init__(self, error_code: Errors, message: str) -> None:
        super().__init__(f"offset commit failed with error {error_code}: {message}")
        self.error_code = error_code


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
        self.loaded: set[int] = set()

    @staticmethod
    def _records(partition_log: Log) -> Iterable[tuple[bytes | None, bytes | None]]:
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            result = partition_log.read(offset, 1 << 20, upper_bound="log_end")
            if result.slice is None:
                break
            raw = result.slice.read()
            for header in iter_batches(raw):
                for record in decode_batch(raw, header.position):
                    if record.offset >= offset:
                        yield record.key, record.value
                offset = header.next_offset

    def load_partition(self, partition: int, partition_log: Log, *, compact: bool = False) -> int:
        """Replay one partition of the offsets topic; returns how many entries are live.

        ``compact``: the caller is the partition's only replica (a standalone broker), so it
        may rewrite the partition when its records outnumber the live entries by far (see the
        module docstring). A partition with followers is never rewritten: they would not
        follow the moved log start."""
        live = self._load(partition, partition_log)
        stale = partition_log.log_end_offset - partition_log.log_start_offset - 2 * live
        if compact and stale > COMPACT_SLACK:
            self._compact(partition, partition_log)
        return live

    def _load(self, partition: int, partition_log: Log) -> int:
        with self._lock:
            self._forget(partition)
            for key, value in self._records(partition_log):
                if key is None:
                    continue
                k = json.loads(key)
                ident: Key = (k["group"], k["topic"], int(k["partition"]))
                if value is None:
                    self._offsets.pop(ident, None)
                else:
                    v = json.loads(value)
                    self._offsets[ident] = CommittedOffset(
                        int(v["offset"]), int(v.get("leader_epoch", -1)), v.get("metadata"),
                        int(v.get("commit_timestamp", 0)),
                    )  # fmt: skip
            self.loaded.add(partition)
            return sum(1 for g, _, _ in self._offsets if self.partition_for(g) == partition)

    def unload_partition(self, partition: int) -> None:
        with self._lock:
            self._forget(partition)
            self.loaded.discard(partition)

    def _forget(self, partition: int) -> None:
        for key in [k for k in self._offsets if self.partition_for(k[0]) == partition]:
            del self._offsets[key]

    def _compact(self, partition: int, partition_log: Log) -> None:
        """Rewrite the live entries and move the log start past the stale ones (standalone:
        there is no log compaction; retention then deletes the old segments)."""
        keys = sorted(k for k in self._offsets if self.partition_for(k[0]) == partition)
        partition_log.roll()
        start = partition_log.log_end_offset
        for i in range(0, len(keys), 500):
            partition_log.append(_encode([(k, self._offsets[k]) for k in keys[i : i + 500]]))
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

    async def commit(self, group: str, offsets: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        """Durably record one commit request's offsets (one batch, so all or nothing)."""
        if not offsets:
            return
        batch = _encode([((group, t, p), c) for t, p, c in offsets])
        await self._append(self.partition_for(group), batch)
        with self._lock:
            for topic, partition, c in offsets:
                self._offsets[(group, topic, partition)] = c

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((group, topic, partition))

    def committed(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        with self._lock:
            return {(t, p): c for (g, t, p), c in self._offsets.items() if g == group}

    def groups(self) -> set[str]:
        with self._lock:
            return {g for g, _, _ in self._offsets}

    async def delete(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            gone = [(t, p) for t, p in partitions if (group, t, p) in self._offsets]
        if gone:
            await self._append(
                self.partition_for(group), _encode([((group, t, p), None) for t, p in gone])
            )
            with self._lock:
                for t, p in gone:
                    self._offsets.pop((group, t, p), None)


def _encode(entries: Sequence[tuple[Key, CommittedOffset | None]]) -> bytes:
    """One batch of commit records (see the module docstring for the record layout)."""
    records = []
    for (group, topic, partition), c in entries:
        key = {"version": 1, "group": group, "topic": topic, "partition": partition}
        value = None
        if c is not None:
            value = json.dumps(
                {
                    "version": 1,
                    "offset": c.offset,
                    "leader_epoch": c.leader_epoch,
                    "metadata": c.metadata,
                    "commit_timestamp": c.commit_timestamp,
                }
            ).encode()
        records.append((json.dumps(key).encode(), value))
    now = int(time.time() * 1000)
    return encode_batch(records, timestamps=[now] * len(records))
