"""``TransactionMetadata``: one transactional id's state at its coordinator (Kafka's
``TransactionMetadata`` and ``TransactionState``).

States and the transitions allowed (Kafka's ``validPreviousStates``)::

    Empty, Complete*  --AddPartitionsToTxn / AddOffsetsToTxn-->  Ongoing
    Ongoing  --EndTxn(commit)-->  PrepareCommit  --markers written-->  CompleteCommit
    Ongoing  --EndTxn(abort), timeout, re-init-->  PrepareAbort  --markers-->  CompleteAbort
    Empty, Complete*  --InitProducerId (epoch bump)-->  Empty

Prepare* is written to ``__transaction_state`` before any marker, so a coordinator that
restarts finds it and finishes the markers (``TransactionCoordinator``); Complete* is written
once every partition has its marker. Changes are staged (:meth:`TransactionMetadata.staged`
returns a changed copy), written to the log, and only then made current — a failed write
leaves the state as it was (stage, write, swap).

``partitions`` are the data partitions the transaction wrote to (markers go there);
``groups`` the consumer groups it committed offsets for (AddOffsetsToTxn), whose pending
offsets (TxnOffsetCommit) become visible at commit: they are kept in memory until
PrepareCommit, which carries them (``pending_offsets``), so a coordinator that restarts
between PrepareCommit and CompleteCommit still applies them.

Not thread-safe: the coordinator changes a transactional id's metadata under its lock.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

#: The largest producer epoch before the coordinator moves to a new producer id (Kafka's
#: Short.MaxValue - 1: the last epoch is kept for fencing).
MAX_EPOCH = 32766


class TransactionState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
}


class IllegalTransitionError(Exception):
    """A state change Kafka's state machine does not allow (a coordinator bug)."""


#: A pending transactional offset: (topic, partition) → (offset, leader epoch, metadata).
PendingOffsets = dict[str, dict[tuple[str, int], tuple[int, int, str | None]]]


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    groups: frozenset[str] = frozenset()
    txn_start_ms: int = -1
    last_update_ms: int = -1
    pending_offsets: PendingOffsets = field(default_factory=dict)  # group → offsets

    @property
    def is_prepared(self) -> bool:
        return self.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    def staged(
        self, state: TransactionState, now_ms: int, **changes: object
    ) -> TransactionMetadata:
        """A copy moved to ``state`` with ``changes``; raises :class:`IllegalTransitionError`
        for a transition the state machine does not allow."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: expected one of "
                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[state])} before {state.value}, "
                f"found {self.state.value}"
            )
        return dataclasses.replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]
