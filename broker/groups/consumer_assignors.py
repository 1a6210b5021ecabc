"""The consumer group protocol's server-side assignors (KIP-848): ``uniform`` and ``range``.

With ``group.protocol=consumer`` the coordinator, not a group leader, computes the group's
*target assignment* whenever the group epoch moves past it. An assignor is a pure function::

    assign(subscriptions, partitions, current) -> {member id: {topic: frozenset(partitions)}}

* ``subscriptions``: member id → the topic names it subscribes to (regexes already resolved);
* ``partitions``: topic → partition count, for every subscribed topic that exists;
* ``current``: the previous target assignment (member id → topic → partitions), which the
  sticky ``uniform`` assignor keeps as far as balance allows.

Every partition of a subscribed topic goes to exactly one member subscribed to that topic
(none if nobody is); the result names every member, with an empty mapping for one that gets
nothing. Both are deterministic: members and topics are visited in sorted order, so two
coordinators (a restarted one) compute the same target from the same input.

* ``uniform`` (Kafka's ``UniformAssignor``, the default): balanced within one partition per
  member across the topics each subscribes to, sticky — a member keeps what it had up to its
  quota, and only the surplus and unowned partitions move, each to the subscribed member with
  the fewest partitions (ties by member id).
* ``range`` (Kafka's ``RangeAssignor``): per topic, the subscribed members in member-id order
  get consecutive ranges, the first ``count % members`` one partition more, so members
  subscribed to co-partitioned topics get the same partition numbers of each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "uniform_assign", "range_assign"]

#: topic → partitions of one member.
Assignment = dict[str, frozenset[int]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, frozenset[int]]]],
    dict[str, Assignment],
]


def _freeze(owned: Mapping[str, set[int]]) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in sorted(owned.items()) if parts}


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, frozenset[int]]],
) -> dict[str, Assignment]:
    """Kafka's ``RangeAssignor``; ``current`` is not used (ranges are positional)."""
    del current
    result: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        quota, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = quota + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return {m: _freeze(owned) for m, owned in result.items()}


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, frozenset[int]]],
) -> dict[str, Assignment]:
    """Kafka's ``UniformAssignor``: balanced and sticky (see the module docstring)."""
    members = sorted(subscriptions)
    result: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    counts = dict.fromkeys(members, 0)
    if not members:
        return {}
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    # A member's fair share: the partitions of its topics over the members sharing them,
    # rounded up, so that keeping up to it never starves another member by more than one.
    quota: dict[str, int] = {}
    for m in members:
        mine = [tp for tp in every if tp[0] in subscriptions[m]]
        sharers = {o for o in members for t in subscriptions[m] if t in subscriptions[o]}
        quota[m] = -(-len(mine) // max(1, len(sharers)))
    placed: set[tuple[str, int]] = set()
    for m in members:  # stickiness: keep what is still valid, up to the quota
        for topic, parts in sorted(current.get(m, {}).items()):
            if topic not in subscriptions[m] or topic not in partitions:
                continue
            for p in sorted(parts):
                if p < partitions[topic] and (topic, p) not in placed and counts[m] < quota[m]:
                    result[m].setdefault(topic, set()).add(p)
                    placed.add((topic, p))
                    counts[m] += 1
    for topic, p in every:
        if (topic, p) in placed:
            continue
        candidates = [m for m in members if topic in subscriptions[m]]
        if not candidates:
            continue
        chosen = min(candidates, key=lambda m: (counts[m], m))
        result[chosen].setdefault(topic, set()).add(p)
        counts[chosen] += 1
    return {m: _freeze(owned) for m, owned in result.items()}


#: ``group.consumer.assignors``' names → the assignors; the first is the default.
ASSIGNORS: Mapping[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
