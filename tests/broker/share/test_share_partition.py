"""``SharePartition`` cases the model test does not draw: gaps in the log (compacted offsets)
and transaction markers archived as they are reached, max_records and the record-lock cap,
and a lock's expiry at the delivery limit."""

from __future__ import annotations

import pytest

from sluice.broker.share.share_partition import (
    AcknowledgeType,
    AcquiredRange,
    InvalidRecordStateError,
    LogBatch,
    RecordState,
    SharePartition,
)


def partition(**kw: int) -> SharePartition:
    settings = {"lock_ms": 100, "delivery_limit": 2, "max_record_locks": 4} | kw
    return SharePartition(0, **settings)


def spans(ranges: list[AcquiredRange]) -> list[tuple[int, int]]:
    return [(r.first, r.last) for r in ranges]


def test_gaps_and_markers_are_archived_never_delivered() -> None:
    sp = partition(max_record_locks=100)
    log = [LogBatch(0, 1), LogBatch(4, 4, control=True), LogBatch(5, 6)]  # 2, 3 compacted
    got = sp.acquire("m", log, high_watermark=7, max_records=10, now_ms=0)
    assert [(r.first, r.last) for r in got] == [(0, 1), (5, 6)]
    assert {o: r.state for o, r in sp.records.items()} == {
        0: RecordState.ACQUIRED, 1: RecordState.ACQUIRED, 2: RecordState.ARCHIVED,
        3: RecordState.ARCHIVED, 4: RecordState.ARCHIVED, 5: RecordState.ACQUIRED,
        6: RecordState.ACQUIRED,
    }  # fmt: skip
    sp.acknowledge("m", 0, 1, AcknowledgeType.ACCEPT)
    assert sp.start_offset == 5
    sp.check()


def test_max_records_and_the_lock_cap() -> None:
    sp = partition()
    log = [LogBatch(0, 9)]
    assert spans(sp.acquire("a", log, high_watermark=10, max_records=3, now_ms=0)) == [(0, 2)]
    # A window of four in flight: one more for b, then nothing until the start moves.
    assert spans(sp.acquire("b", log, high_watermark=10, max_records=9, now_ms=0)) == [(3, 3)]
    assert sp.acquire("b", log, high_watermark=10, max_records=9, now_ms=0) == []
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("b", 2, 3, AcknowledgeType.ACCEPT)  # 2 is a's: nothing applied
    assert sp.records[3].state is RecordState.ACQUIRED
    sp.acknowledge("a", 0, 0, AcknowledgeType.ACCEPT)
    assert spans(sp.acquire("b", log, high_watermark=10, max_records=9, now_ms=0)) == [(4, 4)]
    sp.check()


def test_an_expired_lock_at_the_delivery_limit_archives() -> None:
    sp = partition()
    log = [LogBatch(0, 0)]
    assert sp.acquire("a", log, high_watermark=1, max_records=1, now_ms=0)[0].delivery_count == 1
    assert sp.next_fetch_offset(now_ms=100) == 0  # expired: available again
    assert sp.acquire("b", log, high_watermark=1, max_records=1, now_ms=100)[0].delivery_count == 2
    sp.acknowledge("b", 0, 0, AcknowledgeType.RENEW)  # lock now ends at 300
    assert sp.expire(now_ms=250) == 0
    assert sp.expire(now_ms=300) == 1
    assert sp.start_offset == 1 and sp.records == {}  # archived at the limit, then passed
