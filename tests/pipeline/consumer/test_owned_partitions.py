"""Tests for sluice.pipeline.consumer.owned: the generation fence that delivery rests on."""

from __future__ import annotations

import threading

import pytest

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.owned import OwnedPartitions

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_accept_hands_out_only_current_owned_unseen_offsets() -> None:
    owned = OwnedPartitions()
    owned.install({TP0: (0, 10), TP1: (1, 5)})
    generation = owned.generation
    assert owned.streams() == {TP0: 0, TP1: 1}
    assert owned.accept(generation, TP0, 10) and owned.accept(generation, TP0, 11)
    assert not owned.accept(generation, TP0, 11), "an offset already handed out"
    assert not owned.accept(generation, TP0, 9), "below the start"
    assert not owned.accept(generation - 1, TP1, 5), "fetched in an older generation"
    assert not owned.accept(generation, TopicPartition("t", 2), 0), "not owned"
    assert {tp: c for tp, (_, c) in owned.consumed().items()} == {TP0: 12, TP1: 5}


def test_every_change_bumps_the_generation_and_the_fetch_plan_follows_it() -> None:
    owned = OwnedPartitions()
    assert owned.fetch_plan(owned.generation) is None
    owned.install({TP0: (0, 3)})
    generation, plan = owned.fetch_plan(-1) or (None, None)
    assert generation == owned.generation == 1 and plan == {TP0: (0, 3)}
    assert owned.fetch_plan(generation) is None
    revoked = owned.revoke()
    assert owned.generation == 2 and owned.fetch_plan(generation) == (2, {})
    assert not owned.accept(generation, TP0, 3)
    [(entry, consumed)] = revoked.values()
    assert (entry.stream, entry.start, consumed) == (0, 3, 3)
    owned.install({TP1: (0, 0)})
    with pytest.raises(RuntimeError, match="expected no owned partitions"):
        owned.install({TP1: (0, 0)})


def test_mark_committed_records_what_the_offset_registry_holds() -> None:
    owned = OwnedPartitions()
    owned.install({TP0: (0, 0)})
    generation = owned.generation
    for offset in range(4):
        assert owned.accept(generation, TP0, offset)
    owned.mark_committed(owned.consumed().values())
    [(entry, consumed)] = owned.consumed().values()
    assert entry.committed == consumed == 4


def hand_out(owned: OwnedPartitions, accepted: list[int], started: threading.Event) -> None:
    """Accept offsets 0, 1, ... of TP0 in the current generation until one is refused."""
    generation, offset = owned.generation, 0
    while owned.accept(generation, TP0, offset):
        accepted.append(offset)
        offset += 1
        started.set()


def test_a_revoke_snapshot_covers_exactly_the_messages_handed_out() -> None:
    # A reader hands out offsets as fast as it can while the table is revoked under it: every
    # offset accepted is below the snapshot's consumed offset, and none is accepted after.
    for _ in range(20):
        owned = OwnedPartitions()
        owned.install({TP0: (0, 0)})
        accepted: list[int] = []
        started = threading.Event()
        reader = threading.Thread(target=hand_out, args=(owned, accepted, started))
        reader.start()
        assert started.wait(5)
        [(_, consumed)] = owned.revoke().values()
        reader.join(5)
        assert not reader.is_alive()
        assert accepted == list(range(consumed))
