"""Tests for sluice.pipeline.consumer.assignors: the worked examples of the assignment article,
then properties.

Member ids are C0, C1, ...; topics T0, T1, ...; ``"T1P2"`` is partition 2 of T1 and a bare
``"P2"`` is partition 2 of T0 (the article's single-topic notation).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.assignors import (
    ASSIGNORS,
    Assignor,
    UnknownAssignorError,
    assign_range,
    assign_round_robin,
    assign_sticky,
    get_assignor,
)

# No example database: the suite must leave nothing behind in the work tree.
bounded = settings(max_examples=40, deadline=None, database=None)

# "cooperative-sticky" is the same function as "sticky"; property tests run each function once.
DISTINCT = ["range", "roundrobin", "sticky"]

Members = dict[str, list[str]]
Counts = dict[str, int]
Previous = dict[str, list[TopicPartition]]


def tps(spec: str) -> list[TopicPartition]:
    """``"T0P0 T1P1"`` -> [TopicPartition("T0", 0), TopicPartition("T1", 1)]."""
    out = []
    for token in spec.split():
        match = re.fullmatch(r"(?:(T\d+))?P(\d+)", token)
        assert match is not None, token
        out.append(TopicPartition(match.group(1) or "T0", int(match.group(2))))
    return out


def group(n: int, topics: Sequence[str]) -> Members:
    return {f"C{i}": list(topics) for i in range(n)}


def plan(**specs: str) -> dict[str, list[TopicPartition]]:
    return {member: tps(spec) for member, spec in specs.items()}


# ---------------------------------------------------------------------------------------------
# The article's examples
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("consumers", "expected"),
    [
        (2, plan(C0="P0 P1", C1="P2 P3")),
        (3, plan(C0="P0 P1", C1="P2", C2="P3")),
        # The article prints C4:[P4]; a 4-partition topic has no P4, so C4 gets nothing.
        (5, plan(C0="P0", C1="P1", C2="P2", C3="P3", C4="")),
    ],
)
def test_range_one_topic_four_partitions(
    consumers: int, expected: dict[str, list[TopicPartition]]
) -> None:
    assert assign_range(group(consumers, ["T0"]), {"T0": 4}) == expected


def test_range_two_topics_favours_the_same_member_on_every_topic() -> None:
    result = assign_range(group(3, ["T0", "T1"]), {"T0": 4, "T1": 4})
    assert result == plan(C0="T0P0 T0P1 T1P0 T1P1", C1="T0P2 T1P2", C2="T0P3 T1P3")


def test_round_robin_one_topic() -> None:
    assert assign_round_robin(group(3, ["T0"]), {"T0": 4}) == plan(C0="P0 P3", C1="P1", C2="P2")


HETEROGENEOUS: Members = {"C0": ["T0"], "C1": ["T0", "T1"], "C2": ["T0", "T1", "T2"]}
HETEROGENEOUS_COUNTS: Counts = {"T0": 1, "T1": 2, "T2": 3}


def test_round_robin_heterogeneous_subscriptions_skip_unsubscribed_members() -> None:
    result = assign_round_robin(HETEROGENEOUS, HETEROGENEOUS_COUNTS)
    assert result == plan(C0="T0P0", C1="T1P0", C2="T1P1 T2P0 T2P1 T2P2")


FOUR_TOPICS: Counts = {"T0": 2, "T1": 2, "T2": 2, "T3": 2}
FIRST_STICKY = plan(C0="T0P0 T1P1 T3P0", C1="T0P1 T2P0 T3P1", C2="T1P0 T2P1")


def test_sticky_first_assignment_is_the_round_robin_deal() -> None:
    members = group(3, list(FOUR_TOPICS))
    assert assign_sticky(members, FOUR_TOPICS) == FIRST_STICKY
    assert assign_round_robin(members, FOUR_TOPICS) == FIRST_STICKY


def test_sticky_member_leaves_only_its_partitions_move() -> None:
    members = group(3, list(FOUR_TOPICS))
    del members["C1"]
    result = assign_sticky(members, FOUR_TOPICS, FIRST_STICKY)
    # The properties: C0 and C2 keep everything, C1's three partitions are shared out, 4 and 4.
    for member in ("C0", "C2"):
        assert set(FIRST_STICKY[member]) <= set(result[member])
    assert sorted(result["C0"] + result["C2"]) == sorted(itertools.chain(*FIRST_STICKY.values()))
    assert [len(result["C0"]), len(result["C2"])] == [4, 4]
    # Our tie-break (the free partition goes to the least loaded member, ties to the smaller
    # id) reproduces the article's exact placement.
    assert result == plan(C0="T0P0 T1P1 T2P0 T3P0", C2="T0P1 T1P0 T2P1 T3P1")


def test_heterogeneous_member_leaves_round_robin_reshuffles_sticky_balances() -> None:
    remaining = {m: t for m, t in HETEROGENEOUS.items() if m != "C0"}
    assert assign_round_robin(remaining, HETEROGENEOUS_COUNTS) == plan(
        C1="T0P0 T1P1", C2="T1P0 T2P0 T2P1 T2P2"
    )
    # The article prints "T3P1" for T2P2 in the sticky result; there is no T3.
    expected = plan(C1="T0P0 T1P0 T1P1", C2="T2P0 T2P1 T2P2")
    first = assign_sticky(HETEROGENEOUS, HETEROGENEOUS_COUNTS)
    assert first == plan(C0="T0P0", C1="T1P0 T1P1", C2="T2P0 T2P1 T2P2")
    assert assign_sticky(remaining, HETEROGENEOUS_COUNTS, first) == expected
    # Starting from the round-robin placement the sticky assignor reaches the same balance.
    from_rr = assign_round_robin(HETEROGENEOUS, HETEROGENEOUS_COUNTS)
    assert assign_sticky(remaining, HETEROGENEOUS_COUNTS, from_rr) == expected


# ---------------------------------------------------------------------------------------------
# Edge cases and the registry
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_every_member_appears_even_with_nothing_to_take(name: str) -> None:
    members = {"C0": ["T0"], "C1": [], "C2": ["missing"], "C3": ["empty"], "C4": ["T0"]}
    result = ASSIGNORS[name](members, {"T0": 1, "empty": 0, "unsubscribed": 3})
    assert set(result) == set(members)
    assert sorted(itertools.chain(*result.values())) == tps("P0")


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_no_members_no_assignment(name: str) -> None:
    assert ASSIGNORS[name]({}, {"T0": 3}) == {}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_negative_partition_count_is_rejected(name: str) -> None:
    with pytest.raises(ValueError, match=r"expected a count >= 0, found -1"):
        ASSIGNORS[name]({"C0": ["T0"]}, {"T0": -1})


def test_registry_uses_kafka_protocol_names() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    assert get_assignor("range") is assign_range
    assert get_assignor("roundrobin") is assign_round_robin
    assert get_assignor("sticky") is assign_sticky
    assert get_assignor("cooperative-sticky") is assign_sticky


def test_unknown_assignor_names_expected_and_found() -> None:
    with pytest.raises(UnknownAssignorError) as info:
        get_assignor("RoundRobinAssignor")
    message = str(info.value)
    assert "'RoundRobinAssignor'" in message
    for name in ASSIGNORS:
        assert repr(name) in message
    assert isinstance(info.value, LookupError)


def test_sticky_ignores_invalid_previous_claims() -> None:
    members = {"C0": ["T0"], "C1": ["T0"]}
    previous = {
        "C0": tps("P0 P0 P7 T1P0"),  # a duplicate, a partition past the end, an unsubscribed topic
        "C1": [("T0", 1)],  # plain tuples are accepted
        "gone": tps("P2"),  # a member that left
    }
    result = assign_sticky(members, {"T0": 4, "T1": 1}, previous)  # type: ignore[arg-type]
    assert tps("P0") == result["C0"][:1]
    assert TopicPartition("T0", 1) in result["C1"]
    assert sorted(result["C0"] + result["C1"]) == tps("P0 P1 P2 P3")


def test_sticky_partition_claimed_by_two_members_is_kept_by_neither() -> None:
    members = {"C0": ["T0"], "C1": ["T0"]}
    # Both claim P0; without generations neither claim wins, so P0 is placed afresh. The
    # uncontested claims stay: C0 keeps P1 and P2 is C1's.
    result = assign_sticky(members, {"T0": 3}, {"C0": tps("P0 P1"), "C1": tps("P0 P2")})
    assert result == plan(C0="P0 P1", C1="P2")  # P0 goes to the less loaded (tie: smaller id)
    result = assign_sticky(members, {"T0": 3}, {"C0": tps("P0 P1"), "C1": tps("P0 P1 P2")})
    assert set(result["C1"]) >= {TopicPartition("T0", 2)}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_inputs_are_not_mutated(name: str) -> None:
    members = {"C0": ["T0", "T1"], "C1": ["T1"]}
    counts = {"T0": 3, "T1": 2}
    previous = {"C0": tps("T1P0 T1P1"), "C1": []}
    snapshot = (repr(members), repr(counts), repr(previous))
    ASSIGNORS[name](members, counts, previous)
    assert (repr(members), repr(counts), repr(previous)) == snapshot


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

MEMBER_IDS = [f"C{i}" for i in range(8)]
TOPICS = ["T0", "T1", "T2", "T3"]


@st.composite
def groups(
    draw: st.DrawFn, identical: bool = False, max_members: int = 6
) -> tuple[Members, Counts]:
    """Members with subscriptions (possibly to a topic with no metadata) and partition counts."""
    counts = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 6), min_size=1))
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=max_members, unique=True))
    # "T9" has no metadata: subscribing to it must be harmless.
    topic_choice = st.lists(st.sampled_from([*TOPICS, "T9"]), unique=True)
    if identical:
        topics = draw(st.lists(st.sampled_from([*TOPICS, "T9"]), min_size=1, unique=True))
        return {m: list(topics) for m in ids}, counts
    return {m: draw(topic_choice) for m in ids}, counts


@st.composite
def previous_assignments(draw: st.DrawFn, members: Members, counts: Counts) -> Previous:
    """An earlier assignment over a group that overlapped this one: some members left, some are
    new, some partitions were unowned; each partition had at most one owner."""
    pool = sorted(set(members) | set(draw(st.sets(st.sampled_from(MEMBER_IDS)))))
    partitions = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    owners = draw(
        st.lists(st.sampled_from([None, *pool]), min_size=len(partitions), max_size=len(partitions))
    )
    previous: Previous = {}
    for tp, owner in zip(partitions, owners, strict=True):
        if owner is not None:
            previous.setdefault(owner, []).append(tp)
    return previous


def subscribed_partitions(members: Members, counts: Counts) -> set[TopicPartition]:
    topics = {t for ts in members.values() for t in ts}
    return {TopicPartition(t, p) for t in topics for p in range(counts.get(t, 0))}


def check_valid(
    result: Mapping[str, Sequence[TopicPartition]], members: Members, counts: Counts
) -> None:
    assert set(result) == set(members)
    assigned = list(itertools.chain(*result.values()))
    assert len(assigned) == len(set(assigned)), "a partition went to two members"
    assert set(assigned) == subscribed_partitions(members, counts)
    for member, partitions in result.items():
        assert all(tp.topic in members[member] for tp in partitions), member
        assert list(partitions) == sorted(partitions)


def valid_previous(
    previous: Previous, members: Members, counts: Counts
) -> dict[str, set[TopicPartition]]:
    """What the sticky assignor may keep: existing, subscribed, uncontested previous claims."""
    claims = {
        m: {tp for tp in tps_ if tp.topic in members[m] and tp.partition < counts.get(tp.topic, 0)}
        for m, tps_ in previous.items()
        if m in members
    }
    contested = {tp for a, b in itertools.combinations(claims.values(), 2) for tp in a & b}
    return {m: claims.get(m, set()) - contested for m in members}


def reordered(members: Members, counts: Counts) -> tuple[Members, Counts]:
    return (
        {m: list(reversed(ts)) for m, ts in reversed(members.items())},
        dict(reversed(counts.items())),
    )


@pytest.mark.parametrize("name", DISTINCT)
@bounded
@given(data=st.data())
def test_valid_and_a_function_of_the_input_content(name: str, data: st.DataObject) -> None:
    """Each subscribed partition goes to exactly one subscriber of its topic, nothing else is
    assigned, and the result depends on the input's content, not on call count or key order."""
    members, counts = data.draw(groups())
    previous = data.draw(previous_assignments(members, counts))
    assign: Assignor = ASSIGNORS[name]
    first = assign(members, counts, previous)
    check_valid(first, members, counts)
    assert assign(members, counts, previous) == first
    other_members, other_counts = reordered(members, counts)
    other_previous = {m: list(reversed(p)) for m, p in reversed(previous.items())}
    assert assign(other_members, other_counts, other_previous) == first


