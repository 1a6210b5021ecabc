"""Replica assignment for new topics and partitions (Kafka's ``assignReplicasToBrokers``).

:func:`assign_replicas_to_brokers` spreads partitions' replicas over the live brokers: the
first replica of each partition is its preferred leader. Pure and thread-safe.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from sluice.broker.cluster.topic_metadata import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
)

__all__ = ["assign_replicas_to_brokers"]


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition → replicas, the first replica being the preferred leader.

    ``brokers`` maps live broker id → rack (or ``None``). Without racks, as Kafka: the first
    replica of each partition goes round-robin over the sorted brokers from a random start; the
    others follow at an increasing shift, so the followers of one broker's partitions spread over
    the other brokers. With a rack on every broker, the broker list alternates racks first and a
    follower skips racks (then brokers) that already hold a replica while some remain without.
    Brokers with and without racks mixed: racks are ignored (Kafka's ``RackAwareMode.Safe``).
    """
    if partitions < 1:
        raise InvalidPartitionsError(f"expected at least 1 partition, found {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"expected a replication factor of at least 1, found {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} "
            f"available broker(s)"
        )
    rng = rng or random.Random()
    racks = {b: r for b, r in brokers.items() if r is not None}
    rack_aware = len(racks) == len(brokers)
    ordered = _rack_alternated(racks) if rack_aware else sorted(brokers)
    n = len(ordered)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    result: dict[int, tuple[int, ...]] = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        if not rack_aware:
            replicas += [
                ordered[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            num_racks = len(set(racks.values()))
            used_racks = {racks[ordered[first]]}
            k = 0
            while len(replicas) < replication_factor:
                broker = ordered[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[broker]
                if (rack not in used_racks or len(used_racks) == num_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    used_racks.add(rack)
        result[p] = tuple(replicas)
    return result


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack: ``rack1[0], rack2[0], rack3[0], rack1[1], …``."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]
