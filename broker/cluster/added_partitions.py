"""The replicas of partitions added to a topic (CreatePartitions; Kafka's
``AdminZkClient.addPartitions``) or of a new topic's (CreateTopics, from partition 0): assigned
over the live brokers, or as the request gives them — then each given list must name
``replication`` distinct live brokers.

Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.broker.cluster.replica_assignment import assign_replicas_to_brokers
from sluice.broker.cluster.topic_metadata import InvalidReplicaAssignmentError
from sluice.broker.cluster.zk_data import BrokerInfo


def added_partitions(
    live: Mapping[int, BrokerInfo],
    first: int,
    count: int,
    replication: int,
    assignment: Sequence[Sequence[int]] | None,
) -> dict[int, tuple[int, ...]]:
    """Partitions ``first .. first + count - 1`` → their replicas (see the module docstring);
    :class:`InvalidReplicaAssignmentError` names what is wrong with a given assignment."""
    if assignment is None:
        fresh = assign_replicas_to_brokers(
            {b.broker_id: b.rack for b in live.values()}, count, replication
        )
        return {first + p: replicas for p, replicas in fresh.items()}
    if len(assignment) != count:
        raise InvalidReplicaAssignmentError(
            f"expected an assignment for each of the {count} new partitions, found "
            f"{len(assignment)}"
        )
    out: dict[int, tuple[int, ...]] = {}
    for i, replicas in enumerate(assignment):
        replicas = tuple(replicas)
        unknown = [b for b in replicas if b not in live]
        if len(replicas) != replication or len(set(replicas)) != len(replicas) or unknown:
            raise InvalidReplicaAssignmentError(
                f"partition {first + i}: expected {replication} distinct live brokers "
                f"(live: {sorted(live)}), found {list(replicas)}"
            )
        out[first + i] = replicas
    return out
