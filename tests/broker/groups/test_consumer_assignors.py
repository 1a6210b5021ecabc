"""The consumer group protocol's server-side assignors: ``uniform`` and ``range``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sluice.broker.groups.consumer_assignors import range_assign, uniform_assign

TOPICS = {"a": 6, "b": 3}


def _count(assignment: dict[str, dict[str, frozenset[int]]], member: str) -> int:
    return sum(len(p) for p in assignment[member].values())


def test_range_gives_consecutive_ranges_per_topic() -> None:
    subs = {"m1": frozenset({"a", "b"}), "m2": frozenset({"a", "b"}), "m3": frozenset({"a"})}
    got = range_assign(subs, TOPICS, {})
    assert got["m1"] == {"a": frozenset({0, 1}), "b": frozenset({0, 1})}
    assert got["m2"] == {"a": frozenset({2, 3}), "b": frozenset({2})}
    assert got["m3"] == {"a": frozenset({4, 5})}


def test_uniform_balances_and_keeps_what_it_can() -> None:
    subs = {m: frozenset({"a"}) for m in ("m1", "m2", "m3")}
    first = uniform_assign(subs, {"a": 6}, {})
    assert sorted(_count(first, m) for m in subs) == [2, 2, 2]
    # m2 leaves, m4 joins: m1 and m3 keep their partitions, m4 gets m2's.
    subs2 = {m: frozenset({"a"}) for m in ("m1", "m3", "m4")}
    second = uniform_assign(subs2, {"a": 6}, first)
    assert second["m1"] == first["m1"] and second["m3"] == first["m3"]
    assert second["m4"] == first["m2"]


def test_unsubscribed_topics_go_to_nobody() -> None:
    got = uniform_assign({"m1": frozenset({"a"})}, {"a": 2, "b": 2}, {})
    assert got == {"m1": {"a": frozenset({0, 1})}}


@given(
    st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m4"]),
                    st.frozensets(st.sampled_from(["a", "b", "c"]), min_size=1), min_size=1),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 8), min_size=1),
    st.sampled_from([uniform_assign, range_assign]),
)  # fmt: skip
def test_every_subscribed_partition_has_exactly_one_subscribed_owner(subs, topics, assign) -> None:  # type: ignore[no-untyped-def]
    got = assign(subs, topics, {})
    assert set(got) == set(subs)
    seen: dict[tuple[str, int], str] = {}
    for member, owned in got.items():
        for topic, parts in owned.items():
            assert topic in subs[member]
            for p in parts:
                assert (topic, p) not in seen
                seen[(topic, p)] = member
    wanted = {(t, p) for t, n in topics.items() for p in range(n)
              if any(t in s for s in subs.values())}  # fmt: skip
    assert set(seen) == wanted
    if assign is uniform_assign and len({frozenset(s) for s in subs.values()}) == 1:
        counts = [_count(got, m) for m in subs]
        assert max(counts) - min(counts) <= 1