@bounded
@given(group_=groups())
def test_range_matches_the_per_topic_formula(group_: tuple[Members, Counts]) -> None:
    members, counts = group_
    result = assign_range(members, counts)
    for tp in subscribed_partitions(members, counts):
        consumers = sorted(m for m, ts in members.items() if tp.topic in ts)
        size, extra = divmod(counts[tp.topic], len(consumers))
        # The first `extra` members hold ranges of size+1, the rest ranges of size.
        if tp.partition < extra * (size + 1):
            index = tp.partition // (size + 1)
        else:
            index = extra + (tp.partition - extra * (size + 1)) // size
        assert tp in result[consumers[index]]


@bounded
@given(group_=groups(identical=True))
def test_round_robin_with_identical_subscriptions_deals_in_turn(
    group_: tuple[Members, Counts],
) -> None:
    members, counts = group_
    result = assign_round_robin(members, counts)
    ring = sorted(members)
    for i, tp in enumerate(sorted(subscribed_partitions(members, counts))):
        assert tp in result[ring[i % len(ring)]]
    # With nothing to stick to, the sticky assignor deals exactly the same way.
    assert assign_sticky(members, counts) == result


def no_single_move_improves(
    result: Mapping[str, Sequence[TopicPartition]], members: Members
) -> None:
    """Kafka's own balance check (``isBalanced``): no partition can move from its owner to a
    subscribed member with two or more partitions fewer."""
    load = {m: len(p) for m, p in result.items()}
    for owner, partitions in result.items():
        for tp in partitions:
            for other, topics in members.items():
                if tp.topic in topics:
                    assert load[other] >= load[owner] - 1, (tp, owner, other, result)


