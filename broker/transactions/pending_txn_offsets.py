"""``PendingTxnOffsets``: the offsets a transactional producer sent to a *group* coordinator
(TxnOffsetCommit), held there until the transaction's marker reaches the group's
``__consumer_offsets`` partition (Kafka's ``pendingTransactionalOffsetCommits`` of
``GroupMetadata``).

Kafka's flow, which this follows: AddOffsetsToTxn (to the transaction coordinator) adds the
group's ``__consumer_offsets`` partition to the transaction; TxnOffsetCommit goes to the
group coordinator — the leader of that partition, usually another broker — which holds the
offsets as pending, per producer id; EndTxn makes the transaction coordinator send the marker
to every partition of the transaction, that one included, and the marker makes the group
coordinator commit (COMMIT) or drop (ABORT) the producer's pending offsets for the groups of
that partition (:meth:`PendingTxnOffsets.complete`).

Fencing: the highest producer epoch seen per producer id (from TxnOffsetCommit and markers)
is kept; a TxnOffsetCommit of an older epoch is refused (PRODUCER_FENCED), so a zombie cannot
slip offsets into its successor's transaction.

Durability, and how it differs from Kafka: Kafka writes the pending offsets to
``__consumer_offsets`` at once, as transactional records that a reload replays. Sluice's
offset store reads every record of that topic as a committed offset (and cannot read a
control record), so the offsets are held in memory here until the marker, then committed
durably (acks=all) through the offset store. A group coordinator that dies in between loses
them; see ``TransactionCoordinator`` for the path that keeps them durable when the
transaction and group coordinators are one broker (a standalone broker always).

Thread safety: the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sluice.broker.protocol.errors import Errors
from sluice.broker.transactions.transaction_metadata import PendingOffsets

#: (topic, partition, offset, leader epoch, metadata)
OffsetEntry = tuple[str, int, int, int, str | None]


class PendingTxnOffsets:
    """See the module docstring."""

    def __init__(self) -> None:
        # producer id → (its epoch, group → (topic, partition) → (offset, leader epoch, meta))
        self._held: dict[int, tuple[int, PendingOffsets]] = {}
        self._epochs: dict[int, int] = {}

    def hold(self, producer_id: int, producer_epoch: int, group: str,
             offsets: Sequence[OffsetEntry]) -> Errors:  # fmt: skip
        """Hold ``offsets`` for ``group`` until the producer's marker; PRODUCER_FENCED if a
        newer epoch of the producer was seen."""
        if producer_epoch < self._epochs.get(producer_id, -1):
            return Errors.PRODUCER_FENCED
        self._epochs[producer_id] = producer_epoch
        epoch, pending = self._held.get(producer_id, (producer_epoch, {}))
        if epoch != producer_epoch:  # a newer epoch: the old one's offsets died with it
            pending = {}
        held = pending.setdefault(group, {})
        for topic, partition, offset, leader_epoch, metadata in offsets:
            held[(topic, partition)] = (offset, leader_epoch, metadata)
        self._held[producer_id] = (producer_epoch, pending)
        return Errors.NONE

    def complete(
        self, producer_id: int, producer_epoch: int, commit: bool,
        in_partition: Callable[[str], bool],
    ) -> dict[str, list[OffsetEntry]]:  # fmt: skip
        """The marker of ``producer_id`` reached a partition: take its pending offsets of the
        groups ``in_partition`` holds. Returns what to commit (empty for an abort, or for
        offsets of an older epoch than the marker's)."""
        self._epochs[producer_id] = max(self._epochs.get(producer_id, -1), producer_epoch)
        held = self._held.get(producer_id)
        if held is None:
            return {}
        epoch, pending = held
        taken = {g: pending.pop(g) for g in [g for g in pending if in_partition(g)]}
        if not pending:
            del self._held[producer_id]
        if not commit or epoch != producer_epoch:
            return {}
        return {
            group: [(t, p, o, e, m) for (t, p), (o, e, m) in sorted(offsets.items())]
            for group, offsets in sorted(taken.items())
        }

    def restore(self, producer_id: int, producer_epoch: int,
                offsets: dict[str, list[OffsetEntry]]) -> None:  # fmt: skip
        """Put back what :meth:`complete` took, when committing it failed (the marker is
        then retried)."""
        for group, entries in offsets.items():
            self.hold(producer_id, producer_epoch, group, entries)

    def pending(self, producer_id: int) -> dict[str, list[OffsetEntry]]:
        """The producer's held offsets (for tests and diagnostics)."""
        _, pending = self._held.get(producer_id, (0, {}))
        return {
            g: [(t, p, o, e, m) for (t, p), (o, e, m) in sorted(offsets.items())]
            for g, offsets in sorted(pending.items())
        }
