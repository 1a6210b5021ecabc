"""``ShareStateLog``: the durable state of share-partitions, kept as Kafka's share coordinator
keeps it — records in the internal, replicated, compacted topic ``__share_group_state``
(``sluice.broker.share.share_state_records``: ShareSnapshot and ShareUpdate, keyed by group,
topic id and partition, in partition ``abs(java_hash(key)) % partitions``).

What it holds: a *mirror* — group → ``"<topic>:<partition>"`` → (start offset, ``[(offset,
state, delivery count), ...]``) — of the states this broker wrote, read or loaded, which the
:class:`~sluice.broker.share.share_coordinator.ShareCoordinator` uses synchronously
(``load``, ``groups``, ``write``, ``delete``), and the asynchronous steps that make it durable
and bring it back:

* ``write`` / ``delete`` change the mirror at once and queue the key; :meth:`flush` returns
  once every key queued before it was called is in the topic, *committed*: the append
  completes when the partition's high watermark covers it (acks=all, the topic's
  ``min.insync.replicas``: 2 on a cluster). Writes are made by one writer task, one batch per
  state partition per round, each key's newest state (so a later write never lands before an
  earlier one of the same key). A key's first write after this broker took it over (and one in
  ``SNAPSHOT_EVERY``, and any that moves the start back) is a ShareSnapshot; the others are
  ShareUpdates carrying the whole in-flight range, which replay merges.
* :meth:`refresh` reads one share-partition's state back from the topic (every record of its
  key in its partition, in log order: the last snapshot and the updates after it) before the
  broker that now leads the topic partition creates its share-partition — Sluice's simpler
  model of KIP-932, where the share-partition leader reloads the state it needs rather than
  asking the coordinator for it with ReadShareGroupState. Every record carries the leader
  epoch of the topic partition's leader that wrote it; a record with a lower epoch than the
  state replayed so far is a deposed leader's late write and is skipped (Kafka's coordinator
  refuses such a write with FENCED_LEADER_EPOCH); a broker that stops leading a topic
  partition discards the states it had queued for it (:meth:`ShareStateLog.discard`).
* :meth:`load_partition` replays a whole partition of the topic when this broker becomes its
  leader (every partition at startup on a standalone broker), so ``groups`` lists the share
  groups with state there, as the file store it replaced did.

How the bytes travel is the ``transport``'s business (``ShareStateTransport``): the broker's
appends and reads go to the partition's local replica when this broker leads it, in process,
and otherwise to its leader over the inter-broker listener (see
``sluice.broker.server.share_state_host``). Time is passed in as ``clock`` (epoch ms, for the
snapshot timestamps). Not thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from sluice.broker.log.records import encode_batch
from sluice.broker.share.share_partition import RecordState
from sluice.broker.share.share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareState,
    ShareStateKey,
    apply,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    encode_update,
    from_batches,
    partition_for,
    to_batches,
)

__all__ = [
    "TOPIC",
    "PartitionState",
    "ShareStateLog",
    "ShareStateTransport",
    "ShareStateUnavailableError",
]

log = logging.getLogger(__name__)

TOPIC = "__share_group_state"
#: Kafka's share.coordinator.snapshot.update.records.per.snapshot: a snapshot at least every
#: this many updates of a key, so a replay reads few records past the last snapshot.
SNAPSHOT_EVERY = 500

#: (start offset, [(offset, state, delivery count), ...])
PartitionState = tuple[int, list[tuple[int, int, int]]]
RawRecord = tuple[bytes, bytes | None]


class ShareStateUnavailableError(Exception):
    """The share state could not be read or written now (no leader for its partition, too
    few in-sync replicas, the leader unreachable): retriable."""


class ShareStateTransport(Protocol):
    """Where the records go: the broker's replicated topic (or a test's logs)."""

    async def partitions(self) -> int:
        """The topic's partition count (creating the topic on first use)."""
        ...

    async def append(self, partition: int, batch: bytes) -> None:
        """Append ``batch`` and return once it is committed; raises
        ``ShareStateUnavailableError``."""
        ...

    async def read(self, partition: int) -> list[RawRecord]:
        """Every record of the partition, in log order; raises
        ``ShareStateUnavailableError``."""
        ...


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


Ident = tuple[str, str, int]  # (group, topic, partition)


