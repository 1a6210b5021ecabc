"""``SingleBrokerCluster``: standalone mode as a cluster of one broker.

A :class:`~sluice.broker.cluster.cluster_view.ClusterView` over the topics a
:class:`~sluice.broker.cluster.local_metadata.LocalMetadataStore` keeps in the first log dir,
whose every answer about leadership is "this broker": it is the only live broker and the
controller, and of every partition of every topic the only replica, the leader at epoch 0
(standalone logs have always been written at epoch 0) and the whole ISR. So the replica
manager runs unchanged with replication factor 1 — an append is committed the moment it is
written — and the request handlers need no standalone branch. It is its own ``partition_admin``
too: every partition already has its preferred leader (ElectLeaders: ELECTION_NOT_NEEDED) and
its one possible replica set (a reassignment to ``[broker_id]`` is done at once, to any other
broker INVALID_REPLICA_ASSIGNMENT; nothing is ever in progress).

Topic changes reach the listeners (the replica manager) synchronously, on the caller's thread:
``create_topic`` returns once the partitions' logs exist. If a listener fails (a log cannot be
created: ``OSError``, ``StorageError``) the topic is removed again, listeners told, and the
error re-raised, so that no topic stays registered with partitions that have no log.

Thread-safe as its store is; listeners run on the thread that changed the topics (the broker's
event loop: standalone, the broker calls the metadata inline).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from sluice.broker.cluster.cluster_view import Listener
from sluice.broker.cluster.leader_election import ElectionOutcome, ElectionType, admin_election
from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.partition_admin import PartitionAdmin, TopicPartitionKey
from sluice.broker.cluster.reassignment import (
    InvalidReassignmentError,
    ReplicaAssignment,
    validate_target,
)
from sluice.broker.cluster.topic_metadata import InvalidReplicaAssignmentError, TopicInfo
from sluice.broker.cluster.zk_data import BrokerInfo, PartitionState
from sluice.broker.protocol.errors import Errors

log = logging.getLogger(__name__)

LEADER_EPOCH = 0


class SingleBrokerCluster:
    """A one-broker cluster over ``store``. See the module docstring."""

    def __init__(
        self, store: LocalMetadataStore, broker_id: int, *, listener_host: str, listener_port: int
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.listener_host = listener_host
        self.listener_port = listener_port
        self.endpoints: tuple[tuple[str, str, str, int], ...] = ()
        self.cluster_id = store.cluster_id
        self._listeners: list[Listener] = []
        self.partition_admin: PartitionAdmin = self
        # Every partition's state is the same: led here at epoch 0, in sync here alone.
        self._state = PartitionState(
            leader=broker_id,
            leader_epoch=LEADER_EPOCH,
            isr=(broker_id,),
            controller_epoch=0,
            zk_version=0,
        )

    # -- membership ------------------------------------------------------------------------

    def start(self) -> None:
        """Nothing to join: the broker is the whole cluster."""

    def stop(self) -> None:
        """Nothing to leave."""

    def add_listener(self, callback: Listener) -> None:
        """Call ``callback`` after each topic creation or deletion, on the same thread, with
        the topic's partitions."""
        self._listeners.append(callback)

    def _notify(self, changed: set[tuple[str, int]]) -> None:
        for callback in list(self._listeners):
            callback(changed)

    # -- reads -----------------------------------------------------------------------------

    def controller_id(self) -> int:
        return self.broker_id

    def brokers(self) -> dict[int, BrokerInfo]:
        endpoints = tuple((name, host, port) for name, _, host, port in self.endpoints)
        return {
            self.broker_id: BrokerInfo(
                self.broker_id, self.listener_host, self.listener_port, None, endpoints
            )
        }

    def topics(self) -> dict[str, TopicInfo]:
        return self.store.topics()

    def get(self, name: str) -> TopicInfo | None:
        return self.store.get(name)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        info = self.store.get(topic)
        return (self.broker_id,) if info is not None and 0 <= partition < info.partitions else ()

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self._state if self.replicas(topic, partition) else None

    # -- writes ----------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        internal: bool = False,
        validate_only: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicInfo:
        """Register the topic (the store's ``TopicError``s: exists, bad partitions, replication
        factor other than 1; an ``assignment`` naming any broker but this one is refused) and
        create its logs through the listeners."""
        self._check_assignment(assignment)
        info = self.store.create_topic(
            name, partitions, replication_factor, config,
            internal=internal, validate_only=validate_only,
        )  # fmt: skip
        if validate_only:
            return info
        try:
            self._notify({(name, p) for p in range(info.partitions)})
        except Exception:
            log.exception("creating the logs of topic %s failed; removing it", name)
            try:
                self.delete_topic(name)
            except Exception:
                log.exception("removing the half-created topic %s failed", name)
            raise
        log.info("created topic %s with %d partitions", name, info.partitions)
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        """Remove the topic (``UnknownTopicError`` if there is none); the listeners delete its
        logs."""
        info = self.store.delete_topic(name)
        self._notify({(name, p) for p in range(info.partitions)})
        log.info("deleted topic %s", name)
        return info

    def update_isr(
        self, topic: str, partition: int, leader_epoch: int, isr: Sequence[int], zk_version: int
    ) -> PartitionState | None:
        """The ISR of a single broker never changes: anything but ``(broker_id,)`` is a bug."""
        if tuple(isr) != (self.broker_id,):
            raise ValueError(
                f"expected the ISR of a single broker, ({self.broker_id},), found {list(isr)}"
            )
        return self._state

    def next_producer_id(self) -> int:
        return self.store.next_producer_id()

    # -- administration beyond creation ----------------------------------------------------

    def alter_topic_config(self, name: str, config: dict[str, str]) -> TopicInfo:
        """Store the overrides; the listeners (the replica manager) apply them to the logs."""
        info = self.store.alter_topic_config(name, config)
        self._notify({(name, p) for p in range(info.partitions)})
        log.info("altered the config of topic %s: %s", name, config)
        return info

    def _check_assignment(self, assignment: Sequence[Sequence[int]] | None) -> None:
        if assignment is None:
            return
        bad = [list(r) for r in assignment if tuple(r) != (self.broker_id,)]
        if bad:
            raise InvalidReplicaAssignmentError(
                f"a standalone broker holds every replica: expected [[{self.broker_id}]] "
                f"for each partition, found {bad}"
            )

    def create_partitions(
        self,
        name: str,
        total: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Grow the topic; the new partitions' logs exist when this returns. An assignment
        naming any broker but this one is refused."""
        before = self.store.get(name)
        self._check_assignment(assignment)
        info = self.store.add_partitions(name, total, validate_only=validate_only)
        if not validate_only and before is not None:
            self._notify({(name, p) for p in range(before.partitions, info.partitions)})
            log.info("topic %s now has %d partitions", name, info.partitions)
        return info

    # -- partition administration (PartitionAdmin) ------------------------------------------

    def _exists(self, tp: TopicPartitionKey) -> bool:
        return bool(self.replicas(*tp))

    def elect_leaders(
        self,
        election: ElectionType,
        partitions: Collection[TopicPartitionKey] | None,
        timeout: float,
    ) -> dict[TopicPartitionKey, ElectionOutcome]:
        if partitions is None:
            partitions = [(t, p) for t, i in self.topics().items() for p in range(i.partitions)]
        live = (self.broker_id,)
        return {
            tp: admin_election(election, self._state, live, live)
            if self._exists(tp)
            else ElectionOutcome(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            for tp in sorted(set(partitions))
        }

    def alter_reassignments(
        self, targets: Mapping[TopicPartitionKey, Sequence[int] | None], timeout: float
    ) -> dict[TopicPartitionKey, tuple[Errors, str | None]]:
        results: dict[TopicPartitionKey, tuple[Errors, str | None]] = {}
        current = ReplicaAssignment((self.broker_id,))
        for tp, target in targets.items():
            if not self._exists(tp):
                results[tp] = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                results[tp] = (Errors.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                try:
                    validate_target(target, current, (self.broker_id,))
                    results[tp] = (Errors.NONE, None)
                except InvalidReassignmentError as e:
                    results[tp] = (Errors.INVALID_REPLICA_ASSIGNMENT, str(e))
        return results

    def list_reassignments(
        self, partitions: Collection[TopicPartitionKey] | None, timeout: float
    ) -> dict[TopicPartitionKey, ReplicaAssignment]:
        return {}
