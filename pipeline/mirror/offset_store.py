"""``MirrorOffsetStore``: the exactly-once mirror's source positions, kept in the target cluster.

MirrorMaker 2's exactly-once source connectors (KIP-618) write each batch of records and the
source offsets it reaches in **one producer transaction on the target**: the offsets live in a
target-side offsets topic, so the copies and the position after them are committed together or
not at all. Sluice's mirror is not a Connect worker; it keeps those semantics with one offsets
topic per source cluster on the target.

**The topic**: ``mm2-offsets.<alias>.internal`` on the target (MirrorMaker 2's dedicated mode
names its offsets topic so), one partition, ``cleanup.policy=compact``, replication factor
``target.replication.factor``. Created by the first loop that needs it. One record per source
partition per batch, in Kafka Connect's layout (``JsonConverter``, no schemas), as MirrorMaker
2's ``MirrorSourceTask`` writes its offsets::

    key   = ["<group.id>",{"cluster":"<alias>","partition":<p>,"topic":"<topic>"}]
    value = {"offset":<the last source offset mirrored>}

compact JSON with sorted keys, so a partition's key is the same bytes every time (compaction
keeps its latest record). The stored offset is the last record copied; the loop resumes at
``offset + 1``, as ``MirrorSourceTask`` seeks. A tombstone (null value) forgets the position.
Records of another ``group.id`` or alias are skipped (two deployments may share a topic).

**The protocol of one loop** (``sluice.pipeline.mirror.mirror.ClusterMirror``):

1. ``init_transactions()`` with ``transactional.id=<group.id>-<alias>``. The coordinator bumps
   the id's epoch: an open transaction of the previous incarnation (a killed or stalled mirror)
   is aborted, a prepared commit is completed first, and every later request of the old one
   fails with PRODUCER_FENCED — it can never commit again.
2. :meth:`MirrorOffsetStore.load`, *after* the fencing: it waits until every partition's last
   stable offset has reached the high watermark it found (no transaction is open below it, so
   read_committed hides none of ours), then reads the whole topic read_committed up to the
   end-of-partition event at the LSO. The last record per key wins: the committed positions.
3. On each assignment a partition with a committed position starts there; one without starts
   at the source group's committed offset (what a non-transactional mirror left: a migration),
   else at ``auto.offset.reset``.
4. Per batch: ``begin_transaction`` → produce the records → produce one offsets record per
   source partition of the batch → ``flush`` until every delivery report is in →
   ``commit_transaction``. Only after the commit are the positions updated in memory and
   committed to the source group too — for ``sluice mirror lag`` and the lag metric only: the
   source group's offsets are informational, the target's are the truth.
5. A delivery error (or a record refused locally) aborts the transaction and stops the loop
   (exit 1), as in the non-transactional mode; an abortable commit error aborts it and rewinds
   the consumer to the batch's first offsets, so the batch is mirrored again in a new
   transaction; a fatal error (fenced: a newer mirror runs) stops the loop. Never is anything
   committed past a failure.

So a read_committed reader of the target sees each source record exactly once, whatever kills
the mirror: records of an aborted (or never committed) transaction are never visible, and the
restarted mirror resumes right after the last committed batch.

**Why a topic, not** ``send_offsets_to_transaction`` **with a group on the target**: the group
metadata a transaction carries (KIP-447) comes from a consumer of that group on the producer's
own cluster, and its generation is checked by that cluster's group coordinator; the mirror's
consumer belongs to the *source* cluster's group, which the target has never seen. A topic also
is what MirrorMaker 2 does, readable by any client (``sluice consume``, a console consumer),
and it needs no group whose members nobody runs.

One writer: the transactional id makes one loop per ``group.id`` and alias the writer of its
keys; a second mirror process with the same config fences the first (which then exits 1) —
run one process per source cluster in this mode (a restarted one takes over at once).

Thread safety: a store belongs to one loop and is used from its thread only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec  # type: ignore[attr-defined]

from sluice.pipeline.mirror.config import MirrorConfig, SourceCluster
from sluice.pipeline.mirror.errors import MirrorOffsetsError, error_of, is_retriable

__all__ = ["LOAD_TIMEOUT_S", "MirrorOffsetStore", "decode_record", "encode_key", "encode_value"]

LOAD_TIMEOUT_S = 120.0  # creating the topic, waiting out other writers' transactions, reading
_POLL_S = 0.2
_ADMIN_TIMEOUT_S = 15.0

# confluent-kafka's OffsetSpec factories are untyped.
_LATEST: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]
_EARLIEST: Any = OffsetSpec.earliest()  # type: ignore[no-untyped-call]

Position = tuple[str, int]  # (source topic, source partition)


def encode_key(group: str, alias: str, topic: str, partition: int) -> bytes:
    """The offsets record key of one source partition (Connect's ``[name, partition]``)."""
    source = {"cluster": alias, "partition": partition, "topic": topic}
    return json.dumps([group, source], separators=(",", ":"), sort_keys=True).encode()


def encode_value(next_offset: int) -> bytes:
    """The offsets record value for a partition mirrored up to ``next_offset`` (exclusive)."""
    return json.dumps({"offset": next_offset - 1}, separators=(",", ":")).encode()


def decode_record(
    key: bytes | None, value: bytes | None, group: str, alias: str, where: str
) -> tuple[Position, int | None] | None:
    """``((topic, partition), next offset)`` of a stored record; next offset None for a
    tombstone; None for a record of another group or alias. Raises
    :class:`MirrorOffsetsError` for a record that is not in the layout above."""
    try:
        name, source = json.loads(key or b"")
        if not (isinstance(name, str) and isinstance(source, dict)):
            raise ValueError("not [name, {partition}]")
        if name != group or source.get("cluster") != alias:
            return None
        topic, partition = source["topic"], source["partition"]
        if not (isinstance(topic, str) and isinstance(partition, int) and partition >= 0):
            raise ValueError("topic or partition of the wrong type")
        if value is None:
            return (topic, partition), None
        offset = json.loads(value)["offset"]
        if not isinstance(offset, int) or offset < -1:
            raise ValueError(f"offset {offset!r}")
    except (ValueError, TypeError, KeyError) as exc:
        raise MirrorOffsetsError(
            f'{where}: expected a key ["<group>",{{"cluster","partition","topic"}}] and '
            f'a value {{"offset":<n>}}, found key {key!r} value {value!r} ({exc})'
        ) from None
    return (topic, partition), offset + 1


class MirrorOffsetStore:
    """The committed positions of one source cluster's loop; see the module docstring.
    ``admin`` is the loop's target admin client."""

    def __init__(self, config: MirrorConfig, source: SourceCluster, admin: Any) -> None:
        self.config = config
        self.alias = source.alias
        self.topic = config.offsets_topic(source)
        self.admin = admin

    def record(self, topic: str, partition: int, next_offset: int) -> dict[str, Any]:
        """The ``produce()`` arguments storing ``topic``/``partition`` mirrored up to
        ``next_offset``; produce it inside the batch's transaction."""
        return {
            "topic": self.topic,
            "partition": 0,
            "key": encode_key(self.config.group_id, self.alias, topic, partition),
            "value": encode_value(next_offset),
        }

    # -- start -----------------------------------------------------------------------------------

    def ensure_topic(self, timeout_s: float = LOAD_TIMEOUT_S) -> None:
        """Create the offsets topic (compacted, one partition) unless it exists; wait until its
        partition has a leader. Raises :class:`MirrorOffsetsError`."""
        deadline = time.monotonic() + timeout_s
        new = NewTopic(
            self.topic, 1, self.config.target_replication_factor,
            config={"cleanup.policy": "compact"},
        )  # fmt: skip
        while True:
            try:
                self.admin.create_topics([new])[self.topic].result(timeout=_ADMIN_TIMEOUT_S)
                break
            except KafkaException as exc:
                error = error_of(exc)
                if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if not is_retriable(error) or time.monotonic() > deadline:
                    raise MirrorOffsetsError(
                        f"{self.alias}: expected the offsets topic {self.topic} created on the "
                        f"target (compacted, 1 partition), found {exc}"
                    ) from None
            time.sleep(_POLL_S)
        while time.monotonic() < deadline:
            try:
                metadata = self.admin.list_topics(self.topic, timeout=_ADMIN_TIMEOUT_S)
                found = metadata.topics.get(self.topic)
                partitions = found.partitions if found is not None and found.error is None else {}
                if partitions and all(p.leader >= 0 for p in partitions.values()):
                    return
            except KafkaException:
                pass
            time.sleep(_POLL_S)
        raise MirrorOffsetsError(
            f"{self.alias}: expected the offsets topic {self.topic} to have a leader within "
            f"{timeout_s:.0f} s, found none"
        )

    def load(self, timeout_s: float = LOAD_TIMEOUT_S) -> dict[Position, int]:
        """The committed positions (next source offset per source partition) of this group and
        alias. Call it after ``init_transactions()`` fenced the previous incarnation. Raises
        :class:`MirrorOffsetsError` (the topic unreadable, a malformed record of ours, or a
        transaction of another writer still open at ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        try:
            metadata = self.admin.list_topics(self.topic, timeout=_ADMIN_TIMEOUT_S)
            partitions = sorted(metadata.topics[self.topic].partitions)
            ends = self._list_offsets(partitions, _LATEST, "READ_UNCOMMITTED")
            starts = self._list_offsets(partitions, _EARLIEST, "READ_UNCOMMITTED")
            while True:
                stable = self._list_offsets(partitions, _LATEST, "READ_COMMITTED")
                if all(stable[p] >= ends[p] for p in partitions):
                    break
                if time.monotonic() > deadline:
                    raise MirrorOffsetsError(
                        f"{self.alias}: expected no open transaction in {self.topic} below "
                        f"the end offsets {ends} it had, found the last stable offsets "
                        f"{stable} after {timeout_s:.0f} s"
                    )
                time.sleep(_POLL_S)
        except KafkaException as exc:
            raise MirrorOffsetsError(
                f"{self.alias}: expected the offsets of {self.topic} from the target, found {exc}"
            ) from None
        return self._read({p: starts[p] for p in partitions if ends[p] > starts[p]}, deadline)

    def _list_offsets(self, partitions: list[int], spec: Any, level: str) -> dict[int, int]:
        wanted = {KafkaTopicPartition(self.topic, p): spec for p in partitions}
        futures = self.admin.list_offsets(
            wanted,
            isolation_level=getattr(IsolationLevel, level),
            request_timeout=_ADMIN_TIMEOUT_S,
        )
        return {
            tp.partition: future.result(timeout=_ADMIN_TIMEOUT_S).offset
            for tp, future in futures.items()
        }

    def _read(self, starts: Mapping[int, int], deadline: float) -> dict[Position, int]:
        positions: dict[Position, int] = {}
        if not starts:
            return positions
        consumer = Consumer(self.config.offsets_reader_config())
        try:
            consumer.assign([KafkaTopicPartition(self.topic, p, o) for p, o in starts.items()])
            done: set[int] = set()
            while len(done) < len(starts):
                if time.monotonic() > deadline:
                    raise MirrorOffsetsError(
                        f"{self.alias}: expected to read {self.topic} to its end, found "
                        f"partitions {sorted(set(starts) - done)} unfinished"
                    )
                for msg in consumer.consume(1000, 0.5):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done.add(msg.partition() or 0)
                        elif err.fatal() or not is_retriable(err):
                            raise MirrorOffsetsError(
                                f"{self.alias}: expected the records of {self.topic}, found {err}"
                            )
                        continue
                    where = f"{self.topic}/{msg.partition()}/{msg.offset()}"
                    found = decode_record(
                        msg.key(), msg.value(), self.config.group_id, self.alias, where
                    )
                    if found is None:
                        continue
                    position, next_offset = found
                    if next_offset is None:
                        positions.pop(position, None)
                    else:
                        positions[position] = next_offset
        finally:
            consumer.close()
        return positions
