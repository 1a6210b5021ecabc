"""``PartitionAdmin``: the controller's administrative operations on partitions, as the request
handlers reach them through the cluster view (``ClusterView.partition_admin``).

* :meth:`~PartitionAdmin.elect_leaders` — ElectLeaders (KIP-460): preferred or unclean
  election, per partition (rules in ``leader_election``).
* :meth:`~PartitionAdmin.alter_reassignments` / :meth:`~PartitionAdmin.list_reassignments` —
  Alter/ListPartitionReassignments (KIP-455; the procedure in ``reassignment``).

Implemented by the ZooKeeper cluster's :class:`~sluice.broker.cluster.controller.Controller`,
which answers only while it is the active controller (:class:`NotControllerError` elsewhere,
which clients meet as NOT_CONTROLLER and retry at the controller), and by the standalone
:class:`~sluice.broker.cluster.single_broker.SingleBrokerCluster`, a cluster of one in which
every partition already has its one possible leader and replica set.

Every method blocks (the controller answers from its own thread) for at most ``timeout``
seconds, then raises ``TimeoutError``: call them off the event loop. Safe from any thread.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from sluice.broker.cluster.leader_election import ElectionOutcome, ElectionType
from sluice.broker.cluster.reassignment import ReplicaAssignment
from sluice.broker.protocol.errors import Errors

__all__ = ["NotControllerError", "PartitionAdmin", "TopicPartitionKey"]

TopicPartitionKey = tuple[str, int]


class NotControllerError(Exception):
    """This broker is not the active controller (NOT_CONTROLLER): ask the controller."""


class PartitionAdmin(Protocol):
    def elect_leaders(
        self,
        election: ElectionType,
        partitions: Collection[TopicPartitionKey] | None,
        timeout: float,
    ) -> dict[TopicPartitionKey, ElectionOutcome]:
        """Elect leaders of ``partitions`` (None: every partition); one outcome each. A
        successful outcome's ``target`` names the new leader, already written."""
        ...

    def alter_reassignments(
        self, targets: Mapping[TopicPartitionKey, Sequence[int] | None], timeout: float
    ) -> dict[TopicPartitionKey, tuple[Errors, str | None]]:
        """Start (a replica list) or cancel (None) reassignments; ``(error, message)`` each:
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS."""
        ...

    def list_reassignments(
        self, partitions: Collection[TopicPartitionKey] | None, timeout: float
    ) -> dict[TopicPartitionKey, ReplicaAssignment]:
        """The reassignments in progress among ``partitions`` (None: all)."""
        ...
