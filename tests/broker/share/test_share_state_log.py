"""``ShareStateLog`` over ``__share_group_state`` as real logs: which records a write makes
(a snapshot first and after a start moved back, updates otherwise, tombstones for a deleted
state), that ``flush`` returns once they are in the log and that a queued state wins over what
a concurrent read finds, and that a partition replayed by its new leader gives back every
share-partition's state."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.broker.server.share_state_host import read_log
from sluice.broker.share.share_state_log import ShareStateLog
from sluice.broker.share.share_state_records import (
    ShareState,
    ShareStateKey,
    ShareUpdate,
    StateBatch,
    decode_key,
    decode_value,
    partition_for,
)
from tests.broker.share.state_topic import LocalStateTopic

IDS = {"t": uuid.UUID(int=7)}


@pytest.fixture
def topic(tmp_path: Path) -> Iterator[LocalStateTopic]:
    t = LocalStateTopic(tmp_path)
    yield t
    t.close()


def records_of(topic: LocalStateTopic, group: str, partition: int) -> list[object]:
    """The decoded values (None: a tombstone) of the key's records, in log order."""
    key = ShareStateKey(group, IDS["t"], partition)
    out: list[object] = []
    for raw_key, raw_value in read_log(topic.logs[partition_for(key, topic.count)]):
        decoded = decode_key(raw_key)
        assert decoded is not None
        if decoded[1] == key:
            out.append(None if raw_value is None else decode_value(decoded[0], raw_value))
    return out


def test_a_snapshot_then_updates_then_a_snapshot_when_the_start_moves_back(
    topic: LocalStateTopic,
) -> None:
    state = ShareStateLog(topic, lambda: IDS, clock=lambda: 5)
    state.write("g", {"t:0": (10, [])})
    state.write("g", {"t:0": (12, [(12, 2, 1), (13, 1, 1)])})  # 13 acquired: written available
    asyncio.run(state.flush())
    state.write("g", {"t:0": (13, [(13, 0, 1)])})
    asyncio.run(state.flush())
    state.write("g", {"t:0": (4, [])})  # AlterShareGroupOffsets back to 4
    asyncio.run(state.flush())
    first, second, third = records_of(topic, "g", 0)
    # The two first writes were queued before one flush: only the newest state is written.
    assert first == ShareState(12, (StateBatch(12, 12, 2, 1), StateBatch(13, 13, 0, 1)),
                               create_timestamp=5, write_timestamp=5)  # fmt: skip
    assert second == ShareUpdate(0, -1, 13, (StateBatch(13, 13, 0, 1),))
    # An update cannot move the start back (its batches only merge): a snapshot does.
    assert third == ShareState(4, (), create_timestamp=5, write_timestamp=5)


def test_updates_follow_a_snapshot_and_replay_to_the_newest_state(topic: LocalStateTopic) -> None:
    state = ShareStateLog(topic, lambda: IDS)
    for start in (10, 11, 12):
        state.write("g", {"t:0": (start, [(start, 0, 1)])})
        asyncio.run(state.flush())
    kinds = [type(r) for r in records_of(topic, "g", 0)]
    assert kinds == [ShareState, ShareUpdate, ShareUpdate]
    topic.reopen()
    again = ShareStateLog(topic, lambda: IDS)
    assert asyncio.run(again.refresh("g", "t", 0, leader_epoch=3)) == (12, [(12, 0, 1)])
    assert again.load("g") == {"t:0": (12, [(12, 0, 1)])}


def test_delete_writes_tombstones_and_a_replay_forgets(topic: LocalStateTopic) -> None:
    state = ShareStateLog(topic, lambda: IDS)
    state.write("g", {"t:0": (3, []), "t:1": (5, [])})
    asyncio.run(state.flush())
    state.delete("g", ["t:0"])
    asyncio.run(state.flush())
    assert records_of(topic, "g", 0)[-2:] == [None, None]  # snapshot and update keys
    topic.reopen()
    again = ShareStateLog(topic, lambda: IDS)
    assert asyncio.run(again.refresh("g", "t", 0, leader_epoch=1)) is None
    live = sum(again.load_partition(read_log(log)) for log in topic.logs)
    assert (live, again.groups(), again.load("g")) == (1, ["g"], {"t:1": (5, [])})


def test_a_queued_state_wins_over_a_read(topic: LocalStateTopic) -> None:
    state = ShareStateLog(topic, lambda: IDS)
    state.write("g", {"t:0": (3, [])})
    asyncio.run(state.flush())

    async def race() -> object:
        state.write("g", {"t:0": (9, [])})  # queued (the writer starts on the loop)
        found = await state.refresh("g", "t", 0, leader_epoch=2)
        await state.flush()
        return found

    assert asyncio.run(race()) == (9, [])
    assert [r.start_offset for r in records_of(topic, "g", 0)] == [3, 9]  # type: ignore[attr-defined]


def test_flush_waits_for_what_was_queued_before(topic: LocalStateTopic) -> None:
    state = ShareStateLog(topic, lambda: IDS)

    async def run() -> int:
        state.write("g", {"t:0": (1, [])})
        state.write("g", {"t:1": (2, [])})
        await state.flush()
        return topic.appends

    appends = asyncio.run(run())
    assert 1 <= appends <= 2  # one batch per state partition a round
    assert [type(r) for r in records_of(topic, "g", 0)] == [ShareState]
    assert [type(r) for r in records_of(topic, "g", 1)] == [ShareState]
    assert asyncio.run(state.flush()) is None  # nothing queued: at once


def test_a_deposed_leaders_late_write_is_fenced(topic: LocalStateTopic) -> None:
    old = ShareStateLog(topic, lambda: IDS)
    assert asyncio.run(old.refresh("g", "t", 0, leader_epoch=4)) is None
    old.write("g", {"t:0": (2, [(2, 0, 1)])})
    asyncio.run(old.flush())
    new = ShareStateLog(topic, lambda: IDS)  # the partition's next leader, at epoch 5
    assert asyncio.run(new.refresh("g", "t", 0, leader_epoch=5)) == (2, [(2, 0, 1)])
    new.write("g", {"t:0": (3, [])})
    asyncio.run(new.flush())
    old.write("g", {"t:0": (2, [(2, 0, 2)])})  # the old leader, not yet told, writes again
    asyncio.run(old.flush())
    again = ShareStateLog(topic, lambda: IDS)
    assert asyncio.run(again.refresh("g", "t", 0, leader_epoch=6)) == (3, [])
    # Told it no longer leads, a broker drops what it had queued.
    old.write("g", {"t:0": (1, [])})
    old.discard("g", "t", 0)
    asyncio.run(old.flush())
    assert asyncio.run(again.refresh("g", "t", 0, leader_epoch=6)) == (3, [])