class ShareStateLog:
    """See the module docstring."""

    def __init__(
        self,
        transport: ShareStateTransport,
        topic_ids: Callable[[], dict[str, uuid.UUID]],
        *,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        """``topic_ids()``: topic name → id, of the topics that exist now."""
        self.transport = transport
        self.topic_ids = topic_ids
        self.clock = clock
        self._groups: dict[str, dict[str, PartitionState]] = {}
        #: key → leader epoch of the topic partition when this broker took it (``refresh``)
        self.leader_epochs: dict[Ident, int] = {}
        #: key → updates written since its last snapshot, for the keys this broker wrote a
        #: snapshot of; absent: the next write is a snapshot
        self._updates: dict[Ident, int] = {}
        self._written_start: dict[Ident, int] = {}
        self._pending: dict[Ident, None] = {}  # queued keys, in order
        self._queued = 0  # writes queued so far
        self._durable = 0  # writes durable so far (all queued up to it)
        self._writer: asyncio.Task[None] | None = None
        self._dropped: set[Ident] = set()  # discarded since last queued (``discard``)
        self._failure: Exception | None = None

    # -- the mirror (synchronous) -----------------------------------------------------------

    def load(self, group_id: str) -> dict[str, PartitionState]:
        """``"<topic>:<partition>"`` -> state, as last written, read or loaded (empty if
        none)."""
        return self._groups.setdefault(group_id, {})

    def groups(self) -> list[str]:
        """Every group with some state here."""
        return sorted(g for g, states in self._groups.items() if states)

    def write(self, group_id: str, changed: dict[str, PartitionState]) -> None:
        """Record ``changed`` partitions' states and queue them (:meth:`flush` makes them
        durable)."""
        states = self.load(group_id)
        for key, state in changed.items():
            states[key] = state
            topic, _, partition = key.rpartition(":")
            self._queue((group_id, topic, int(partition)))

    def delete(self, group_id: str, keys: list[str] | None = None) -> None:
        """Forget some partitions of a group, or the whole group (``keys`` None): tombstones
        for their records are queued."""
        states = self.load(group_id)
        for key in list(states) if keys is None else keys:
            if states.pop(key, None) is not None:
                topic, _, partition = key.rpartition(":")
                self._queue((group_id, topic, int(partition)))

    def discard(self, group_id: str, topic: str, partition: int) -> None:
        """This broker no longer leads the share-partition: its queued state is not written
        (the new leader's is newer) and its mirror entry is forgotten."""
        ident = (group_id, topic, partition)
        self._pending.pop(ident, None)
        self.load(group_id).pop(partition_key(topic, partition), None)
        self._updates.pop(ident, None)
        self._dropped.add(ident)  # not even a failed write of it is retried

    def _queue(self, ident: Ident) -> None:
        self._dropped.discard(ident)
        self._pending.pop(ident, None)
        self._pending[ident] = None
        self._queued += 1
        # Written at once in the background (a release or an expiry has no handler waiting
        # on it); ``flush`` waits for the same writer.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test driving the coordinator): ``flush`` writes
            return
        if self._writer is None or self._writer.done():
            self._failure = None
            self._writer = loop.create_task(self._write_pending())

    # -- durability (asynchronous) -----------------------------------------------------------

    async def flush(self) -> None:
        """Return once every write queued before the call is committed in the topic; raises
        ``ShareStateUnavailableError`` if the writer failed meanwhile (the keys stay queued:
        the next flush writes them again)."""
        target = self._queued
        while self._durable < target:
            if self._writer is None or self._writer.done():
                self._failure = None
                self._writer = asyncio.get_running_loop().create_task(self._write_pending())
            writer = self._writer
            await asyncio.shield(writer)
            if self._failure is not None and self._durable < target:
                raise ShareStateUnavailableError(str(self._failure))

    async def _write_pending(self) -> None:
        """Write the queued keys until none is left (one batch per state partition a round);
        stops at the first failure, with the keys of that round queued again."""
        while self._pending:
            round_end = self._queued
            idents = list(self._pending)
            self._pending.clear()
            try:
                count = await self.transport.partitions()
                by_partition: dict[int, list[RawRecord]] = {}
                for ident in idents:
                    made = self._records(ident)
                    if made is not None:
                        key, records = made
                        by_partition.setdefault(partition_for(key, count), []).extend(records)
                await asyncio.gather(*(
                    self.transport.append(p, _batch(records, self.clock()))
                    for p, records in sorted(by_partition.items())
                ))  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - handed to every waiter by flush
                for ident in idents:
                    if ident not in self._dropped:
                        self._pending.setdefault(ident, None)
                    self._updates.pop(ident, None)  # unknown whether it landed: snapshot next
                self._failure = exc
                log.warning("writing share-group state failed, will retry: %s", exc)
                return
            self._durable = max(self._durable, round_end)
        # Nothing queued is left: all of it was written, or discarded.
        self._durable = self._queued

    def _records(self, ident: Ident) -> tuple[ShareStateKey, list[RawRecord]] | None:
        """The records of ``ident``'s newest state (tombstones if it was deleted); None if
        its topic no longer exists."""
        group, topic, partition = ident
        topic_id = self.topic_ids().get(topic)
        if topic_id is None or ident in self._dropped:
            return None
        key = ShareStateKey(group, topic_id, partition)
        state = self._groups.get(group, {}).get(partition_key(topic, partition))
        if state is None:
            self._updates.pop(ident, None)
            return key, [(encode_key(SNAPSHOT, key), None), (encode_key(UPDATE, key), None)]
        start, records = state
        batches = to_batches([(o, _persisted(s), c) for o, s, c in records])
        epoch = self.leader_epochs.get(ident, -1)
        updates = self._updates.get(ident)
        if updates is None or updates >= SNAPSHOT_EVERY or start < self._written_start[ident]:
            now = self.clock()
            snapshot = ShareState(
                start, tuple(batches), leader_epoch=epoch, create_timestamp=now,
                write_timestamp=now,
            )  # fmt: skip
            self._updates[ident] = 0
            self._written_start[ident] = start
            return key, [(encode_key(SNAPSHOT, key), encode_snapshot(snapshot))]
        self._updates[ident] = updates + 1
        self._written_start[ident] = start
        return key, [(encode_key(UPDATE, key), encode_update(0, epoch, start, batches))]

    # -- reading back ---------------------------------------------------------------------------

    async def refresh(
        self, group_id: str, topic: str, partition: int, leader_epoch: int
    ) -> PartitionState | None:
        """Read the share-partition's state from the topic into the mirror (this broker now
        leads the topic partition at ``leader_epoch``); the state, or None if it has none.
        A state queued here and not yet written wins over what the topic holds. Raises
        ``ShareStateUnavailableError``."""
        ident = (group_id, topic, partition)
        topic_id = self.topic_ids().get(topic)
        self.leader_epochs[ident] = leader_epoch
        self._updates.pop(ident, None)  # this leadership's first write is a snapshot
        if ident in self._pending or topic_id is None:
            return self.load(group_id).get(partition_key(topic, partition))
        key = ShareStateKey(group_id, topic_id, partition)
        records = await self.transport.read(partition_for(key, await self.transport.partitions()))
        state: ShareState | None = None
        for raw_key, raw_value in records:
            decoded = decode_key(raw_key)
            if decoded is None or decoded[1] != key:
                continue
            record_type, _ = decoded
            state = _replay(state, record_type, raw_value)
        states = self.load(group_id)
        if ident in self._pending:  # written while we read: what we hold is newer
            return states.get(partition_key(topic, partition))
        if state is None:
            states.pop(partition_key(topic, partition), None)
            return None
        found = (state.start_offset, from_batches(state.batches))
        states[partition_key(topic, partition)] = found
        self._written_start[ident] = state.start_offset
        return found

    def load_partition(self, records: Iterable[RawRecord]) -> int:
        """Replay one partition of the topic (this broker became its leader) into the
        mirror, for the keys not queued here; how many share-partitions it holds."""
        names = {topic_id: name for name, topic_id in self.topic_ids().items()}
        states: dict[ShareStateKey, ShareState | None] = {}
        for raw_key, raw_value in records:
            decoded = decode_key(raw_key)
            if decoded is None:
                continue
            record_type, key = decoded
            states[key] = _replay(states.get(key), record_type, raw_value)
        live = 0
        for key, state in states.items():
            topic = names.get(key.topic_id)
            if topic is None or (key.group, topic, key.partition) in self._pending:
                continue
            held = self.load(key.group)
            if state is None:
                held.pop(partition_key(topic, key.partition), None)
                continue
            held[partition_key(topic, key.partition)] = (
                state.start_offset,
                from_batches(state.batches),
            )
            live += 1
        return live


def _replay(state: ShareState | None, record_type: int, raw: bytes | None) -> ShareState | None:
    """``apply`` one record, unless a leader of the topic partition wrote it after a newer
    leader had written (a lower leader epoch than the state's): the deposed leader's late
    write is fenced here, as Kafka's share coordinator fences it on write
    (FENCED_LEADER_EPOCH). A tombstone always applies."""
    value = None if raw is None else decode_value(record_type, raw)
    if value is not None and state is not None and value.leader_epoch < state.leader_epoch:
        return state
    return apply(state, value)


def _persisted(state: int) -> int:
    """What a record's state is written as: an acquired record as available (its lock dies
    with the broker that holds it; the delivery count it reached stays)."""
    return int(RecordState.AVAILABLE) if state == RecordState.ACQUIRED else state


def _batch(records: Sequence[RawRecord], now: int) -> bytes:
    return encode_batch(list(records), timestamps=[now] * len(records))
