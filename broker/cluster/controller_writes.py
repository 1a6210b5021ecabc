"""The controller's writes to ZooKeeper, each fenced by ``/controller_epoch``.

Every write is one ZooKeeper transaction that starts with ``check(/controller_epoch, the znode
version this controller won at)``: a newer controller has changed that version, so a zombie's
write fails as a whole (:class:`ControllerMovedError`) and never lands half-way. Partition-state
and topic-assignment writes are further conditional on their own znode version (the partition
leader writes the ISR too; a CreatePartitions extends the assignment). Stateless functions;
safe from any thread (kazoo's client is).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError, RuntimeInconsistency

from sluice.broker.cluster.zk_data import (
    ControllerEpochZNode,
    PartitionState,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
)

__all__ = [
    "ControllerMovedError",
    "create_partition_state",
    "create_partition_states",
    "fenced_commit",
    "write_partition_state",
    "write_topic_assignment",
]


class ControllerMovedError(Exception):
    """A controller write was fenced: ``/controller_epoch`` moved, a newer controller exists."""


def fenced_commit(
    zk: KazooClient, epoch_zk_version: int, build: Callable[[TransactionRequest], None]
) -> list[Any]:
    """Commit ``check(/controller_epoch, epoch_zk_version)`` + the operations ``build`` adds.

    Returns the results of ``build``'s operations. Raises :class:`ControllerMovedError` if the
    check failed, else the first real failure (``BadVersionError``, ``NoNodeError``, …)."""
    tx = zk.transaction()
    tx.check(ControllerEpochZNode.path(), epoch_zk_version)
    build(tx)
    results = tx.commit()
    if isinstance(results[0], (BadVersionError, NoNodeError)):
        raise ControllerMovedError(
            f"{ControllerEpochZNode.path()}: expected znode version {epoch_zk_version}, found "
            f"another: a newer controller was elected"
        )
    for result in results[1:]:
        if isinstance(result, Exception) and not isinstance(
            result, (RolledBackError, RuntimeInconsistency)
        ):
            raise result
    return list(results[1:])


def write_partition_state(
    zk: KazooClient,
    epoch_zk_version: int,
    topic: str,
    partition: int,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    controller_epoch: int,
    expected_version: int,
) -> PartitionState:
    """A controller's write of a partition state, conditional on the state's znode version and
    fenced by ``/controller_epoch``. Raises ``BadVersionError`` if the state moved,
    ``NoNodeError`` if it is gone, :class:`ControllerMovedError` if this controller is a zombie."""
    data = TopicPartitionStateZNode.encode(leader, leader_epoch, isr, controller_epoch)
    path = TopicPartitionStateZNode.path(topic, partition)
    (stat,) = fenced_commit(
        zk, epoch_zk_version, lambda tx: tx.set_data(path, data, version=expected_version)
    )
    return PartitionState(leader, leader_epoch, tuple(isr), controller_epoch, stat.version)


def create_partition_state(
    zk: KazooClient,
    epoch_zk_version: int,
    topic: str,
    partition: int,
    leader: int,
    isr: Sequence[int],
    controller_epoch: int,
) -> PartitionState:
    """Create a new partition's state znode (leader epoch 0) and its parents, fenced. Raises
    ``NodeExistsError`` if the state exists, ``NoNodeError`` if the topic is gone."""
    data = TopicPartitionStateZNode.encode(leader, 0, isr, controller_epoch)
    parents = [
        p
        for p in (TopicPartitionsZNode.path(topic), TopicPartitionZNode.path(topic, partition))
        if zk.exists(p) is None
    ]

    def build(tx: TransactionRequest) -> None:
        for parent in parents:  # not ensure_path: it would resurrect a deleted topic's znode
            tx.create(parent, b"")
        tx.create(TopicPartitionStateZNode.path(topic, partition), data)

    fenced_commit(zk, epoch_zk_version, build)
    return PartitionState(leader, 0, tuple(isr), controller_epoch, 0)


def create_partition_states(
    zk: KazooClient,
    epoch_zk_version: int,
    topic: str,
    states: Mapping[int, tuple[int, Sequence[int]]],
    controller_epoch: int,
    *,
    create_partitions_znode: bool,
) -> dict[int, PartitionState]:
    """Create the state znodes of many new partitions of ``topic`` (partition → (leader,
    ISR), leader epoch 0) with their ``partitions/<p>`` parents in one fenced transaction —
    one ZooKeeper round trip instead of three per partition (a 1,000-partition CreateTopics).
    ``create_partitions_znode``: ``/brokers/topics/<topic>/partitions`` is missing too.

    All or nothing: raises ``NodeExistsError`` if any of them exists (the caller falls back to
    :func:`create_partition_state` one by one), ``NoNodeError`` if the topic is gone,
    :class:`ControllerMovedError` if fenced. The caller keeps the transaction under
    ZooKeeper's request size (``jute.maxbuffer``, 1 MiB): a few hundred partitions each."""

    def build(tx: TransactionRequest) -> None:
        if create_partitions_znode:
            tx.create(TopicPartitionsZNode.path(topic), b"")
        for partition, (leader, isr) in states.items():
            tx.create(TopicPartitionZNode.path(topic, partition), b"")
            tx.create(
                TopicPartitionStateZNode.path(topic, partition),
                TopicPartitionStateZNode.encode(leader, 0, isr, controller_epoch),
            )

    fenced_commit(zk, epoch_zk_version, build)
    return {
        p: PartitionState(leader, 0, tuple(isr), controller_epoch, 0)
        for p, (leader, isr) in states.items()
    }


def write_topic_assignment(
    zk: KazooClient,
    epoch_zk_version: int,
    topic: str,
    partitions: Mapping[int, Sequence[int]],
    topic_id: uuid.UUID | None,
    *,
    internal: bool,
    adding: Mapping[int, Sequence[int]],
    removing: Mapping[int, Sequence[int]],
    expected_version: int,
) -> int:
    """Rewrite ``/brokers/topics/<topic>`` (a reassignment's steps), conditional on its znode
    version and fenced; returns the new znode version. Raises ``BadVersionError`` if the topic
    znode moved (a CreatePartitions), ``NoNodeError`` if it is gone."""
    data = TopicZNode.encode(
        partitions, topic_id, internal=internal, adding=adding, removing=removing
    )
    path = TopicZNode.path(topic)
    (stat,) = fenced_commit(
        zk, epoch_zk_version, lambda tx: tx.set_data(path, data, version=expected_version)
    )
    return int(stat.version)
