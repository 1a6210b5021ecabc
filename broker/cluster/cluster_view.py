"""``ClusterView``: what a broker knows of the cluster it belongs to, in standalone and cluster
mode alike.

Two implementations, chosen once by the broker from its config:

* :class:`~sluice.broker.cluster.cluster_metadata.ClusterMetadata` — a ZooKeeper-coordinated
  cluster: topics, assignments, leaders and ISRs come from znodes through watches.
* :class:`~sluice.broker.cluster.single_broker.SingleBrokerCluster` — standalone mode as a
  cluster of one: topics in the log dir, and this broker the only replica, the leader (at
  epoch 0) and the whole ISR of every partition.

Everything above ``sluice.broker.cluster`` — the replica manager, the request handlers — sees
only this interface, so it has one code path for both modes.

It is a :class:`~sluice.broker.cluster.topic_metadata.MetadataStore` (topics, producer ids)
plus what replication needs (live brokers, replicas, partition states, the leader's
conditional ISR write), topic administration beyond creation (``alter_topic_config``,
``create_partitions``), the controller's partition administration (``partition_admin``:
elections, reassignments) and the broker's membership
(its advertised address, ``start``, ``stop``). Reads are safe from any thread; the writes may
block on the network (the broker calls them off its event loop in cluster mode).

Listeners (``add_listener``) hear of every change of topics, assignments, partition states or
brokers, with the affected ``(topic, partition)``s or ``None`` for "re-read everything". They
may be called on any thread: a cluster calls them on its metadata thread, a single broker on
the thread that made the change (the event loop, in standalone mode).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from sluice.broker.cluster.partition_admin import PartitionAdmin
from sluice.broker.cluster.topic_metadata import MetadataStore, TopicInfo
from sluice.broker.cluster.zk_data import BrokerInfo, PartitionState

Listener = Callable[[set[tuple[str, int]] | None], None]


class ClusterView(MetadataStore, Protocol):
    """One broker's view of its cluster. See the module docstring."""

    #: This broker's advertised address, registered by ``start()`` (set it before then).
    listener_host: str
    listener_port: int
    #: Every advertised listener as ``(name, protocol, host, port)``, registered by
    #: ``start()`` too (set before then; empty: the one listener above, PLAINTEXT).
    endpoints: tuple[tuple[str, str, str, int], ...]
    #: ElectLeaders and partition reassignments: the controller (standalone: this broker).
    partition_admin: PartitionAdmin

    def start(self) -> None:
        """Join: register this broker and begin watching the cluster."""
        ...

    def stop(self) -> None:
        """Leave: deregister (leadership moves away) and stop watching. Idempotent."""
        ...

    def add_listener(self, callback: Listener) -> None: ...

    def controller_id(self) -> int:
        """The active controller's broker id, or -1 while there is none."""
        ...

    def brokers(self) -> dict[int, BrokerInfo]:
        """The live brokers, by id."""
        ...

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        """The partition's replicas in preference order; ``()`` if unknown."""
        ...

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Leader, leader epoch and ISR; None while the partition has no state yet."""
        ...

    def update_isr(
        self, topic: str, partition: int, leader_epoch: int, isr: Sequence[int], zk_version: int
    ) -> PartitionState | None:
        """The leader's ISR change, conditional on ``zk_version``: the new state, or None if
        the state moved meanwhile."""
        ...

    def alter_topic_config(self, name: str, config: dict[str, str]) -> TopicInfo:
        """Replace the topic's config overrides (validated by the caller); every broker's
        replicas apply them live. ``UnknownTopicError`` if there is no topic."""
        ...

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
        """As ``MetadataStore.create_topic``; ``assignment`` gives each partition's replicas in
        partition order (CreateTopics' ``assignments``; None: assigned over the live brokers),
        and then ``partitions``/``replication_factor`` must match it.
        ``InvalidReplicaAssignmentError`` for replicas that are not distinct live brokers."""
        ...

    def create_partitions(
        self,
        name: str,
        total: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Grow the topic to ``total`` partitions; ``assignment`` gives the new partitions'
        replicas (None: assigned as for a new topic). ``InvalidPartitionsError`` unless it
        grows, ``InvalidReplicaAssignmentError`` for a bad assignment."""
        ...
