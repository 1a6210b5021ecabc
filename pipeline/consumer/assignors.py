"""Consumer-group partition assignors: Range, RoundRobin and Sticky, as pure functions.

Every assignor has the same signature::

    assign(members, partitions_per_topic, previous=None) -> {member_id: [TopicPartition, ...]}

``members`` maps each member id to the topics it subscribes to; ``partitions_per_topic`` maps a
topic to its partition count (a topic that is absent, or has no partitions, is skipped, as
Kafka skips a subscribed topic it has no metadata for); ``previous`` maps a member id to the
partitions it owned before this rebalance and is read only by the sticky assignor. The result
holds every member of ``members`` (possibly with an empty list) and each member's list is sorted
by (topic, partition). Every partition of a subscribed topic goes to exactly one member that
subscribes to that topic; nothing else is assigned. The functions never mutate their inputs and
are safe to call from any thread.

The semantics are those of Kafka's client assignors (``RangeAssignor``, ``RoundRobinAssignor``,
``AbstractStickyAssignor``), without rack awareness and without group instance ids: members are
ordered by member id. Kafka orders ids as Java strings (UTF-16 code units); Python orders by code
point. The two agree except between astral characters and U+E000..U+FFFF, which no real member
id or topic name (``[a-zA-Z0-9._-]``) contains, so we use Python's order.

``ASSIGNORS`` maps Kafka's protocol names (``partition.assignment.strategy``) to the functions;
``get_assignor`` looks one up and raises ``UnknownAssignorError`` for any other name.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Protocol

from sluice.common.topic_partition import TopicPartition

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "UnknownAssignorError",
    "assign_range",
    "assign_round_robin",
    "STICKY_ASSIGNORS",
    "assign_sticky",
    "get_assignor",
]


Assignment = dict[str, list[TopicPartition]]


class Assignor(Protocol):
    """The signature shared by every assignor in ``ASSIGNORS``."""

    def __call__(
        self,
        members: Mapping[str, Collection[str]],
        partitions_per_topic: Mapping[str, int],
        previous: Mapping[str, Sequence[TopicPartition]] | None = None,
    ) -> Assignment: ...


class UnknownAssignorError(LookupError):
    """Raised by ``get_assignor`` for a name that is not in ``ASSIGNORS``."""


# --------------------------------------------------------------------------------------------
# Input normalisation shared by the three assignors
# --------------------------------------------------------------------------------------------


def _check_counts(partitions_per_topic: Mapping[str, int]) -> None:
    for topic, count in partitions_per_topic.items():
        if count < 0:
            raise ValueError(
                f"partition count of topic {topic!r}: expected a count >= 0, found {count}"
            )


def _subscriptions(
    members: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[str]]:
    """Each member's subscribed topics that exist and have at least one partition."""
    _check_counts(partitions_per_topic)
    return {
        member: frozenset(t for t in topics if partitions_per_topic.get(t, 0) > 0)
        for member, topics in members.items()
    }


