"""Tests for sluice.common.gc_pause: the cyclic collector off inside the block, as it was after."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sluice.common.gc_pause import collection_paused


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every cyclic collection while the test runs, with a threshold low
    enough that a few allocations of lists trigger one."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    gc.set_threshold(5)
    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def allocate() -> list[list[int]]:
    return [[n] for n in range(200)]


def test_no_collection_inside_the_block_and_collections_again_after(
    collections: list[int],
) -> None:
    with collection_paused():
        before = len(collections)
        assert not gc.isenabled()
        allocate()
        assert len(collections) == before
    assert gc.isenabled()
    allocate()
    assert len(collections) > before


def test_a_cycle_made_inside_is_collected_after() -> None:
    class Node:
        other: object = None

    with collection_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None  # reference counting alone cannot free a cycle
    gc.collect()
    assert alive() is None


def test_the_collector_stays_off_after_the_block_when_it_was_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_blocks_leave_it_off_until_the_outer_one_ends() -> None:
    with collection_paused():
        with collection_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_setting_comes_back_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_allow_collects_once_past_the_limit_and_not_below_it() -> None:
    """A long block's cycles stay bounded: past ``limit`` new container objects, ``allow()``
    collects (freeing a cycle made inside); below it, it does nothing."""

    class Node:
        other: object = None

    with collection_paused(limit=10_000) as pause:
        gc.collect()  # the count starts from zero
        a = Node()
        a.other = a
        alive = weakref.ref(a)
        del a
        pause.allow()  # a handful of objects: below the limit
        assert alive() is not None and pause.collections == 0
        kept = [[n] for n in range(20_000)]  # past it
        pause.allow()
        assert alive() is None and pause.collections == 1
        assert not gc.isenabled()
        del kept
