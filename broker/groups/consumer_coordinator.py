"""``ConsumerGroupCoordinator``: the KIP-848 consumer group protocol (``group.protocol=consumer``).

One request drives everything: ConsumerGroupHeartbeat (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``). Each heartbeat, in Kafka's order:

1. checks the request (a joining member names its subscription and rebalance timeout; the
   assignor is one of ``group.consumer.assignors``; a regex compiles — RE2/J's full-match
   semantics through Python's ``re.fullmatch``, equal for the common syntax);
2. finds the member: epoch 0 joins (a static member whose instance id is held by a member
   that left with epoch -2 takes over its id's assignment and epoch without a rebalance;
   held by a live member: UNRELEASED_INSTANCE_ID), epoch -1 leaves, -2 leaves for now (static
   members only); a positive epoch must be the member's current one, or its previous one
   while it owns nothing beyond its assignment — else FENCED_MEMBER_EPOCH; an unknown member
   gets UNKNOWN_MEMBER_ID;
3. bumps the group epoch when a member joins or leaves, a subscription or assignor changes,
   or the partition count of a subscribed topic does (regexes resolved over the topics). A
   regex new to the group is resolved from the group's next heartbeat on: Kafka resolves it in
   the background, so the heartbeat that brings it is answered with the named topics only,
   and the regex's topics come with a later one (librdkafka's tests expect that order);
4. recomputes the target assignment when the group epoch is past it;
5. reconciles the member (``consumer_group.next_assignment``) and answers its epoch and, when
   it joined, its assignment changed or it reports owning something else, its assignment.

**Durable groups**: each heartbeat's changes are written to ``__consumer_offsets`` as Kafka
4 writes them (``consumer_group_records``) before it is answered (:meth:`persist`), and a
broker that takes a partition over rebuilds its groups from them (:meth:`load_groups`).

Sessions (``group.consumer.session.timeout.ms``) and revocations (the member's rebalance
timeout) that expire remove the member, freeing its partitions and bumping the epoch.

A group id is either a classic group's or a consumer group's. A group with members is never
converted online — Kafka's ``group.consumer.migration.policy=disabled``, whatever that key
says (empty groups convert under every policy, as in Kafka): a heartbeat for a classic group
with members is answered GROUP_ID_NOT_FOUND, an Empty classic group is converted (dropped from
the classic coordinator); a JoinGroup for a consumer group with members is answered
INCONSISTENT_GROUP_PROTOCOL by the JoinGroup handler.

Not thread-safe: it runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from sluice.broker.groups.consumer_assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment
from sluice.broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    next_assignment,
)
from sluice.broker.groups.consumer_group_records import group_records, load_group
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.group_coordinator_config import ConsumerGroupConfig
from sluice.broker.protocol.errors import Errors

__all__ = ["ConsumerGroupCoordinator", "HeartbeatResult"]

log = logging.getLogger(__name__)

#: Writes a group's records (key, value; None a tombstone) durably:
#: ``OffsetStore.store_consumer_records``.
StoreRecords = Callable[[str, Sequence[tuple[bytes, bytes | None]]], Awaitable[None]]
#: The cluster's non-internal topics: name → (partition count, topic id).
TopicsView = Callable[[], Mapping[str, tuple[int, uuid.UUID]]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The answer: ``assignment`` None when it is not sent (unchanged)."""

    error: Errors
    member_id: str
    member_epoch: int
    assignment: Assignment | None = None


def _fail(error: Errors, member_id: str, epoch: int) -> HeartbeatResult:
    return HeartbeatResult(error, member_id, epoch)


