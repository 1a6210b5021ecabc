"""``PendingTxnOffsets``: the transactional offsets of one ``__consumer_offsets`` partition
whose transaction has no marker there yet, per producer id (Kafka's
``pendingTransactionalOffsetCommits`` of ``GroupMetadata``, and the ``pendingOffsets`` of
``GroupMetadataManager.loadGroupsAndOffsets``).

Each entry is keyed (group, topic, partition) and holds the **appended offset** — the base
offset of the transactional batch that wrote it in ``__consumer_offsets`` — with its value
(``None`` for a transactional tombstone, which only removes an earlier pending entry, as
Kafka's loader does). The appended offset orders a pending entry against the group's
committed one when a COMMIT marker arrives: the later in the log wins (Kafka's
``CommitRecordMetadataAndOffset.olderThan``), so a plain OffsetCommit appended after the
transaction's records but before its marker is not overwritten by the marker.

Invariant: every entry of producer ``p`` was appended after the last marker of ``p`` in the
partition (a marker takes all of ``p``'s entries, :meth:`PendingTxnOffsets.take`).

Generic over the value type, so that ``offset_store`` (which owns ``CommittedOffset``) can use
it without an import circle. Thread safety: none of its own; ``OffsetStore`` calls it under its
lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

V = TypeVar("V")
#: (group, topic, partition)
Key = tuple[str, str, int]


class PendingTxnOffsets(Generic[V]):
    """See the module docstring."""

    def __init__(self) -> None:
        # producer id → key → (appended offset, value)
        self._held: dict[int, dict[Key, tuple[int, V | None]]] = {}

    def __bool__(self) -> bool:
        return bool(self._held)

    def add(self, producer_id: int, key: Key, appended: int, value: V | None) -> None:
        """A transactional record of ``producer_id`` at ``appended`` (a later record of the
        same key replaces it; a tombstone removes it, the producer staying pending)."""
        held = self._held.setdefault(producer_id, {})
        if value is None:
            held.pop(key, None)
        else:
            held[key] = (appended, value)

    def take(self, producer_id: int) -> dict[Key, tuple[int, V | None]]:
        """The marker of ``producer_id`` reached the partition: all its entries, removed."""
        return self._held.pop(producer_id, {})

    def has(self, group: str, topic: str, partition: int) -> bool:
        """Whether any producer holds an entry for the group's ``topic``-``partition``
        (Kafka's ``hasPendingOffsetCommitsForTopicPartition``, transactional part)."""
        key = (group, topic, partition)
        return any(key in held for held in self._held.values())

    def remove(self, keys: Iterable[Key]) -> None:
        """Drop ``keys`` from every producer (the offsets were deleted: Kafka's
        ``removeOffsets``); producers left without entries stay pending."""
        gone = set(keys)
        for held in self._held.values():
            for key in gone & held.keys():
                del held[key]

    def producers(self) -> dict[int, dict[Key, V | None]]:
        """Producer id → its pending entries (for diagnostics and tests)."""
        return {
            pid: {k: v for k, (_, v) in sorted(held.items())}
            for pid, held in sorted(self._held.items())
        }
