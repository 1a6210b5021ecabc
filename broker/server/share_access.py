"""What the share-group handlers (``handlers/share_groups``, ``share_fetch``, ``share_admin``)
share: whether this broker coordinates a share group, a group's share-partition of a partition
this broker leads, and the loop's clock in milliseconds. Kept out of the handler modules so that
no handler imports another.

Called on the event loop only.
"""

from __future__ import annotations

import asyncio

from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.share.share_partition import SharePartition

__all__ = ["is_coordinator", "now_ms", "share_partition"]


def now_ms() -> float:
    return asyncio.get_running_loop().time() * 1000


def share_partition(
    ctx: BrokerContext, group_id: str, topic: str, partition: int
) -> SharePartition | int:
    """The group's share-partition of a partition this broker leads (created at the position
    ``share.auto.offset.reset`` names if new), or the error code."""
    if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
        return Errors.TOPIC_AUTHORIZATION_FAILED
    leading, error = ctx.replicas.leader_or_error(topic, partition)
    if leading is None:
        return error
    plog = leading.log
    sp = ctx.share.partition(
        group_id, topic, partition, lambda: (plog.log_start_offset, plog.high_watermark)
    )
    if sp.start_offset < plog.log_start_offset:  # retention passed it
        sp.reset_start(plog.log_start_offset)
    return sp


def is_coordinator(ctx: BrokerContext, group_id: str) -> bool:
    """Whether this broker leads the group's ``__consumer_offsets`` partition (standalone:
    always, once the topic exists; before, the first FindCoordinator creates it)."""
    if ctx.cluster.get(OFFSETS_TOPIC) is None:
        return len(ctx.cluster.brokers()) <= 1
    leading, _ = ctx.replicas.leader_or_error(OFFSETS_TOPIC, ctx.offsets.partition_for(group_id))
    return leading is not None
