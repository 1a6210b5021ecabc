"""``SharePartition``: the in-flight records of one share-partition — one topic partition as one
share group consumes it (KIP-932; Kafka's ``SharePartition.java``).

State, per share-partition::

    start_offset          every offset below it is ACKNOWLEDGED or ARCHIVED (done with)
    end_offset            the first offset never acquired (the next new record to hand out)
    records[o], start_offset <= o < end_offset:  (state, delivery_count, member, lock deadline)

Invariants (``check`` asserts them; every mutator keeps them):

* ``start_offset <= end_offset``; ``records`` holds exactly the offsets in between, at most
  ``max_record_locks`` of them once any was acquired past the window (a restore may hold more).
* ``records[start_offset]`` is not done with (else ``start_offset`` would have moved past it),
  unless the partition has nothing in flight (``start_offset == end_offset``).
* An ACQUIRED record has a member and a lock deadline; no other state has either.
* ``1 <= delivery_count <= delivery_limit`` for every record acquired at least once; an
  AVAILABLE record was delivered fewer than ``delivery_limit`` times (one that reaches the
  limit and comes back is ARCHIVED instead).

Transitions (Kafka's ``RecordState``)::

    AVAILABLE --acquire (count+1)--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
    ACQUIRED --RELEASE / lock expired / member left--> AVAILABLE, or ARCHIVED at the limit
    ACQUIRED --REJECT or GAP--> ARCHIVED

``acquire`` hands out the AVAILABLE records first, then new offsets from the log (what the
caller read, described batch by batch), at most ``max_records`` per call. New offsets are taken
only while the in-flight window ``end_offset - start_offset`` is below ``max_record_locks``
(Kafka's ``group.share.partition.max.record.locks``): a record held at the start stops the
partition from running ahead, and bounds ``records`` at that many. Offsets the log does not
hold (compacted away) and control records (transaction markers) are ARCHIVED as they are
reached, never delivered.

Time is passed in (``now_ms``): the class does no I/O and keeps no clock, so tests drive lock
expiry directly. Not thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (the ones ``__share_group_state`` records carry)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge's ``acknowledge_types`` values."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class InvalidRecordStateError(Exception):
    """An acknowledgement names a record that is not ACQUIRED by that member (Kafka's
    INVALID_RECORD_STATE); nothing of the acknowledgement was applied."""


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class LogBatch:
    """What the log holds from ``base`` to ``last`` (inclusive); ``control``: a transaction
    marker batch, never delivered."""

    base: int
    last: int
    control: bool = False


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first: int
    last: int
    delivery_count: int


class SharePartition:
    """See the module docstring."""

    def __init__(
        self,
        start_offset: int,
        *,
        lock_ms: int,
        delivery_limit: int,
        max_record_locks: int,
        restored: Iterable[tuple[int, RecordState, int]] = (),
    ) -> None:
        """``restored``: ``(offset, state, delivery_count)`` of the persisted records at or
        above ``start_offset`` (``snapshot``'s); an ACQUIRED one comes back AVAILABLE, its lock
        lost with the broker that held it — ARCHIVED if it had reached the delivery limit (an
        acquired record is persisted as AVAILABLE with its count, so an AVAILABLE one at the
        limit is one of those)."""
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_record_locks = max_record_locks
        self.records: dict[int, InFlightRecord] = {}
        for offset, state, count in sorted(restored):
            if offset < start_offset:
                continue
            for gap in range(self.end_offset, offset):
                self.records[gap] = InFlightRecord()
            if state in (RecordState.ACQUIRED, RecordState.AVAILABLE):
                state = self._returned_state(count)
            self.records[offset] = InFlightRecord(state, count)
            self.end_offset = offset + 1
        self._advance_start()

    # -- reading ------------------------------------------------------------------------------

    def next_fetch_offset(self, now_ms: float) -> int:
        """Where the caller should read the log from: the first AVAILABLE record (after
        expiring locks), else ``end_offset``."""
        self.expire(now_ms)
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def snapshot(self) -> list[tuple[int, int, int]]:
        """``(offset, state, delivery_count)`` of every in-flight record: what a restart needs
        (with ``start_offset``) to deliver no acknowledged record again and lose none."""
        return [(o, int(r.state), r.delivery_count) for o, r in sorted(self.records.items())]

    # -- changing -----------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        batches: Sequence[LogBatch],
        *,
        high_watermark: int,
        max_records: int,
        now_ms: float,
    ) -> list[AcquiredRange]:
        """Acquire for ``member`` the AVAILABLE records and new offsets that ``batches`` (the
        log read from ``next_fetch_offset``, in order) hold below ``high_watermark``; returns
        the acquired ranges, each of one delivery count."""
        self.expire(now_ms)
        budget = max_records
        out: list[AcquiredRange] = []
        deadline = now_ms + self.lock_ms
        for batch in batches:
            for offset in range(max(batch.base, self.start_offset), batch.last + 1):
                if offset >= high_watermark or budget <= 0:
                    return self._finish(out)
                if (
                    offset >= self.end_offset
                    and offset - self.start_offset >= self.max_record_locks
                ):
                    return self._finish(out)  # the in-flight window is full
                self._archive_gap_before(offset)
                if offset >= self.end_offset:
                    self.records[offset] = InFlightRecord()
                    self.end_offset = offset + 1
                record = self.records[offset]
                if batch.control and record.state is RecordState.AVAILABLE:
                    record.state = RecordState.ARCHIVED
                    continue
                if record.state is not RecordState.AVAILABLE:
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member = member
                record.deadline_ms = deadline
                budget -= 1
                last = out[-1] if out else None
                if (
                    last is not None
                    and last.last == offset - 1
                    and last.delivery_count == record.delivery_count
                ):
                    out[-1] = AcquiredRange(last.first, offset, last.delivery_count)
                else:
                    out.append(AcquiredRange(offset, offset, record.delivery_count))
        return self._finish(out)

    def acknowledge(self, member: str, first: int, last: int, kind: AcknowledgeType) -> None:
        """Apply one acknowledgement to ``first..last`` (inclusive), all or nothing: every
        offset must be ACQUIRED by ``member``, else :class:`InvalidRecordStateError`."""
        if first > last or first < self.start_offset or last >= self.end_offset:
            raise InvalidRecordStateError(
                f"offsets {first}-{last} are not in flight "
                f"({self.start_offset}-{self.end_offset - 1} are)"
            )
        for offset in range(first, last + 1):
            record = self.records[offset]
            if record.state is not RecordState.ACQUIRED or record.member != member:
                raise InvalidRecordStateError(
                    f"offset {offset} is {record.state.name}"
                    + (" by another member" if record.state is RecordState.ACQUIRED else "")
                )
        for offset in range(first, last + 1):
            record = self.records[offset]
            if kind is AcknowledgeType.RENEW:
                record.deadline_ms += self.lock_ms
                continue
            if kind is AcknowledgeType.ACCEPT:
                state = RecordState.ACKNOWLEDGED
            elif kind is AcknowledgeType.RELEASE:
                state = self._returned_state(record.delivery_count)
            else:  # REJECT, GAP
                state = RecordState.ARCHIVED
            self._set(record, state)
        self._advance_start()

    def release_member(self, member: str) -> int:
        """Return every record ``member`` holds (it left or its session closed); how many."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member == member:
                self._set(record, self._returned_state(record.delivery_count))
                released += 1
        self._advance_start()
        return released

    def expire(self, now_ms: float) -> int:
        """Return the records whose acquisition lock has run out; how many."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self._set(record, self._returned_state(record.delivery_count))
                expired += 1
        if expired:
            self._advance_start()
        return expired

    def reset_start(self, offset: int) -> None:
        """Move the start to ``offset`` (AlterShareGroupOffsets, or the log start passing it
        by retention): everything in flight is forgotten."""
        self.records.clear()
        self.start_offset = self.end_offset = offset

    def check(self) -> None:
        """Assert the invariants of the module docstring (tests call it after each step)."""
        assert self.start_offset <= self.end_offset
        assert set(self.records) == set(range(self.start_offset, self.end_offset))
        if self.records:
            assert self.records[self.start_offset].state not in DONE
        for record in self.records.values():
            acquired = record.state is RecordState.ACQUIRED
            assert (record.member is not None) == acquired
            assert 0 <= record.delivery_count <= self.delivery_limit
            if record.state is RecordState.AVAILABLE:
                assert record.delivery_count < self.delivery_limit

    # -- helpers ------------------------------------------------------------------------------

    def _returned_state(self, delivery_count: int) -> RecordState:
        if delivery_count >= self.delivery_limit:
            return RecordState.ARCHIVED
        return RecordState.AVAILABLE

    @staticmethod
    def _set(record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member = None
        record.deadline_ms = 0.0

    def _archive_gap_before(self, offset: int) -> None:
        """Offsets between ``end_offset`` and ``offset`` are not in the log: archive them."""
        for gap in range(self.end_offset, offset):
            self.records[gap] = InFlightRecord(RecordState.ARCHIVED)
        self.end_offset = max(self.end_offset, offset)

    def _finish(self, out: list[AcquiredRange]) -> list[AcquiredRange]:
        self._advance_start()
        return out

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            if self.records[self.start_offset].state not in DONE:
                return
            del self.records[self.start_offset]
            self.start_offset += 1
