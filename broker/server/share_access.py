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


#: Reads of a share-partition's state before a request gives up with LEADER_NOT_AVAILABLE,
#: and the first pause between them (doubling): about 0.75 s in all. The state topic's
#: partition may be moments from being served (just created, its log being made off the event
#: loop, or its leader just elected); librdkafka's share consumer hands LEADER_NOT_AVAILABLE to
#: the application, so a request waits that long first, as Kafka's share-state persister
#: retries a coordinator that is loading or moving with backoff. (ShareFetch tries once per
#: pass of its own wait and answers such a partition without an error: ``share_fetch``.)
STATE_READ_ATTEMPTS = 4
STATE_READ_BACKOFF_S = 0.05


async def share_partition(
    ctx: BrokerContext,
    group_id: str,
    topic: str,
    partition: int,
    attempts: int = STATE_READ_ATTEMPTS,
) -> SharePartition | int:
    """The group's share-partition of a partition this broker leads, or the error code
    (``attempts`` tries of :func:`_share_partition_once` while the state cannot be read; a
    heartbeat, which must not wait, tries once).

    The first time this broker needs it at the partition's current leader epoch, its state is
    read from ``__share_group_state`` first (``ShareStateLog.refresh``): after a failover the
    new leader goes on from what the old one wrote — no acknowledged record is handed out
    again, no unacknowledged one is skipped. Without a state there, it is created at the
    position ``share.auto.offset.reset`` names. LEADER_NOT_AVAILABLE while the state cannot be
    read or the new start not written, after ``attempts`` tries: retriable (Kafka answers
    COORDINATOR_NOT_AVAILABLE there; librdkafka hands either to the application)."""
    for attempt in range(attempts):
        found = await _share_partition_once(ctx, group_id, topic, partition)
        if found is not None:
            return found
        if attempt + 1 < attempts:
            await asyncio.sleep(STATE_READ_BACKOFF_S * 2**attempt)
    return Errors.LEADER_NOT_AVAILABLE


async def _share_partition_once(
    ctx: BrokerContext, group_id: str, topic: str, partition: int
) -> SharePartition | int | None:
    """One try of :func:`share_partition`: None when the state could not be read now."""
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
        return None
    return sp


def is_coordinator(ctx: BrokerContext, group_id: str) -> bool:
    """Whether this broker leads the group's ``__consumer_offsets`` partition (standalone:
    always, once the topic exists; before, the first FindCoordinator creates it)."""
    if ctx.cluster.get(OFFSETS_TOPIC) is None:
        return len(ctx.cluster.brokers()) <= 1
    leading, _ = ctx.replicas.leader_or_error(OFFSETS_TOPIC, ctx.offsets.partition_for(group_id))
    return leading is not None
