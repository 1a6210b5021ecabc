"""``ProducerStateManager``: what idempotence needs to know about each producer id, per
partition, and its ``<offset>.snapshot`` files.

For every producer id the log keeps its current epoch and the metadata of its last 5 batches
(first and last sequence, first and last offset) — 5 because that is how many requests an
idempotent producer may have in flight (``max.in.flight.requests.per.connection``). A batch
is then, in order of the checks:

* from an older epoch than the current one — :class:`InvalidProducerEpochError`;
* a retry of one of those 5 — a duplicate: acknowledged with its original offsets and not
  appended again;
* the first of a new epoch, or of a producer id never seen — its sequence must be 0, else
  :class:`OutOfOrderSequenceError` (new epoch) or :class:`UnknownProducerIdError`;
* otherwise its first sequence must follow the last one (mod 2^31), else
  :class:`OutOfOrderSequenceError` ("expected sequence 12, found 14").

Transactions (KIP-98): a transactional batch of a producer with no open transaction opens
one at its base offset; the producer's next control batch (a COMMIT or ABORT marker, see
``control_batch``) closes it. A marker is checked for its producer epoch (an older one than
the current: :class:`InvalidProducerEpochError`, a zombie) and, on the leader's path, for
its **coordinator epoch** (:meth:`ProducerStateManager.check_marker`): each producer id
remembers the coordinator epoch of the last marker written for it, and a marker from an
older coordinator epoch — a transaction coordinator that lost its ``__transaction_state``
partition and has not learnt it yet — raises :class:`TransactionCoordinatorFencedError`
(Kafka's ``ProducerAppendInfo.checkCoordinatorEpoch``; a follower copying its leader does
not check, as Kafka's REPLICATION origin only logs). A newer producer epoch (the
coordinator fenced the producer when it aborted) becomes the current one and restarts the
sequences; the coordinator epoch survives epoch changes, as Kafka's entry keeps it. An
empty control batch (a marker the cleaner emptied) changes nothing.

The open transactions give the partition's **first unstable offset**, the
smallest of their first offsets: the last stable offset (LSO) is it, or the high watermark
when no transaction is open. :meth:`update` returns a :class:`CompletedTxn` for a marker; for
an ABORT the log adds it to its transaction index with :meth:`last_stable_offset_after`.

Snapshot file, JSON (``<20-digit offset>.snapshot`` in the partition dir; the offset is the
log end offset the state is valid for)::

    {"version": 1, "offset": 1842,
     "producers": [{"id": 4000, "epoch": 0, "txn_first_offset": 1830,
                    "coordinator_epoch": 3,
                    "batches": [[first_seq, last_seq, first_offset, last_offset], ...]}]}

``txn_first_offset`` (null or absent: no open transaction) came with transactions; a
snapshot without it is read as having none open, which is what it meant.
``coordinator_epoch`` (absent: -1, no marker seen) came with the coordinator-epoch check.

A snapshot is taken when a segment rolls and when the log closes; on load the newest snapshot
at or below the log end is read and the batches after it are replayed from their headers.
A snapshot that does not parse is ignored (the log is replayed from its start instead).

Thread safety: none; ``Log`` calls it with its lock held.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from sluice.broker.log.control_batch import COMMIT, EndTxnMarker
from sluice.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from sluice.broker.log.record_batch import BatchHeader

SNAPSHOT_SUFFIX = ".snapshot"
MAX_BATCHES_PER_PRODUCER = 5
SEQUENCE_MODULUS = 1 << 31


class BatchMetadata(NamedTuple):
    """One appended batch of a producer: what a retry of it is recognised by and answered
    with. A NamedTuple, not a frozen dataclass: one is built per idempotent append, and a
    frozen dataclass's ``__init__`` costs several times more."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    txn_first_offset: int | None = None  # the open transaction's first offset, if any
    coordinator_epoch: int = -1  # of the last marker written for this producer id