class ConsumerGroupCoordinator:
    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        *,
        classic: GroupCoordinator | None = None,
        store: StoreRecords | None = None,
        topics: TopicsView | None = None,
    ) -> None:
        """``config``: the broker's ``group.consumer.*`` keys (Kafka's defaults when None) — the
        session timeout, the heartbeat interval members are given, the assignors (the first
        the default) and the largest group. ``store`` makes each heartbeat's changes durable
        before it is answered (:meth:`persist`); ``topics`` gives the topic ids records are
        written with and the partition counts subscriptions resolve against when a group is
        loaded or expires. Without them groups live in memory only."""
        config = config if config is not None else ConsumerGroupConfig()
        self.config = config
        self.session_timeout = config.session_timeout_ms / 1000
        self.heartbeat_interval_ms = config.heartbeat_interval_ms
        self.assignors = [a for a in config.assignors if a in ASSIGNORS] or [DEFAULT_ASSIGNOR]
        self.max_size = config.max_size
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}
        self._store = store
        self._topics = topics
        # group → the records last written for it (what the next write is a difference from)
        self._written: dict[str, dict[bytes, bytes]] = {}
        self._store_tasks: set[asyncio.Task[None]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    def _ensure_expiry_task(self) -> None:
        if self._expiry_task is None or self._expiry_task.done():
            with contextlib.suppress(RuntimeError):  # off the loop: the caller expires
                loop = asyncio.get_running_loop()
                self._expiry_task = loop.create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            for group_id in sorted({g for g, _m in self.expire_sessions()}):
                task = asyncio.get_running_loop().create_task(self._persist_quietly(group_id))
                self._store_tasks.add(task)
                task.add_done_callback(self._store_tasks.discard)

    async def _persist_quietly(self, group_id: str) -> None:
        try:
            await self.persist(group_id)
        except Exception:  # the next heartbeat's write carries the difference again
            log.warning("storing consumer group %s failed", group_id, exc_info=True)

    async def persist(self, group_id: str) -> None:
        """Write what changed in ``group_id`` since the last write (Kafka's coordinator
        writes a heartbeat's records before answering it). Raises what the store raises
        (``OffsetCommitFailedError``); the difference is then written by the next call."""
        if self._store is None or self._topics is None:
            return
        group = self.groups.get(group_id)
        ids = {name: topic_id for name, (_n, topic_id) in self._topics().items()}
        now = {} if group is None else group_records(group, ids)
        before = self._written.get(group_id, {})
        changes: list[tuple[bytes, bytes | None]] = [
            (k, v) for k, v in now.items() if before.get(k) != v
        ]
        changes += [(k, None) for k in before if k not in now]
        if not changes:
            return
        self._written[group_id] = now  # before the await: a concurrent call writes only its own
        try:
            await self._store(group_id, changes)
        except BaseException:
            if self._written.get(group_id) is now:
                self._written[group_id] = before
            raise

    def load_groups(self, stored: Mapping[str, Mapping[bytes, bytes]]) -> list[str]:
        """Rebuild the consumer groups of a ``__consumer_offsets`` partition this broker
        now leads from their records (``OffsetStore.consumer_records_in``); their ids."""
        topics = self._topics() if self._topics is not None else {}
        names = {topic_id: name for name, (_n, topic_id) in topics.items()}
        counts = {name: n for name, (n, _id) in topics.items()}
        deadline = self._now() + self.session_timeout
        for group_id, records in stored.items():
            group = load_group(group_id, records, names, deadline)
            # The members' regexes were resolved by the coordinator that wrote the records.
            group.regexes = {m.subscribed_regex for m in group.members.values()
                             if m.subscribed_regex}  # fmt: skip
            subscribed: set[str] = set()
            for m in group.members.values():
                subscribed |= self.subscription(m, counts, group.regexes)
            group.subscribed_metadata = {t: counts[t] for t in sorted(subscribed)}
            self.groups[group_id] = group
            self._written[group_id] = dict(records)
        return sorted(stored)

    def unload_groups(self, belongs: Callable[[str], bool]) -> list[str]:
        """Forget the groups of a partition this broker no longer leads."""
        gone = [g for g in self.groups if belongs(g)]
        for group_id in gone:
            del self.groups[group_id]
            self._written.pop(group_id, None)
        return gone

    def close(self) -> None:
        for task in self._store_tasks:
            task.cancel()
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            self._expiry_task = None

    @staticmethod
    def _now() -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def claim_for_classic(self, group_id: str) -> bool:
        """Whether a classic JoinGroup may have ``group_id``: not while a consumer group with
        members holds it (INCONSISTENT_GROUP_PROTOCOL); an empty one is dropped (converted)."""
        group = self.groups.get(group_id)
        if group is None:
            return True
        if group.members:
            return False
        del self.groups[group_id]
        return True

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every consumer group."""
        return [(g, "consumer", group.state()) for g, group in sorted(self.groups.items())]

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        topics: Mapping[str, int],
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_names: Sequence[str] | None = None,
        subscribed_regex: str | None = None,
        server_assignor: str | None = None,
        owned: Mapping[str, frozenset[int]] | None = None,
        client_id: str = "",
        client_host: str = "",
        client_member_id: bool = False,
    ) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat (see the module docstring); ``topics``: every
        non-internal topic's partition count, to resolve subscriptions against.
        ``client_member_id``: the member names itself (v1+, KIP-1082), so it may not be
        empty; v0 members joining without one are given one."""
        if client_member_id and not member_id:
            return _fail(Errors.INVALID_REQUEST, member_id, member_epoch)
        bad = self._check(group_id, member_id, member_epoch, rebalance_timeout_ms,
                          subscribed_names, subscribed_regex, server_assignor)  # fmt: skip
        if bad is not None:
            return _fail(bad, member_id, member_epoch)
        classic = self.classic.describe(group_id) if self.classic is not None else None
        if classic is not None and group_id not in self.groups:
            if classic.members:
                return _fail(Errors.GROUP_ID_NOT_FOUND, member_id, member_epoch)
            self.classic.delete_group(group_id)  # type: ignore[union-attr]
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return _fail(Errors.UNKNOWN_MEMBER_ID, member_id, member_epoch)
            group = self.groups[group_id] = ConsumerGroup(group_id)
        self._ensure_expiry_task()
        self._resolve_regexes(group)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, member_id, instance_id, member_epoch)
        found = self._member(group, member_id, member_epoch, instance_id, owned)
        if isinstance(found, Errors):
            return _fail(found, member_id, member_epoch)
        member, joined = found
        if joined and member.member_id not in group.members and len(group.members) >= self.max_size:
            return _fail(Errors.GROUP_MAX_SIZE_REACHED, member_id, member_epoch)
        changed = joined and member.member_id not in group.members
        changed |= self._subscribe(member, subscribed_names, subscribed_regex, server_assignor)
        if member.subscribed_regex and member.subscribed_regex not in group.regexes:
            group.pending_regexes.add(member.subscribed_regex)
        member.client_id, member.client_host = client_id or member.client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        now = self._now()
        member.session_deadline = now + self.session_timeout
        group.update_member(member)
        # One bump per heartbeat, whatever moved (Kafka's bumpGroupEpoch).
        if self._refresh_metadata(group, topics) or changed:
            group.group_epoch += 1
        if group.group_epoch > group.target_epoch:
            self._compute_target(group, topics)
        before = dict(member.assigned)
        self._reconcile(group, member, owned, now)
        # Kafka answers the assignment to a full request — a join, or what a client sends after
        # an error: rebalance timeout, subscription and owned partitions all set — and when the
        # assignment changed; Sluice also when the member reports owning something else.
        full = member_epoch == 0 or (
            rebalance_timeout_ms != -1
            and (subscribed_names is not None or subscribed_regex is not None)
            and owned is not None
        )
        send = (
            full
            or member.assigned != before
            or (owned is not None and dict(owned) != member.assigned)
        )
        return HeartbeatResult(
            Errors.NONE, member.member_id, member.member_epoch,
            dict(member.assigned) if send else None,
        )  # fmt: skip

    def _check(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        rebalance_timeout_ms: int,
        names: Sequence[str] | None,
        regex: str | None,
        assignor: str | None,
    ) -> Errors | None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not group_id or (epoch != 0 and not member_id) or epoch < STATIC_LEAVE_EPOCH:
            return Errors.INVALID_REQUEST
        # Kafka 4 accepts a join with an empty list of names or an empty regex (a member
        # subscribed to nothing), and names and a regex together (librdkafka sends both: the
        # plain topics of its subscription and its regexes combined into one); only a join
        # with neither field is refused.
        if epoch == 0 and (rebalance_timeout_ms < 0 or (names is None and regex is None)):
            return Errors.INVALID_REQUEST
        if assignor is not None and assignor not in self.assignors:
            return Errors.UNSUPPORTED_ASSIGNOR
        if regex:
            try:
                re.compile(regex)
            except re.error:
                return Errors.INVALID_REGULAR_EXPRESSION
        return None

    def _member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str | None,
        owned: Mapping[str, frozenset[int]] | None,
    ) -> tuple[ConsumerMember, bool] | Errors:
        """The member the heartbeat is from (a copy to update), and whether it joined."""
        if epoch == 0:
            member_id = member_id or str(uuid.uuid4())
            if instance_id is not None:
                holder = group.static_members.get(instance_id)
                if holder is not None and holder != member_id:
                    old = group.members[holder]
                    if old.member_epoch != STATIC_LEAVE_EPOCH:
                        return Errors.UNRELEASED_INSTANCE_ID
                    # The restarted static member takes its place: no rebalance.
                    group.remove_member(holder)
                    taken = replace(old, member_id=member_id,
                                    member_epoch=old.previous_member_epoch)  # fmt: skip
                    group.target[member_id] = group.target.get(holder, {})
                    group.update_member(taken)
                    return replace(taken), False
            existing = group.members.get(member_id)
            if existing is not None:
                return replace(existing), False
            return ConsumerMember(member_id, instance_id=instance_id), True
        member = group.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if epoch > member.member_epoch:
            return Errors.FENCED_MEMBER_EPOCH
        if epoch < member.member_epoch:
            # Kafka accepts the previous epoch from a member whose response was lost, if it
            # owns nothing it was not given.
            assigned = member.assigned
            subset = owned is not None and all(
                ps <= assigned.get(t, frozenset()) for t, ps in owned.items()
            )
            if epoch != member.previous_member_epoch or not subset:
                return Errors.FENCED_MEMBER_EPOCH
        return replace(member), False

    @staticmethod
    def _subscribe(
        member: ConsumerMember,
        names: Sequence[str] | None,
        regex: str | None,
        assignor: str | None,
    ) -> bool:
        """Apply a (changed) subscription; whether it changed. The names and the regex are
        two fields, each replaced when the request carries it (null: unchanged), as Kafka's
        ``maybeUpdateSubscribedTopicNames`` / ``maybeUpdateSubscribedTopicRegex``; an empty
        regex is none."""
        before = (member.subscribed_names, member.subscribed_regex, member.server_assignor)
        if names is not None:
            member.subscribed_names = tuple(sorted(set(names)))
        if regex is not None:
            member.subscribed_regex = regex or None
        if assignor is not None:
            member.server_assignor = assignor
        return before != (member.subscribed_names, member.subscribed_regex, member.server_assignor)

    @staticmethod
    def subscription(
        member: ConsumerMember, topics: Mapping[str, int], resolved: Collection[str] | None = None
    ) -> frozenset[str]:
        """The existing topics a member subscribes to: its names, and the topics its regex
        matches (full match) — if the regex is among ``resolved`` (None: any)."""
        named = frozenset(t for t in member.subscribed_names if t in topics)
        regex = member.subscribed_regex
        if regex and (resolved is None or regex in resolved):
            pattern = re.compile(regex)
            return named | frozenset(t for t in topics if pattern.fullmatch(t))
        return named

    @staticmethod
    def _resolve_regexes(group: ConsumerGroup) -> None:
        """The regexes earlier heartbeats brought are resolved now; those no member uses any
        more are forgotten (a member bringing one back waits for it again, as in Kafka)."""
        used = {m.subscribed_regex for m in group.members.values() if m.subscribed_regex}
        group.regexes = (group.regexes | group.pending_regexes) & used
        group.pending_regexes.clear()

    def _refresh_metadata(self, group: ConsumerGroup, topics: Mapping[str, int]) -> bool:
        """Note the partition counts of the subscribed topics; whether they changed."""
        subscribed: set[str] = set()
        for m in group.members.values():
            subscribed |= self.subscription(m, topics, group.regexes)
        metadata = {t: topics[t] for t in sorted(subscribed)}
        if metadata == group.subscribed_metadata:
            return False
        group.subscribed_metadata = metadata
        return True

    def _compute_target(self, group: ConsumerGroup, topics: Mapping[str, int]) -> None:
        preferred = sorted(m.server_assignor for m in group.members.values() if m.server_assignor)
        name = preferred[0] if preferred else self.assignors[0]
        assign = ASSIGNORS[name]
        subs = {
            m.member_id: self.subscription(m, topics, group.regexes) for m in group.members.values()
        }
        group.target = assign(subs, group.subscribed_metadata, group.target)
        group.assignor = name
        group.target_epoch = group.group_epoch

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        owned: Mapping[str, frozenset[int]] | None,
        now: float,
    ) -> None:
        """Kafka's ``CurrentAssignmentBuilder.build`` for one heartbeat."""
        target = group.target.get(member.member_id, {})
        state = member.state
        if state is MemberState.STABLE and member.member_epoch == group.target_epoch:
            return
        if state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or any(
                ps & owned.get(t, frozenset()) for t, ps in member.pending_revocation.items()
            ):
                return  # still owns some of what it must give up
            member.pending_revocation = {}
            group.update_member(member)
        state, epoch, assigned, pending = next_assignment(
            member, group.target_epoch, target, group.owners, owned
        )
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        member.state, member.member_epoch = state, epoch
        member.assigned, member.pending_revocation = assigned, pending
        member.revocation_deadline = (
            now + member.rebalance_timeout_ms / 1000
            if state is MemberState.UNREVOKED_PARTITIONS
            else None
        )
        group.update_member(member)

    def _leave(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, epoch: int
    ) -> HeartbeatResult:
        if instance_id is not None and member_id not in group.members:
            member_id = group.static_members.get(instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return _fail(Errors.UNKNOWN_MEMBER_ID, member_id, epoch)
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Kept, with its assignment, until it comes back or its session expires.
            member.previous_member_epoch, member.member_epoch = member.member_epoch, epoch
            return HeartbeatResult(Errors.NONE, member_id, epoch)
        self._remove(group, member_id)
        return HeartbeatResult(Errors.NONE, member_id, LEAVE_EPOCH)

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        group.remove_member(member_id)
        group.group_epoch += 1

    def expire_sessions(self) -> list[tuple[str, str]]:
        """Remove the members whose session or revocation timed out: (group, member) ids."""
        now, gone = self._now(), []
        for group in self.groups.values():
            for member in list(group.members.values()):
                late = member.revocation_deadline is not None and member.revocation_deadline < now
                if member.session_deadline < now or late:
                    self._remove(group, member.member_id)
                    gone.append((group.group_id, member.member_id))
        return gone

    def validate_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> Errors | None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` (not transactional); None when
        ``group_id`` is no consumer group (the classic coordinator's then).

        A commit with a negative epoch (``assign()``, the admin client) is accepted while the
        group has no members; a member commits with its current epoch (else
        STALE_MEMBER_EPOCH) through OffsetCommit v9+ (else UNSUPPORTED_VERSION, as Kafka)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return Errors.NONE
        member = group.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return Errors.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return Errors.NONE

    def delete_group(self, group_id: str) -> Errors:
        """DeleteGroups' check (Kafka's ``ConsumerGroup.validateDeleteGroup``): a group with
        members is NON_EMPTY_GROUP; an empty one is forgotten — :meth:`persist` then writes
        its tombstones. NONE for an id that is no consumer group (classic, or offsets only)."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE
        if group.members:
            return Errors.NON_EMPTY_GROUP
        del self.groups[group_id]
        return Errors.NONE

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The existing topics a consumer group's members subscribe to (OffsetDelete's
        GROUP_SUBSCRIBED_TO_TOPIC), regexes resolved."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        counts = {n: c for n, (c, _id) in (self._topics() if self._topics else {}).items()}
        out: set[str] = set()
        for m in group.members.values():
            out |= self.subscription(m, counts) if counts else set(m.subscribed_names)
        return out

    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)
