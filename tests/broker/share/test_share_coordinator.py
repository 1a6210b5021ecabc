"""``ShareCoordinator`` with its ``ShareStateLog`` over ``__share_group_state`` as real logs in a
temporary directory, without a broker: where a share-partition starts
(``share.auto.offset.reset``), what a new coordinator restores from the logs reopened (a
restart, or another broker taking the partition over), membership epochs, leaving and expiry
returning records, and the session epochs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.broker.share.share_coordinator import AUTO_OFFSET_RESET, ShareCoordinator
from sluice.broker.share.share_group import FencedShareMemberError, UnknownShareMemberError
from sluice.broker.share.share_partition import (
    AcknowledgeType,
    LogBatch,
    RecordState,
    SharePartition,
)
from sluice.broker.share.share_session import (
    InvalidShareSessionEpochError,
    ShareSessionLimitError,
    ShareSessionNotFoundError,
)
from sluice.broker.share.share_state_log import ShareStateLog
from tests.broker.share.state_topic import LocalStateTopic

LOG = [LogBatch(10, 19)]  # the log holds offsets 10..19
TOPIC_IDS = {"t": uuid.UUID(int=7), "u": uuid.UUID(int=8)}


@pytest.fixture
def topic(tmp_path: Path) -> Iterator[LocalStateTopic]:
    t = LocalStateTopic(tmp_path)
    yield t
    t.close()


def coordinator(topic: LocalStateTopic, **settings: int) -> ShareCoordinator:
    settings = {"lock_ms": 1000, "session_timeout_ms": 5000, **settings}
    return ShareCoordinator(ShareStateLog(topic, lambda: TOPIC_IDS), **settings)


def restarted(c: ShareCoordinator, topic: LocalStateTopic) -> ShareCoordinator:
    """What another coordinator finds after ``c`` made its state durable: the logs reopened."""
    asyncio.run(c.flush())
    topic.reopen()
    return coordinator(topic)


def loaded(
    c: ShareCoordinator, group: str, topic: str, p: int, offsets: Callable[[], tuple[int, int]]
) -> SharePartition:
    """The share-partition as a new leader makes it: its state read first."""
    asyncio.run(c.store.refresh(group, topic, p, leader_epoch=1))
    return c.partition(group, topic, p, offsets)


def test_auto_offset_reset_latest_and_earliest(topic: LocalStateTopic) -> None:
    c = coordinator(topic)
    assert c.partition("latest", "t", 0, lambda: (10, 20)).start_offset == 20
    c.group_configs["early"] = {AUTO_OFFSET_RESET: "earliest"}
    assert c.partition("early", "t", 0, lambda: (10, 20)).start_offset == 10
    # Written at creation: a restart does not move it to the log end of the time.
    again = restarted(c, topic)
    assert loaded(again, "latest", "t", 0, lambda: (10, 30)).start_offset == 20
    assert sorted(again.store.groups()) == ["latest"]  # read back: only that one


def test_a_new_coordinator_restores_what_was_acknowledged(topic: LocalStateTopic) -> None:
    c = coordinator(topic)
    c.group_configs["g"] = {AUTO_OFFSET_RESET: "earliest"}
    sp = c.partition("g", "t", 0, lambda: (10, 20))
    got = sp.acquire("m", LOG, high_watermark=20, max_records=10, now_ms=0)
    assert [(r.first, r.last) for r in got] == [(10, 19)]
    c.acknowledge("g", "m", sp, [(10, 12, [AcknowledgeType.ACCEPT]), (13, 13, [3])])
    c.acknowledge("g", "m", sp, [(15, 16, [1, 2])])  # one type per offset: accept, release
    c.persist("g", [("t", 0)])
    restored = loaded(restarted(c, topic), "g", "t", 0, lambda: (10, 20))
    restored.check()
    assert restored.start_offset == 14
    states = {o: (r.state, r.delivery_count) for o, r in restored.records.items()}
    assert states[14] == (RecordState.AVAILABLE, 1)  # was acquired: comes back
    assert states[15] == (RecordState.ACKNOWLEDGED, 1)
    assert states[16] == (RecordState.AVAILABLE, 1)
    assert restored.end_offset == 20
    again = restored.acquire("n", LOG, high_watermark=20, max_records=10, now_ms=0)
    assert [(r.first, r.last, r.delivery_count) for r in again] == [
        (14, 14, 2), (16, 19, 2),
    ]  # fmt: skip


def test_membership_epochs_leave_and_expiry(topic: LocalStateTopic) -> None:
    c = coordinator(topic)
    a = c.heartbeat("g", "a", 0, ["t"], {"t": 3}, now_ms=0)
    assert a is not None and a.assignment == {"t": (0, 1, 2)} and a.epoch == 1
    b = c.heartbeat("g", "b", 0, ["t", "u"], {"t": 3}, now_ms=0)
    assert b is not None and b.assignment == {"t": (0, 1, 2)} and b.epoch == 2
    with pytest.raises(FencedShareMemberError):
        c.heartbeat("g", "a", 7, None, {"t": 3}, now_ms=1)
    with pytest.raises(UnknownShareMemberError):
        c.heartbeat("g", "stranger", 3, None, {"t": 3}, now_ms=1)
    # A topic that appears later is assigned on the next heartbeat.
    b = c.heartbeat("g", "b", b.epoch, None, {"t": 3, "u": 1}, now_ms=1)
    assert b is not None and b.assignment == {"t": (0, 1, 2), "u": (0,)}
    # b's records return when it leaves; a's when it expires (no heartbeat for 5 s).
    sp = c.partition("g", "t", 0, lambda: (10, 10))
    sp.acquire("a", [LogBatch(10, 11)], high_watermark=12, max_records=1, now_ms=1)
    sp.acquire("b", [LogBatch(10, 11)], high_watermark=12, max_records=1, now_ms=1)
    assert c.heartbeat("g", "b", -1, None, {"t": 3}, now_ms=2) is None
    assert {o: r.state for o, r in sp.records.items()} == {
        10: RecordState.ACQUIRED, 11: RecordState.AVAILABLE,
    }  # fmt: skip
    c.expire_members(now_ms=6000)
    assert all(r.state is RecordState.AVAILABLE for r in sp.records.values())
    group = c.group("g")
    assert group is not None and group.state == "Empty"


def test_session_epochs(topic: LocalStateTopic) -> None:
    c = coordinator(topic)
    with pytest.raises(ShareSessionNotFoundError):
        c.session("g", "m", 1, now_ms=0)
    session = c.session("g", "m", 0, now_ms=0)
    assert c.session("g", "m", 1, now_ms=0) is session
    with pytest.raises(InvalidShareSessionEpochError):
        c.session("g", "m", 3, now_ms=0)
    assert c.session("g", "m", 2, now_ms=0).epoch == 2
    # Epoch 0 again: a new session, and the old one's records return.
    sp = c.partition("g", "t", 0, lambda: (0, 0))
    sp.acquire("m", [LogBatch(0, 0)], high_watermark=1, max_records=1, now_ms=0)
    assert c.session("g", "m", 0, now_ms=0) is not session
    assert sp.records[0].state is RecordState.AVAILABLE
    c.close_session("g", "m")
    assert ("g", "m") not in c.sessions


def test_sessions_are_bounded(topic: LocalStateTopic) -> None:
    c = coordinator(topic, session_timeout_ms=1000, max_sessions=2)
    c.session("g", "a", 0, now_ms=0)
    c.session("g", "b", 0, now_ms=500)
    with pytest.raises(ShareSessionLimitError):
        c.session("g", "c", 0, now_ms=900)
    # a has been idle for over a session timeout: it makes room (b, used at 500, stays).
    c.session("g", "c", 0, now_ms=1200)
    assert set(c.sessions) == {("g", "b"), ("g", "c")}