@bounded
@given(data=st.data())
def test_sticky_is_balanced_and_moves_nothing_it_need_not_with_identical_subscriptions(
    data: st.DataObject,
) -> None:
    members, counts = data.draw(groups(identical=True))
    previous = data.draw(previous_assignments(members, counts))
    result = assign_sticky(members, counts, previous)
    check_valid(result, members, counts)
    loads = [len(p) for p in result.values()]
    assert max(loads) - min(loads) <= 1
    kept_before = valid_previous(previous, members, counts)
    for member, partitions in result.items():
        kept = kept_before[member] & set(partitions)
        # Keeps as many of its partitions as its final count allows, so a member that was not
        # over its quota keeps every one of them.
        assert len(kept) == min(len(kept_before[member]), len(partitions)), member
    # And the larger quotas went to the members that had the most, so the total kept is the
    # best any balanced assignment can do.
    quota, extra = divmod(sum(loads), len(loads))
    had = sorted((len(p) for p in kept_before.values()), reverse=True)
    best = sum(min(n, quota + (1 if i < extra else 0)) for i, n in enumerate(had))
    assert sum(len(kept_before[m] & set(p)) for m, p in result.items()) == best


@bounded
@given(data=st.data())
def test_sticky_is_as_balanced_as_subscriptions_allow(data: st.DataObject) -> None:
    members, counts = data.draw(groups())
    previous = data.draw(previous_assignments(members, counts))
    result = assign_sticky(members, counts, previous)
    check_valid(result, members, counts)
    no_single_move_improves(result, members)
    # Feeding the result back changes nothing: a balanced assignment is already sticky-stable.
    assert assign_sticky(members, counts, result) == result