class LastRecord(NamedTuple):
    """A producer's last batch in the log, as the cleaner must keep it (Kafka's
    ``LastRecord``): the last offset of its last data batch, or None when its last batch is
    a marker of ``producer_epoch`` (which then must stay, for fencing)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction a marker at ``last_offset`` closed (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerStateManager:
    """Per-partition idempotence state. See the module docstring."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries: dict[int, ProducerEntry] = {}
        # Open transactions: producer id -> first offset (insertion order = offset order).
        self.ongoing: dict[int, int] = {}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is closed (Kafka's ``lastStableOffset(completedTxn)``),
        as its transaction-index entry records it."""
        rest = [o for pid, o in self.ongoing.items() if pid != completed.producer_id]
        return min(rest) if rest else completed.last_offset + 1

    def check(self, header: BatchHeader, *, coordinator: bool = False) -> BatchMetadata | None:
        """Validate a client batch; return the original metadata if it is a duplicate.
        ``coordinator``: a coordinator's batch (a marker, transactional offsets), whose epoch
        is checked but not its sequence, and which is never a duplicate (Kafka checks
        sequences for ``AppendOrigin.CLIENT`` only)."""
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self.entries.get(pid)
        seq = header.base_sequence
        if entry is not None and header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid}: expected epoch >= {entry.epoch}, found {header.producer_epoch}"
            )
        if header.is_control or coordinator:
            return None  # a marker has no sequence; a coordinator keeps none per producer
        if entry is None or header.producer_epoch != entry.epoch:
            if seq != 0:
                if entry is None:
                    raise UnknownProducerIdError(
                        f"producer {pid}: no state for this producer id, so expected "
                        f"sequence 0, found {seq}"
                    )
                raise OutOfOrderSequenceError(
                    f"producer {pid}: expected sequence 0 for new epoch "
                    f"{header.producer_epoch}, found {seq}"
                )
            return None
        for batch in entry.batches:
            if batch.first_seq == seq and batch.last_seq == header.last_sequence:
                return batch
        if entry.batches:
            expected = (entry.batches[-1].last_seq + 1) % SEQUENCE_MODULUS
            if seq != expected:
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {entry.epoch}: expected sequence {expected}, found {seq}"
                )
        return None

    def check_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> None:
        """Refuse a coordinator's marker from an older coordinator epoch than the last marker
        of this producer id (:class:`TransactionCoordinatorFencedError`)."""
        entry = self.entries.get(header.producer_id)
        if marker is None or entry is None:
            return
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {header.producer_id}: expected a marker from coordinator epoch >= "
                f"{entry.coordinator_epoch}, found {marker.coordinator_epoch} (a zombie "
                "coordinator)"
            )

    def last_records(self) -> dict[int, LastRecord]:
        """Producer id → its :class:`LastRecord` (Kafka's ``lastRecordsOfActiveProducers``)."""
        return {
            pid: LastRecord(e.batches[-1].last_offset if e.batches else None, e.epoch)
            for pid, e in self.entries.items()
        }

    def check_batches(
        self, headers: Sequence[BatchHeader], *, coordinator: bool = False
    ) -> BatchMetadata | None:
        """:meth:`check` for the batches of one append. An idempotent producer sends one
        batch per partition per request (Kafka's rule too): more than one with a producer id
        raises :class:`InvalidRecordError`."""
        if len(headers) == 1:
            return self.check(headers[0], coordinator=coordinator)
        if any(h.producer_id >= 0 for h in headers):
            raise InvalidRecordError(
                f"expected one batch per append from an idempotent producer, found {len(headers)}"
            )
        return None

    def update(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Record an appended batch (offsets already assigned). ``marker``: what a control
        batch says (None for an empty one, which changes nothing); the transaction it closes
        is returned (None if the producer had none open here)."""
        pid = header.producer_id
        if pid < 0 or (header.is_control and marker is None):
            return None
        entry = self.entries.get(pid)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = ProducerEntry(
                pid,
                header.producer_epoch,
                txn_first_offset=entry.txn_first_offset if entry is not None else None,
                coordinator_epoch=entry.coordinator_epoch if entry is not None else -1,
            )
            self.entries[pid] = entry
        if marker is not None:
            first = entry.txn_first_offset
            entry.txn_first_offset = None
            entry.coordinator_epoch = marker.coordinator_epoch
            self.ongoing.pop(pid, None)
            if first is None:
                return None
            return CompletedTxn(pid, first, header.base_offset, marker.kind != COMMIT)
        if header.is_transactional and entry.txn_first_offset is None:
            entry.txn_first_offset = header.base_offset
            self.ongoing[pid] = header.base_offset
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset
            )
        )
        return None

    def clear(self) -> None:
        self.entries.clear()
        self.ongoing.clear()

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if len(stem) == 20 and stem.isdigit():
                    offsets.append(int(stem))
        return sorted(offsets)

    def _path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def take_snapshot(self, offset: int, keep: int = 2) -> None:
        """Write the state as valid at log end ``offset``; keep the ``keep`` newest files."""
        doc = {
            "version": 1,
            "offset": offset,
            "producers": [
                {
                    "id": e.producer_id,
                    "epoch": e.epoch,
                    "txn_first_offset": e.txn_first_offset,
                    "coordinator_epoch": e.coordinator_epoch,
                    "batches": [
                        [b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in e.batches
                    ],
                }
                for e in self.entries.values()
            ],
        }
        path = self._path(offset)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: leave no half-written file behind
            raise
        for old in self.snapshot_offsets()[:-keep]:
            self._path(old).unlink(missing_ok=True)

    def load_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest snapshot at or below ``log_end_offset`` (deleting newer ones, which
        describe batches a truncation or a crash removed). Returns its offset, or None."""
        self.clear()
        for offset in reversed(self.snapshot_offsets()):
            path = self._path(offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                if doc.get("version") != 1 or doc.get("offset") != offset:
                    raise ValueError(f"expected version 1 at offset {offset}")
                for p in doc["producers"]:
                    txn_first = p.get("txn_first_offset")
                    entry = ProducerEntry(
                        int(p["id"]),
                        int(p["epoch"]),
                        txn_first_offset=None if txn_first is None else int(txn_first),
                        coordinator_epoch=int(p.get("coordinator_epoch", -1)),
                    )
                    for first_seq, last_seq, first_offset, last_offset in p["batches"]:
                        entry.batches.append(
                            BatchMetadata(first_seq, last_seq, first_offset, last_offset)
                        )
                    self.entries[entry.producer_id] = entry
                ongoing = [e for e in self.entries.values() if e.txn_first_offset is not None]
                for e in sorted(ongoing, key=lambda e: e.txn_first_offset or 0):
                    self.ongoing[e.producer_id] = e.txn_first_offset or 0
                return offset
            except (ValueError, KeyError, TypeError):
                self.clear()
                path.unlink(missing_ok=True)
        return None

    def delete_snapshots(self) -> None:
        for offset in self.snapshot_offsets():
            self._path(offset).unlink(missing_ok=True)
