"""``SharePartition`` against a model: a plain dict from every offset ever appended to its state,
delivery count, holder and lock deadline, with KIP-932's rules written out one offset at a time.

Hypothesis appends batches (some of them transaction markers), acquires for two members,
acknowledges (ACCEPT, RELEASE, REJECT, GAP, RENEW — sometimes records the member does not hold,
which must be refused whole), releases a member's records, moves the clock past locks and
restarts the partition from its snapshot. After every step the partition's invariants hold and
it agrees with the model on every offset it still tracks; every offset below its start is
done with in the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.broker.share.share_partition import (
    DONE,
    AcknowledgeType,
    AcquiredRange,
    InvalidRecordStateError,
    LogBatch,
    RecordState,
    SharePartition,
)

LOCK_MS = 100
LIMIT = 3
MAX_LOCKS = 6
MEMBERS = ("a", "b")


@dataclass
class Rec:
    state: RecordState = RecordState.AVAILABLE
    count: int = 0
    member: str | None = None
    deadline: float = 0.0


class SharePartitionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[LogBatch] = []
        self.hw = 0
        self.now = 0.0
        self.model: dict[int, Rec] = {}
        self.sp = self._new(0, [])

    @staticmethod
    def _new(start: int, restored: list[tuple[int, RecordState, int]]) -> SharePartition:
        return SharePartition(
            start, lock_ms=LOCK_MS, delivery_limit=LIMIT, max_record_locks=MAX_LOCKS,
            restored=restored,
        )  # fmt: skip

    # -- the model's rules, one offset at a time ----------------------------------------------

    def _returned(self, rec: Rec) -> None:
        rec.state = RecordState.ARCHIVED if rec.count >= LIMIT else RecordState.AVAILABLE
        rec.member, rec.deadline = None, 0.0

    def _expire(self) -> None:
        for rec in self.model.values():
            if rec.state is RecordState.ACQUIRED and rec.deadline <= self.now:
                self._returned(rec)

    def _control(self, offset: int) -> bool:
        return any(b.base <= offset <= b.last and b.control for b in self.batches)

    # -- rules --------------------------------------------------------------------------------

    @rule(n=st.integers(1, 4), control=st.booleans())
    def append(self, n: int, control: bool) -> None:
        n = 1 if control else n
        self.batches.append(LogBatch(self.hw, self.hw + n - 1, control))
        self.hw += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 5))
    def acquire(self, member: str, max_records: int) -> None:
        offset = self.sp.next_fetch_offset(self.now)
        read = [b for b in self.batches if b.last >= offset]
        got = self.sp.acquire(
            member, read, high_watermark=self.hw, max_records=max_records, now_ms=self.now
        )
        self._expire()
        budget = max_records
        end = len(self.model)  # the model holds every offset from 0 that was reached
        start = next((o for o in range(end) if self.model[o].state not in DONE), end)
        expected: list[AcquiredRange] = []
        for o in range(offset, self.hw):
            if budget <= 0 or (o >= end and o - start >= MAX_LOCKS):
                break
            rec = self.model.setdefault(o, Rec())
            if rec.state is not RecordState.AVAILABLE:
                continue
            if self._control(o):
                rec.state = RecordState.ARCHIVED
                continue
            rec.state, rec.member, rec.deadline = RecordState.ACQUIRED, member, self.now + LOCK_MS
            rec.count += 1
            budget -= 1
            if expected and expected[-1].last == o - 1 and expected[-1].delivery_count == rec.count:
                expected[-1] = AcquiredRange(expected[-1].first, o, rec.count)
            else:
                expected.append(AcquiredRange(o, o, rec.count))
        assert got == expected

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 40),
        length=st.integers(1, 4),
        kind=st.sampled_from(list(AcknowledgeType)),
    )
    def acknowledge(self, member: str, first: int, length: int, kind: AcknowledgeType) -> None:
        last = first + length - 1
        self.sp.expire(self.now)
        self._expire()
        valid = all(
            (rec := self.model.get(o)) is not None
            and rec.state is RecordState.ACQUIRED
            and rec.member == member
            for o in range(first, last + 1)
        )
        if not valid:
            with pytest.raises(InvalidRecordStateError):
                self.sp.acknowledge(member, first, last, kind)
            return
        self.sp.acknowledge(member, first, last, kind)
        for o in range(first, last + 1):
            rec = self.model[o]
            if kind is AcknowledgeType.RENEW:
                rec.deadline += LOCK_MS
            elif kind is AcknowledgeType.ACCEPT:
                rec.state, rec.member, rec.deadline = RecordState.ACKNOWLEDGED, None, 0.0
            elif kind is AcknowledgeType.RELEASE:
                self._returned(rec)
            else:
                rec.state, rec.member, rec.deadline = RecordState.ARCHIVED, None, 0.0

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member: str) -> None:
        self.sp.release_member(member)
        for rec in self.model.values():
            if rec.state is RecordState.ACQUIRED and rec.member == member:
                self._returned(rec)

    @rule(ms=st.integers(1, 150))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule()
    def restart(self) -> None:
        """A broker restart: the partition comes back from what it would have written."""
        self.sp = self._new(
            self.sp.start_offset, [(o, RecordState(s), c) for o, s, c in self.sp.snapshot()]
        )
        for rec in self.model.values():
            if rec.state is RecordState.ACQUIRED:
                self._returned(rec)

    # -- what must hold -----------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        self.sp.check()
        for o in range(self.sp.start_offset):
            assert self.model[o].state in DONE, o
        for o, rec in self.sp.records.items():
            m = self.model[o]
            assert (rec.state, rec.delivery_count, rec.member) == (m.state, m.count, m.member)
            if rec.state is RecordState.ACQUIRED:
                assert rec.deadline_ms == m.deadline
        assert all(o < self.sp.end_offset for o in self.model)


SharePartitionModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
test_share_partition_model = SharePartitionModel.TestCase
