"""``GroupCoordination``: a broker coordinates the groups of the ``__consumer_offsets``
partitions it leads, as Kafka's ``GroupCoordinator.onElection``/``onResignation`` do.

Becoming a partition's leader, the broker loads its committed offsets, then rebuilds from the
partition's records the classic groups (their last GroupMetadata record) and the consumer groups
(KIP-848's records), so a stable group keeps its generation and assignments across a
coordinator failover. Giving the partition up (follower, or the replica gone), it unloads the
groups that hash to it first — their waiting joins and syncs are answered NOT_COORDINATOR —
and then the offsets.

Called by the replica manager on the event loop (``on_role_change``), never concurrently.
"""

from __future__ import annotations

import logging

from sluice.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import OffsetStore
from sluice.broker.log.log import Log
from sluice.broker.replication.partition import Role
from sluice.common.topic_partition import TopicPartition

__all__ = ["GroupCoordination"]

log = logging.getLogger(__name__)


class GroupCoordination:
    """The replica manager's role-change callback for ``__consumer_offsets``."""

    def __init__(
        self,
        offsets: OffsetStore,
        groups: GroupCoordinator,
        consumer_groups: ConsumerGroupCoordinator,
        *,
        compact_on_load: bool,
    ) -> None:
        self.offsets = offsets
        self.groups = groups
        self.consumer_groups = consumer_groups
        # Only a standalone broker rewrites a mostly stale partition as it loads it (at
        # startup, before it serves): in a cluster the rewrite would run on the event loop
        # while serving, and followers would have to follow the moved log start.
        self.compact_on_load = compact_on_load

    def on_role_change(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        """Load or unload the groups of ``tp`` (any other topic: nothing to do)."""
        if tp.topic != OFFSETS_TOPIC:
            return
        if role is Role.LEADER and partition_log is not None:
            live = self.offsets.load_partition(
                tp.partition, partition_log, compact=self.compact_on_load
            )
            groups = self.groups.load_groups(self.offsets.groups_in(tp.partition))
            groups += self.consumer_groups.load_groups(
                self.offsets.consumer_records_in(tp.partition)
            )
            log.info("coordinating groups of %s (%d committed offsets, %d groups loaded)",
                     tp, live, len(groups))  # fmt: skip
            return

        def belongs(group: str) -> bool:
            return self.offsets.partition_for(group) == tp.partition

        self.groups.unload_groups(belongs)
        self.consumer_groups.unload_groups(belongs)
        self.offsets.unload_partition(tp.partition)