def best_balance(members: Members, counts: Counts) -> int:
    """Brute force: the least sum of squared member loads over every valid assignment."""
    partitions = sorted(subscribed_partitions(members, counts))
    choices = [[m for m, ts in members.items() if tp.topic in ts] for tp in partitions]
    best = None
    for owners in itertools.product(*choices):
        loads = dict.fromkeys(members, 0)
        for owner in owners:
            loads[owner] += 1
        score = sum(n * n for n in loads.values())
        best = score if best is None else min(best, score)
    return best or 0


@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_sticky_balance_matches_brute_force_on_small_groups(data: st.DataObject) -> None:
    members, counts = data.draw(groups(max_members=3))
    if len(subscribed_partitions(members, counts)) > 7:
        counts = {t: min(n, 2) for t, n in counts.items()}
    previous = data.draw(previous_assignments(members, counts))
    result = assign_sticky(members, counts, previous)
    # Sum of squares is minimal exactly when no chain of moves can even the loads out, i.e.
    # when the largest load is as small and the smallest as large as subscriptions allow.
    assert sum(len(p) ** 2 for p in result.values()) == best_balance(members, counts)


@bounded
@given(data=st.data())
def test_sticky_rebalance_after_members_leave_and_join(data: st.DataObject) -> None:
    """A realistic sequence: a group settles, then members leave and others join."""
    members, counts = data.draw(groups(identical=True))
    before = assign_sticky(members, counts)
    leaving = data.draw(st.sets(st.sampled_from(sorted(members)), max_size=len(members) - 1))
    joining = data.draw(st.sets(st.sampled_from(MEMBER_IDS)).map(lambda s: s - set(members)))
    topics = next(iter(members.values()))
    after_members = {m: topics for m in (set(members) - leaving) | joining}
    after = assign_sticky(after_members, counts, before)
    check_valid(after, after_members, counts)
    loads = [len(p) for p in after.values()]
    assert max(loads) - min(loads) <= 1
    for member in set(members) - leaving:
        # A staying member keeps all it had, or as many as its new quota allows.
        kept = set(before[member]) & set(after[member])
        assert len(kept) == min(len(before[member]), len(after[member]))
    for member in joining:
        # A newcomer only receives partitions that had to move anyway.
        for tp in after[member]:
            owner = next((m for m, p in before.items() if tp in p), None)
            assert owner is None or owner in leaving or len(before[owner]) > len(after[owner])


def test_types_accept_any_collection() -> None:
    members: Mapping[str, Collection[str]] = {"C0": ("T0",), "C1": frozenset({"T0"})}
    for assign in ASSIGNORS.values():
        check_valid(assign(members, {"T0": 3}), {m: list(t) for m, t in members.items()}, {"T0": 3})
