"""A share-partition reloaded from ``__share_group_state`` against a model: what it last
committed.

Hypothesis drives one share-partition of a ``ShareCoordinator`` whose ``ShareStateLog`` writes
to real logs — appends to the partition, acquisitions by two members, acknowledgements (ACCEPT,
RELEASE, REJECT; refused ones change nothing), a member's records released, each change
written and flushed as the broker's handlers do — and fails it over: a new coordinator over
the logs reopened reads the state back (snapshots, updates and all) and builds the partition
again. The model is the state at the last flush, acquired records counted as returned
(archived at the delivery limit, which moves the start past those at its head). After a
failover the partition agrees with it on its start and on every offset: nothing acknowledged
or archived is handed out again, nothing not done with is lost (it is in flight or past the
end, never acquired)."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.broker.share.share_coordinator import AUTO_OFFSET_RESET, ShareCoordinator
from sluice.broker.share.share_partition import (
    DONE,
    AcknowledgeType,
    InvalidRecordStateError,
    LogBatch,
    RecordState,
    SharePartition,
)
from sluice.broker.share.share_state_log import ShareStateLog
from tests.broker.share.state_topic import LocalStateTopic

LIMIT = 3
IDS = {"t": uuid.UUID(int=9)}
MEMBERS = ("a", "b")


class ShareStateReload(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.topic = LocalStateTopic(Path(self.dir.name), partitions=2)
        self.batches: list[LogBatch] = []
        self.hw = 0
        self.now = 0.0
        self.coordinator, self.sp = self._open()
        self._commit()

    def teardown(self) -> None:
        self.topic.close()
        self.dir.cleanup()

    def _open(self) -> tuple[ShareCoordinator, SharePartition]:
        c = ShareCoordinator(
            ShareStateLog(self.topic, lambda: IDS), lock_ms=1_000_000, delivery_limit=LIMIT
        )
        c.group_configs["g"] = {AUTO_OFFSET_RESET: "earliest"}
        asyncio.run(c.store.refresh("g", "t", 0, leader_epoch=1))
        return c, c.partition("g", "t", 0, lambda: (0, self.hw))

    def _commit(self) -> None:
        """Write and flush, as a handler does; the model becomes what was written."""
        self.coordinator.persist("g", [("t", 0)])
        asyncio.run(self.coordinator.flush())
        returned = {RecordState.ACQUIRED, RecordState.AVAILABLE}
        self.committed = {
            o: (
                (RecordState.ARCHIVED if c >= LIMIT else RecordState.AVAILABLE)
                if RecordState(s) in returned
                else RecordState(s),
                c,
            )
            for o, s, c in self.sp.snapshot()
        }
        # Returned at the limit, a record at the start is archived: the start moves past it.
        start = self.sp.start_offset
        while start in self.committed and self.committed[start][0] in DONE:
            start += 1
        self.committed_start = start

    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        self.batches.append(LogBatch(self.hw, self.hw + n - 1))
        self.hw += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 5))
    def acquire(self, member: str, max_records: int) -> None:
        offset = self.sp.next_fetch_offset(self.now)
        read = [b for b in self.batches if b.last >= offset]
        self.sp.acquire(member, read, high_watermark=self.hw, max_records=max_records,
                        now_ms=self.now)  # fmt: skip

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 30),
        length=st.integers(1, 3),
        kind=st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                              AcknowledgeType.REJECT]),
    )  # fmt: skip
    def acknowledge(self, member: str, first: int, length: int, kind: AcknowledgeType) -> None:
        try:
            self.coordinator.acknowledge("g", member, self.sp, [(first, first + length - 1,
                                                                  [kind])])  # fmt: skip
        except InvalidRecordStateError:
            return
        self._commit()

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member: str) -> None:
        if self.sp.release_member(member):
            self._commit()

    @rule()
    def failover(self) -> None:
        self.topic.reopen()
        self.coordinator, self.sp = self._open()
        assert self.sp.start_offset == self.committed_start
        for o, record in self.sp.records.items():
            expected = self.committed.get(o, (RecordState.ARCHIVED, 0))  # a gap: never in log
            assert (record.state, record.delivery_count) == expected, o
        for o, (state, _count) in self.committed.items():
            if o >= self.sp.start_offset and state not in DONE:
                assert o in self.sp.records, f"offset {o} ({state.name}) was lost"
        self._commit()

    @invariant()
    def holds_its_invariants(self) -> None:
        self.sp.check()


ShareStateReload.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
test_share_state_reload_model = ShareStateReload.TestCase
