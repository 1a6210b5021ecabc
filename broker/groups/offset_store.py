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

The store replays its partitions into a map at startup. With no compaction, a partition is
rewritten at startup when its records outnumber live entries by far: the live entries are
appended again and the log start offset moves past the old records, whose segments retention
then deletes. Thread-safe: one lock around the map and each append.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.cluster.topic_metadata import MetadataStore
from broker.log.log import Log
from broker.log.log_manager import LogManager
from broker.log.record_batch import iter_batches
from broker.log.records import decode_batch, encode_batch

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


class OffsetStore:
    def __init__(
        self, log_manager: LogManager, metadata: MetadataStore, num_partitions: int
    ) -> None:
        self._lock = threading.Lock()
        existing = metadata.get(TOPIC)
        if existing is None:
            existing = metadata.create_topic(TOPIC, num_partitions, 1, {}, internal=True)
        self.num_partitions = existing.partitions
        self._logs = [log_manager.get_or_create_log(TOPIC, p) for p in range(self.num_partitions)]
        self._offsets: dict[Key, CommittedOffset] = {}
        for partition_log in self._logs:
            self._replay(partition_log)

    def _records(self, partition_log: Log) -> Iterable[tuple[bytes | None, bytes | None]]:
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

    def _replay(self, partition_log: Log) -> None:
        count = 0
        mine: set[Key] = set()
        for key, value in self._records(partition_log):
            count += 1
            if key is None:
                continue
            k = json.loads(key)
            ident: Key = (k["group"], k["topic"], int(k["partition"]))
            mine.add(ident)
            if value is None:
                self._offsets.pop(ident, None)
                mine.discard(ident)
            else:
                v = json.loads(value)
                self._offsets[ident] = CommittedOffset(
                    int(v["offset"]), int(v.get("leader_epoch", -1)), v.get("metadata"),
                    int(v.get("commit_timestamp", 0)),
                )  # fmt: skip
        if count > 2 * len(mine) + COMPACT_SLACK:
            self._compact(partition_log, sorted(mine))

    def _compact(self, partition_log: Log, keys: Sequence[Key]) -> None:
        partition_log.roll()
        start = partition_log.log_end_offset
        for i in range(0, len(keys), 500):
            self._append(partition_log, [(k, self._offsets[k]) for k in keys[i : i + 500]])
        partition_log.flush()
        partition_log.increment_log_start_offset(start)
        partition_log.delete_old_segments()

    @staticmethod
    def _append(partition_log: Log, entries: Sequence[tuple[Key, CommittedOffset | None]]) -> None:
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
        partition_log.append(encode_batch(records, timestamps=[now] * len(records)))

    def log_for(self, group: str) -> Log:
        return self._logs[partition_for(group, self.num_partitions)]

    def commit(self, group: str, offsets: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        """Durably record one commit request's offsets (one batch, so all or nothing)."""
        if not offsets:
            return
        with self._lock:
            self._append(self.log_for(group), [((group, t, p), c) for t, p, c in offsets])
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

    def delete(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            gone = [(t, p) for t, p in partitions if (group, t, p) in self._offsets]
            if gone:
                self._append(self.log_for(group), [((group, t, p), None) for t, p in gone])
                for t, p in gone:
                    del self._offsets[(group, t, p)]
