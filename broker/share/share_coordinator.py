"""``ShareCoordinator``: the broker's share-group service — groups, share-partitions, share
sessions and their durable state, behind the ShareGroupHeartbeat / ShareGroupDescribe /
ShareFetch / ShareAcknowledge handlers.

Kafka splits this between the group coordinator (membership), the share-partition manager on
each partition leader (in-flight records, sessions) and the share coordinator (state in
``__share_group_state``). Sluice keeps membership on the group's coordinator and the
share-partitions on the leaders of their topic partitions, as Kafka does, with the durable
state in a :class:`~sluice.broker.share.share_state_log.ShareStateLog`: records in the
replicated ``__share_group_state`` topic, whose partition leaders are the share coordinators
(see that module for how a write is made durable and how a new leader reads the state back).

A share-partition is created on the first fetch of it by its group on the broker that leads
its topic partition, from the state the topic holds for it (``ShareStateLog.refresh``, which
the caller awaits first), or else at the position the group's ``share.auto.offset.reset``
names (``latest``, the default: the high watermark then; ``earliest``: the log start), and
that start is queued for writing at once, so a restart or a failover never moves it. Its
state is queued again after every acknowledgement and every release of a member's records;
the handlers await :meth:`ShareCoordinator.flush` before they answer, so an acknowledgement
is answered only once its state is committed. Acquisitions are not written (a new leader
returns acquired records AVAILABLE, as Kafka's may under-count deliveries after a failure,
KIP-932). A share-partition whose topic partition this broker stops leading is dropped
(:meth:`ShareCoordinator.drop_partitions`).

The broker-level settings and their Kafka defaults (``group.share.*``) are the constants
below; the group-level ``share.*`` configs override them per group (``group_configs``).

Time is passed in (``now_ms``). Not thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from sluice.broker.share.share_group import ShareGroup, ShareMember
from sluice.broker.share.share_partition import AcknowledgeType, RecordState, SharePartition
from sluice.broker.share.share_session import (
    OPEN_EPOCH,
    ShareSession,
    ShareSessionLimitError,
    ShareSessionNotFoundError,
)
from sluice.broker.share.share_state_log import ShareStateLog, partition_key

#: Kafka's broker keys and defaults (the lead declares them in BrokerConfig).
RECORD_LOCK_DURATION_MS = 30_000  # group.share.record.lock.duration.ms
DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
PARTITION_MAX_RECORD_LOCKS = 2_000  # group.share.partition.max.record.locks
HEARTBEAT_INTERVAL_MS = 5_000  # group.share.heartbeat.interval.ms
SESSION_TIMEOUT_MS = 45_000  # group.share.session.timeout.ms
MAX_SHARE_SESSIONS = 2_000  # group.share.max.share.sessions

#: The group configs (IncrementalAlterConfigs on a GROUP resource) a share group reads.
AUTO_OFFSET_RESET = "share.auto.offset.reset"
LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_LIMIT = "share.delivery.count.limit"


class ShareCoordinator:
    """See the module docstring."""

    def __init__(
        self,
        store: ShareStateLog,
        *,
        lock_ms: int = RECORD_LOCK_DURATION_MS,
        delivery_limit: int = DELIVERY_COUNT_LIMIT,
        max_record_locks: int = PARTITION_MAX_RECORD_LOCKS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        max_sessions: int = MAX_SHARE_SESSIONS,
    ) -> None:
        self.store = store
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_record_locks = max_record_locks
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.max_sessions = max_sessions
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: group id -> its ``share.*`` configs
        self.group_configs: dict[str, dict[str, str]] = {}

    # -- membership ---------------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        """The group, if it has ever had a member (since this broker started) or state."""
        if group_id not in self.groups and group_id in self.store.groups():
            self.groups[group_id] = ShareGroup(group_id)
        return self.groups.get(group_id)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: Sequence[str] | None,
        partitions: Mapping[str, int],
        now_ms: float,
        **info: str | None,
    ) -> ShareMember | None:
        """A ShareGroupHeartbeat; None when the member left (epoch -1). Raises the group's
        Unknown/Fenced member errors."""
        self.expire_members(now_ms)
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        if member_epoch == -1:
            self._remove(group_id, member_id)
            return None
        return group.heartbeat(
            member_id, member_epoch, subscribed, partitions, now_ms,
            client_id=info.get("client_id") or "", client_host=info.get("client_host") or "",
            rack=info.get("rack"),
        )  # fmt: skip

    def expire_members(self, now_ms: float) -> None:
        for group_id, group in self.groups.items():
            for member in group.expire(now_ms, self.session_timeout_ms):
                self._release(group_id, member.member_id)

    def _remove(self, group_id: str, member_id: str) -> None:
        """The member left: its records return. Its session stays until the member closes
        it: a leaving client sends its last acknowledgements (epoch -1) alongside the leave,
        in either order, and must find the session there."""
        self.groups[group_id].leave(member_id)
        self._release(group_id, member_id, close=False)

    def _release(self, group_id: str, member_id: str, *, close: bool = True) -> None:
        """The member is gone (``close``: its session closes too); its records return."""
        if close:
            self.sessions.pop((group_id, member_id), None)
        changed = [
            (topic, p)
            for (g, topic, p), sp in self.partitions.items()
            if g == group_id and sp.release_member(member_id)
        ]
        self.persist(group_id, changed)

    # -- sessions -----------------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int, now_ms: float) -> ShareSession:
        """The member's session for a request at ``epoch`` (opening one at 0, moving the
        epoch otherwise); raises the session errors of ``share_session``.

        At most ``max_sessions`` exist (each holds a set of partitions, and any client can
        open one under a member id of its choosing): opening one more first closes those
        idle for a session timeout, then refuses (SHARE_SESSION_LIMIT_REACHED)."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            if key in self.sessions:
                # A new session replaces the old: what the old one held is released.
                self._release(group_id, member_id)
            elif len(self.sessions) >= self.max_sessions:
                self._close_idle_sessions(now_ms)
                if len(self.sessions) >= self.max_sessions:
                    raise ShareSessionLimitError(
                        f"{len(self.sessions)} share sessions are open, the limit"
                    )
            session = self.sessions[key] = ShareSession(group_id, member_id)
            session.used_ms = now_ms
            return session
        session_or_none = self.sessions.get(key)
        if session_or_none is None:
            raise ShareSessionNotFoundError(f"member {member_id} has no share session")
        session_or_none.advance(epoch)
        session_or_none.used_ms = now_ms
        return session_or_none

    def _close_idle_sessions(self, now_ms: float) -> None:
        idle = [
            key for key, s in self.sessions.items()
            if now_ms - s.used_ms > self.session_timeout_ms
        ]  # fmt: skip
        for group_id, member_id in idle:
            self._release(group_id, member_id)

    def close_session(self, group_id: str, member_id: str) -> None:
        """Epoch -1: the session ends, and the records still acquired in it return."""
        if (group_id, member_id) in self.sessions:
            self._release(group_id, member_id)

    # -- share-partitions ---------------------------------------------------------------------

    def partition(
        self,
        group_id: str,
        topic: str,
        partition: int,
        offsets: Callable[[], tuple[int, int]],
    ) -> SharePartition:
        """The group's share-partition, restored from the store or created (module
        docstring); ``offsets()`` gives the log's (log start, high watermark)."""
        key = (group_id, topic, partition)
        found = self.partitions.get(key)
        if found is not None:
            return found
        configs = self.group_configs.get(group_id, {})
        stored = self.store.load(group_id).get(partition_key(topic, partition))
        log_start, high_watermark = offsets()
        if stored is not None:
            start, records = stored
            start = max(start, log_start)
        else:
            earliest = configs.get(AUTO_OFFSET_RESET, "latest") == "earliest"
            start, records = (log_start if earliest else high_watermark), []
        sp = SharePartition(
            start,
            lock_ms=int(configs.get(LOCK_DURATION, self.lock_ms)),
            delivery_limit=int(configs.get(DELIVERY_LIMIT, self.delivery_limit)),
            max_record_locks=self.max_record_locks,
            restored=[(o, RecordState(s), c) for o, s, c in records],
        )
        self.partitions[key] = sp
        if stored is None:
            self.persist(group_id, [(topic, partition)])
        return sp

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        sp: SharePartition,
        batches: Iterable[tuple[int, int, Sequence[int]]],
    ) -> None:
        """Apply ``(first, last, types)`` acknowledgement batches: one type for the whole
        range, or one per offset. Raises ``InvalidRecordStateError`` at the first bad one
        (the ones before it stay applied, as in Kafka)."""
        for first, last, types in batches:
            if len(types) <= 1:
                kind = AcknowledgeType(types[0] if types else AcknowledgeType.ACCEPT)
                sp.acknowledge(member_id, first, last, kind)
                continue
            for offset, kind_id in zip(range(first, last + 1), types, strict=False):
                sp.acknowledge(member_id, offset, offset, AcknowledgeType(kind_id))

    def drop_partitions(self, topic: str, partition: int) -> None:
        """This broker no longer leads ``topic``-``partition``: forget every group's
        share-partition of it and its state not yet written (the new leader loads the state
        from the topic; a late write from here would be older than the new leader's)."""
        for key in [k for k in self.partitions if k[1:] == (topic, partition)]:
            del self.partitions[key]
            self.store.discard(*key)

    async def flush(self) -> None:
        """Return once every state queued so far is committed (``ShareStateLog.flush``;
        raises its ``ShareStateUnavailableError``)."""
        await self.store.flush()

    def persist(self, group_id: str, changed: Iterable[tuple[str, int]]) -> None:
        """Queue the state of the group's ``changed`` share-partitions for writing."""
        states = {
            partition_key(topic, p): (sp.start_offset, sp.snapshot())
            for topic, p in changed
            if (sp := self.partitions.get((group_id, topic, p))) is not None
        }
        if states:
            self.store.write(group_id, states)

    def group_partitions(self, group_id: str) -> dict[tuple[str, int], SharePartition]:
        return {(t, p): sp for (g, t, p), sp in self.partitions.items() if g == group_id}

    # -- administration (Describe/Alter/DeleteShareGroupOffsets) ------------------------------

    def start_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> start offset of every share-partition the group has (loaded
        or only written)."""
        out: dict[tuple[str, int], int] = {}
        for key, (start, _records) in self.store.load(group_id).items():
            topic, _, partition = key.rpartition(":")
            out[(topic, int(partition))] = start
        for (topic, p), sp in self.group_partitions(group_id).items():
            out[(topic, p)] = sp.start_offset
        return out

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or not group.members

    def forget(self, group_id: str, topic: str) -> bool:
        """Drop the group's share-partitions of ``topic`` (DeleteShareGroupOffsets); whether
        it had any."""
        keys = [k for k in self.start_offsets(group_id) if k[0] == topic]
        for t, p in keys:
            self.partitions.pop((group_id, t, p), None)
        self.store.delete(group_id, [partition_key(t, p) for t, p in keys])
        return bool(keys)