def _partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def _sorted_lists(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    # Members come out in id order so that the result's iteration order is a function of the
    # input's content, never of the order the caller happened to build its mappings in.
    return {member: sorted(assignment[member]) for member in sorted(assignment)}


# --------------------------------------------------------------------------------------------
# Range
# --------------------------------------------------------------------------------------------


def assign_range(
    members: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    previous: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> Assignment:
    """Kafka's ``range`` assignor: contiguous ranges of each topic, topic by topic.

    For each topic independently, the members subscribed to it are sorted by member id and the
    topic's ``n`` partitions are cut into ``m`` contiguous ranges: every member gets ``n // m``
    partitions and the first ``n % m`` members get one more. With 4 partitions and 3 members:
    C0 [P0, P1], C1 [P2], C2 [P3]. Topics are handled independently, so the same members win the
    extra partition of every topic; the imbalance grows with the number of topics, which is the
    price of co-partitioning (partition ``i`` of every topic lands on the same member when the
    topics have equal partition counts and subscribers). ``previous`` is ignored.
    """
    del previous  # Range is stateless; the parameter exists so that all assignors are alike.
    subscriptions = _subscriptions(members, partitions_per_topic)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        consumers = sorted(m for m, topics in subscriptions.items() if topic in topics)
        partitions = _partitions(topic, partitions_per_topic[topic])
        per_member, extra = divmod(len(partitions), len(consumers))
        start = 0
        for index, member in enumerate(consumers):
            length = per_member + (1 if index < extra else 0)
            assignment[member].extend(partitions[start : start + length])
            start += length
    return _sorted_lists(assignment)


# --------------------------------------------------------------------------------------------
# RoundRobin
# --------------------------------------------------------------------------------------------


def assign_round_robin(
    members: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    previous: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> Assignment:
    """Kafka's ``roundrobin`` assignor: deal all partitions out like cards.

    All partitions of all subscribed topics are sorted by (topic, partition) and dealt in turn
    to the members sorted by member id, one circular cursor for the whole deal. When the member
    under the cursor does not subscribe to the partition's topic, the cursor skips ahead to the
    next member that does; the partition goes to that member and the cursor moves one past it.
    With identical subscriptions the counts differ by at most one; with different
    subscriptions they may not (C0: T0, C1: T0+T1, C2: T0+T1+T2 with 1, 2 and 3 partitions
    gives C0 [T0P0], C1 [T1P0], C2 [T1P1, T2P0, T2P1, T2P2], though C1 could take T1P1).
    ``previous`` is ignored.
    """
    del previous  # RoundRobin is stateless, like Range.
    subscriptions = _subscriptions(members, partitions_per_topic)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
    ring = sorted(members)
    cursor = 0
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        for tp in _partitions(topic, partitions_per_topic[topic]):
            # Terminates: the topic was collected from some member's subscription.
            while topic not in subscriptions[ring[cursor]]:
                cursor = (cursor + 1) % len(ring)
            assignment[ring[cursor]].append(tp)
            cursor = (cursor + 1) % len(ring)
    return _sorted_lists(assignment)


# --------------------------------------------------------------------------------------------
# Sticky
# --------------------------------------------------------------------------------------------


def assign_sticky(
    members: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    previous: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> Assignment:
    """Kafka's ``sticky`` (and ``cooperative-sticky``) placement: balanced first, then sticky.

    Goals, in priority order (as in Kafka's ``AbstractStickyAssignor``):

    1. *Balance.* The result is as balanced as the subscriptions allow: no sequence of moves,
       each handing a partition to a member subscribed to its topic, can take a partition from
       a member with ``k`` partitions to a member with ``k - 2`` or fewer. Such an assignment
       minimises the largest count, maximises the smallest, and minimises the sum of squared
       counts among all valid assignments. With identical subscriptions it means that the counts
       differ by at most one.
    2. *Stickiness.* As many partitions as possible stay with their previous owner.

    The algorithm, in three phases:

    1. *Keep.* A member keeps every previous partition that still exists and whose topic it
       still subscribes to. A partition claimed by several current members is kept by none of
       them (Kafka does the same for owners claiming it in the same generation; without
       generations every claim is equally old).
    2. *Place.* The remaining partitions are ordered by how many members could take them
       (fewest first, then by topic and partition) and each goes to the subscribed member that
       currently has the fewest partitions (ties to the smallest member id). With no previous
       assignment and identical subscriptions this is exactly the round-robin deal.
    3. *Balance.* While some member ``u`` has a chain of moves to a member ``v`` with at least
       two partitions fewer, apply the shortest such chain (u gives one partition to x1, x1
       gives one to x2, ..., to v): u loses one, v gains one, everyone in between keeps its
       count. Sources are tried one load level at a time from the most loaded down; within
       the first level that has a chain, the shortest chain wins, then the least loaded
       target. Each chain lowers the sum of squared counts by at least 2, so the
       loop ends; when no chain is left the assignment is balanced in the sense of goal 1.
       Along each hop the moved partition is, by preference, one going back to its previous
       owner, then one its holder did not own before (a free move), then any other.

    With identical subscriptions this is movement-optimal: every member keeps
    ``min(previous count, final count)`` of its valid previous partitions, and the members with
    the most previous partitions are the ones that end with the larger quota. With different
    subscriptions the placement is a heuristic, like Kafka's general-case algorithm: balanced
    always, sticky as far as the greedy choices above allow.
    """
    subscriptions = _subscriptions(members, partitions_per_topic)
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    subscribers = {t: sorted(m for m, ts in subscriptions.items() if t in ts) for t in topics}

    # Phase 1: keep valid, uncontested previous ownership.
    claims: dict[TopicPartition, set[str]] = {}
    for member, owned in (previous or {}).items():
        if member not in subscriptions:
            continue  # The member left the group; its partitions are free.
        for raw in owned:
            tp = TopicPartition(*raw)
            if (
                tp.topic in subscriptions[member]
                and 0 <= tp.partition < partitions_per_topic[tp.topic]
            ):
                claims.setdefault(tp, set()).add(member)
    previous_owner = {tp: next(iter(c)) for tp, c in claims.items() if len(c) == 1}
    held: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    for tp, member in previous_owner.items():
        held[member].add(tp)

    # Phase 2: place the rest greedily, hardest-to-place first, each on the least loaded member.
    free = [
        tp
        for t in topics
        for tp in _partitions(t, partitions_per_topic[t])
        if tp not in previous_owner
    ]
    free.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in free:
        taker = min(subscribers[tp.topic], key=lambda m: (len(held[m]), m))
        held[taker].add(tp)

    # Phase 3: apply improving chains until there are none.
    while (chain := _improving_chain(held, subscriptions)) is not None:
        # Walk the chain backwards so that each giver still holds exactly what it held when the
        # chain was found: the last giver hands over before it receives anything.
        for giver, taker in reversed(list(pairwise(chain))):
            tp = _partition_to_move(held[giver], giver, taker, subscriptions[taker], previous_owner)
            held[giver].remove(tp)
            held[taker].add(tp)
    return _sorted_lists(held)


def _improving_chain(
    held: Mapping[str, set[TopicPartition]], subscriptions: Mapping[str, frozenset[str]]
) -> list[str] | None:
    """The members along the chain phase 3 applies next, or None when the assignment is balanced.

    There is an edge x -> y when x holds a partition of a topic y subscribes to. A chain runs
    from a source u to a target v with ``load(v) <= load(u) - 2``. Sources are taken from the
    highest load down, one load level at a time; within the first level that has any chain we
    take the one minimising (length, target load, source id, target id). Shorter chains move
    fewer partitions; with identical subscriptions every chain has length 1, so this is
    "most loaded gives to least loaded", which the movement-optimality argument relies on.
    """
    load = {m: len(tps) for m, tps in held.items()}
    held_topics = {m: {tp.topic for tp in tps} for m, tps in held.items()}
    neighbours_order = sorted(held, key=lambda m: (load[m], m))
    lightest = min(load.values(), default=0)
    for level in sorted(set(load.values()), reverse=True):
        if level - 2 < lightest:
            return None  # Levels come in decreasing order: no lower level can do better.
        best: tuple[int, int, str, str] | None = None
        best_parent: dict[str, str | None] = {}
        for source in sorted(m for m in held if load[m] == level):
            # Breadth-first search from the source over the edges defined above.
            parent: dict[str, str | None] = {source: None}
            distance = {source: 0}
            queue = deque([source])
            while queue:
                x = queue.popleft()
                for y in neighbours_order:
                    if y not in parent and not held_topics[x].isdisjoint(subscriptions[y]):
                        parent[y] = x
                        distance[y] = distance[x] + 1
                        queue.append(y)
            for target in parent:
                if load[target] <= level - 2:
                    key = (distance[target], load[target], source, target)
                    if best is None or key < best:
                        best, best_parent = key, parent
        if best is not None:
            chain = [best[3]]
            while (step := best_parent[chain[-1]]) is not None:
                chain.append(step)
            return chain[::-1]
    return None


def _partition_to_move(
    giver_holds: Iterable[TopicPartition],
    giver: str,
    taker: str,
    taker_topics: frozenset[str],
    previous_owner: Mapping[TopicPartition, str],
) -> TopicPartition:
    """Which of the giver's partitions to hand to the taker: the one that costs least stickiness.

    First a partition the taker owned before (the move undoes an earlier one, as Kafka's
    ``getTheActualPartitionToBeMoved`` does), then one the giver did not own before (it moved
    this round anyway), then any; ties go to the smallest (topic, partition).
    """

    def cost(tp: TopicPartition) -> tuple[int, TopicPartition]:
        owner = previous_owner.get(tp)
        return (0 if owner == taker else 1 if owner != giver else 2, tp)

    return min((tp for tp in giver_holds if tp.topic in taker_topics), key=cost)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

ASSIGNORS: Mapping[str, Assignor] = {
    "range": assign_range,
    "roundrobin": assign_round_robin,
    "sticky": assign_sticky,
    # Kafka's CooperativeStickyAssignor computes the sticky placement, then withholds each
    # partition that changes hands between two current members until its old owner has revoked
    # it (it is handed over in the follow-up rebalance). That staging is the group client's job;
    # the placement it converges to is sticky's, which is what this registry provides.
    "cooperative-sticky": assign_sticky,
}


#: The assignors whose placement depends on the members' previous partitions.
STICKY_ASSIGNORS = frozenset({"sticky", "cooperative-sticky"})


def get_assignor(name: str) -> Assignor:
    """The assignor registered under Kafka's protocol ``name`` (e.g. ``"roundrobin"``).

    Raises ``UnknownAssignorError`` naming the expected names when ``name`` is not one of them.
    """
    try:
        return ASSIGNORS[name]
    except KeyError:
        expected = ", ".join(repr(n) for n in ASSIGNORS)
        raise UnknownAssignorError(
            f"unknown partition assignor: expected one of {expected}, found {name!r}"
        ) from None
