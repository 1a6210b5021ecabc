"""What the share-group handlers (``handlers/share_groups``, ``share_fetch``, ``share_admin``)
share: whether this broker coordinates a share group, a group's share-partition of a partition
this broker leads, and the loop's clock in milliseconds. Kept out of the handler modules so that
no handler imports another.

Called on the event loop only.
"""

from __future__ import annotations

import asyncio
import logging

from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.share.share_partition import SharePartition
from sluice.broker.share.share_state_log import ShareStateUnavailableError

__all__ = ["is_coordinator", "now_ms", "share_partition"]

log = logging.getLogger(__name__)


def now_ms() -> float:
    return asyncio.get_running_loop().time() * 1000


async def share_partition(
    ctx: BrokerContext, group_id: str, topic: str, partition: int
) -> SharePartition | int:
    """The group's share-partition of a partition this broker leads, or the error code.

    The first time this broker needs it at the partition's current leader epoch, its state is
    read from ``__share_group_state`` first (``ShareStateLog.refresh``): after a failover the
    new leader goes on from what the old one wrote — no acknowledged record is handed out
    again, no unacknowledged one is skipped. Without a state there, it is created at the
    position ``share.auto.offset.reset`` names. LEADER_NOT_AVAILABLE while the state cannot be
    read or the new start not written: retriable, and one a share consumer retries quietly
    (librdkafka raises COORDINATOR_NOT_AVAILABLE on a fetched partition to the application)."""
    if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
        return Errors.TOPIC_AUTHORIZATION_FAILED
    leading, error = ctx.replicas.leader_or_error(topic, partition)
    if leading is None:
        return error
    key = (group_id, topic, partition)
    if ctx.share.store.leader_epochs.get(key) != leading.leader_epoch:
        ctx.share.partitions.pop(key, None)  # leadership moved away and back: read again
    new = key not in ctx.share.partitions
    try:
        if new:
            await ctx.share.store.refresh(group_id, topic, partition, leading.leader_epoch)
            leading, error = ctx.replicas.leader_or_error(topic, partition)  # after the await
            if leading is None:
                return error
        plog = leading.log
        sp = ctx.share.partition(
            group_id, topic, partition, lambda: (plog.log_start_offset, plog.high_watermark)
        )
        if sp.start_offset < plog.log_start_offset:  # retention passed it
            sp.reset_start(plog.log_start_offset)
            ctx.share.persist(group_id, [(topic, partition)])
        if new:
            # A start chosen here (no state in the topic) is committed before any record is
            # handed out from it: a failover must not move it past what was delivered.
            await ctx.share.flush()
    except ShareStateUnavailableError as exc:
        log.info("share-partition %s-%d of %s: %s", topic, partition, group_id, exc)
        ctx.share.partitions.pop(key, None)
        return Errors.LEADER_NOT_AVAILABLE
    return sp


def is_coordinator(ctx: BrokerContext, group_id: str) -> bool:
    """Whether this broker leads the group's ``__consumer_offsets`` partition (standalone:
    always, once the topic exists; before, the first FindCoordinator creates it)."""
    if ctx.cluster.get(OFFSETS_TOPIC) is None:
        return len(ctx.cluster.brokers()) <= 1
    leading, _ = ctx.replicas.leader_or_error(OFFSETS_TOPIC, ctx.offsets.partition_for(group_id))
    return leading is not None
