"""``GroupCoordinator``: Kafka's classic consumer-group protocol on the broker, on asyncio.

Kafka clients' ``subscribe()`` joins a group through the broker that coordinates it:
JoinGroup → (the leader computes the assignment) → SyncGroup → Heartbeat …, LeaveGroup.
The coordinator holds no assignment logic of its own: the group leader (a client) runs the
assignor; the coordinator collects members, picks a protocol every member supports, elects
the leader, and hands each member what the leader decided.

States (Kafka's ``GroupState``)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲      ▲                                     │ leader's SyncGroup
      └── last member ───┘      └──── join, leave, expiry ◀── Stable ◀┘

* **PreparingRebalance** waits for every known member to (re)join, at most the largest
  rebalance timeout; members that do not rejoin are removed. A new (Empty) group waits only
  ``group.initial.rebalance.delay.ms`` (3 s), extended by the same again while new members
  keep arriving, up to the rebalance timeout (Kafka's InitialDelayedJoin). A Kafka-compatible
  broker measured here held the first join for half the session timeout; this one does not.
* **MEMBER_ID_REQUIRED** (JoinGroup v4+, KIP-394): a member joining without an id is given one
  and asked to join again with it, so a client that retries never leaves ghost members.
* Sessions expire when no heartbeat (or join/sync) arrives within ``session.timeout.ms``; the
  member is removed and the group rebalances.
* **Static members** (KIP-345, ``group.instance.id``; Kafka's ``GroupCoordinator``
  ``doStaticNewMemberJoinGroup``/``updateStaticMemberAndRebalance``): a member joining with an
  instance id the group knows, without a member id (a restarted consumer), gets a new member id
  that *replaces* the old one — the old id's assignment, leadership and place — and, in a
  Stable group whose selected protocol stays the same, no rebalance: it is answered with the
  current generation (and the old leader id, so it never runs the assignor) and syncs its old
  assignment. Static members skip MEMBER_ID_REQUIRED. The replaced id is *fenced*: a request
  from it (a duplicate process with the same instance id) gets FENCED_INSTANCE_ID on JoinGroup,
  SyncGroup, Heartbeat and OffsetCommit — whether or not the request carries the instance id,
  since the coordinator remembers which ids it replaced. A static member that does not rejoin
  during a rebalance stays in the group (only its session timeout removes it, then the group
  rebalances); LeaveGroup v3+ may name it by instance id alone.
* Members learn that a rebalance started only from a Heartbeat (or SyncGroup) answered
  REBALANCE_IN_PROGRESS: the classic protocol has no push. So the cooperative protocol's
  follow-up rebalance (started by the members that revoked partitions, which rejoin at once)
  waits up to ``heartbeat.interval.ms`` for the others, as on Kafka; the join completes the
  moment the last known member rejoins.
* **Durable groups** (Kafka's ``storeGroup`` and group loading): with ``store_group`` the
  group's metadata (``GroupMetadataValue``: generation, protocol, leader, members with their
  subscriptions and assignments) is written to ``__consumer_offsets`` when a generation's
  assignment is handed out (the leader's SyncGroup is answered only once it is durable), a
  static member is replaced, and the group becomes empty; a tombstone when it is deleted or
  removed empty. A broker that takes over the partition rebuilds the groups from it
  (:meth:`GroupCoordinator.load_groups`), so a stable group goes on with the same generation
  and assignments at its new coordinator; the one that gives it up drops them
  (:meth:`GroupCoordinator.unload_groups`).
* **Offset commits** are checked in Kafka's order (:meth:`GroupCoordinator.validate_commit`):
  the member and its generation first, the group's state last.

Errors are Kafka's codes (members of ``sluice.broker.protocol.errors.Errors``); every method
returns them rather than raising, since each is an ordinary answer to a client. Not
thread-safe: it runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence

from sluice.broker.groups.commit_failure import commit_failure_code
from sluice.broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.groups.offsets_topic_records import GroupMetadataValue
from sluice.broker.protocol.errors import Errors

__all__ = ["GroupCoordinator", "GroupState", "JoinResult", "SyncResult", "StoreGroup"]

log = logging.getLogger(__name__)

#: How many replaced member ids a group remembers (to fence them) — per group, oldest first.
MAX_FENCED_MEMBER_IDS = 1000

StoreGroup = Callable[[str, GroupMetadataValue | None], Awaitable[None]]


class GroupCoordinator:
    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 3000,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
        has_offsets: Callable[[str], bool] = lambda _g: False,
        store_group: StoreGroup | None = None,
        empty_group_check_interval_ms: int = 600_000,
    ) -> None:
        """``store_group``: makes a group's metadata durable (``OffsetStore.store_group``),
        awaited when a generation's assignment is handed out, a static member is replaced and
        a group becomes empty, as Kafka's ``storeGroup``; None keeps groups in memory only.
        ``has_offsets``: whether a group has committed offsets; every
        ``empty_group_check_interval_ms`` (Kafka's ``offsets.retention.check.interval.ms``)
        an Empty group without offsets is removed and a tombstone written for it, as Kafka's
        ``cleanupGroupMetadata`` does."""
        self.initial_delay = initial_rebalance_delay_ms / 1000
        self.min_session_ms = min_session_timeout_ms
        self.max_session_ms = max_session_timeout_ms
        self._has_offsets = has_offsets
        self.empty_group_check_interval = empty_group_check_interval_ms / 1000
        self._store_group = store_group
        self._store_tasks: set[asyncio.Task[Errors]] = set()
        self.groups: dict[str, Group] = {}
        self._expiry_task: asyncio.Task[None] | None = None

    @staticmethod
    def _now() -> float:
        """The event loop's clock (``time.monotonic``, the loop's default), also off it (a
        partition loaded as the broker starts)."""
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    # -- JoinGroup -------------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        *,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        self._ensure_expiry_task()
        if not group_id:
            return JoinResult(Errors.INVALID_GROUP_ID, member_id=member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(Errors.INVALID_SESSION_TIMEOUT, member_id=member_id)
        group = self.groups.setdefault(group_id, Group(group_id))
        if not protocols or not group.supports(protocol_type, protocols):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id and group_instance_id is not None:
            # A static member needs no MEMBER_ID_REQUIRED round trip: its instance id names it.
            member_id = f"{group_instance_id}-{uuid.uuid4()}"
            old_id = group.static_members.get(group_instance_id)
            if old_id is not None:
                return await self._replace_static_member(
                    group, old_id, member_id, group_instance_id, client_id, client_host,
                    session_timeout_ms, rebalance_timeout_ms, protocols,
                )  # fmt: skip
        elif not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id:
                group.pending_members.add(new_id)
                return JoinResult(Errors.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif self._fenced(group, member_id, group_instance_id):
            return JoinResult(Errors.FENCED_INSTANCE_ID, member_id=member_id)
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
        elif member_id not in group.members or (
            group_instance_id is not None and group_instance_id not in group.static_members
        ):
            return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member_id)

        member = group.members.get(member_id)
        now = self._now()
        if member is None:
            member = Member(
                member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, list(protocols), now,
            )  # fmt: skip
            if not group.members:
                group.protocol_type = protocol_type  # the first member sets the group's type
            group.members[member_id] = member
            if group_instance_id is not None:
                group.static_members[group_instance_id] = member_id
            changed = True
        else:
            changed = member.protocols != list(protocols)
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.last_heartbeat = now
            # Kafka's classicGroupJoinExistingMember: unchanged metadata while the assignment
            # is being handed out (the member missed its JoinGroup response) gets the current
            # generation, leader included. Once Stable the leader's join always rebalances: it
            # may have seen a topic change its metadata does not show.
            completing = group.state is GroupState.COMPLETING_REBALANCE
            stable_follower = group.state is GroupState.STABLE and member_id != group.leader
            if not changed and (completing or stable_follower):
                log.debug("group %s: join from %s (%s, unchanged): current generation %d",
                          group_id, member_id, group.state.value, group.generation)  # fmt: skip
                return self._join_result(group, member)

        log.debug("group %s: join from %s (%s, %s): rebalancing", group_id, member_id,
                  group.state.value, "changed" if changed else "same")  # fmt: skip
        return await self._await_join(group, member, f"member {member_id} joined")

    async def _await_join(self, group: Group, member: Member, reason: str) -> JoinResult:
        """Put ``member`` in the (started or starting) rebalance; its JoinGroup answer."""
        loop = asyncio.get_running_loop()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(
                JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member.member_id)
            )
        member.join_future = loop.create_future()
        future = member.join_future
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group)
        return await future

    @staticmethod
    def _fenced(group: Group, member_id: str, group_instance_id: str | None) -> bool:
        """Kafka's ``isStaticMemberFenced``: the instance id belongs to another member id —
        or, with no instance id in the request, ``member_id`` is one a static member's rejoin
        replaced (a duplicate still running with the old id)."""
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is not None and current != member_id:
                return True
        return member_id in group.fenced

    async def _replace_static_member(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        instance_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: Sequence[tuple[str, bytes]],
    ) -> JoinResult:
        """A known static member rejoined without its member id (it restarted): ``new_id``
        takes the old id's place (Kafka's ``updateStaticMemberAndRebalance``)."""
        member = group.members.pop(old_id)
        # Whoever still waits under the old id is a duplicate: fence it now.
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(Errors.FENCED_INSTANCE_ID, member_id=old_id))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(Errors.FENCED_INSTANCE_ID))
        member.join_future = member.sync_future = None
        old_protocols = member.protocols
        member.member_id, member.client_id, member.client_host = new_id, client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = (
            session_timeout_ms, rebalance_timeout_ms,
        )  # fmt: skip
        member.protocols = list(protocols)
        member.last_heartbeat = self._now()
        group.members[new_id] = member
        current_leader = group.leader
        if group.leader == old_id:
            group.leader = new_id
        group.static_members[instance_id] = new_id
        group.fenced[old_id] = instance_id
        while len(group.fenced) > MAX_FENCED_MEMBER_IDS:
            group.fenced.popitem(last=False)
        log.info("group %s: static member %s rejoined as %s (was %s, %s)", group.group_id,
                 instance_id, new_id, old_id, group.state.value)  # fmt: skip
        if group.state is GroupState.STABLE:
            if group.select_protocol() != group.protocol_name:
                return await self._await_join(
                    group, member, f"static member {instance_id} changed the group's protocol"
                )
            error = await self._store(group)
            if error != Errors.NONE:
                # Not durable: undo, as Kafka does; the member retries its join.
                if group.members.get(new_id) is member:
                    del group.members[new_id]
                    member.member_id, member.protocols = old_id, old_protocols
                    group.members[old_id] = member
                    group.static_members[instance_id] = old_id
                    group.fenced.pop(old_id, None)
                    if group.leader == new_id:
                        group.leader = old_id
                return JoinResult(error, member_id=new_id)
            # No rebalance: the current generation, with the old leader id so that the member
            # never runs the assignor (a Stable group would not hand out its result).
            return JoinResult(Errors.NONE, group.generation, group.protocol_name, current_leader,
                              new_id)  # fmt: skip
        # PreparingRebalance: it joins the rebalance under way. CompletingRebalance: the old
        # id may have led it, so a new one starts (Kafka does the same).
        return await self._await_join(group, member, f"static member {instance_id} rejoined")

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            Errors.NONE,
            group.generation,
            group.protocol_name,
            group.leader,
            member.member_id,
            members,
        )

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        initial = group.state is GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        group.all_joined = asyncio.Event()
        if group.rebalance_task is not None:
            group.rebalance_task.cancel()
        log.info("group %s: preparing rebalance (%s)", group.group_id, reason)
        group.rebalance_task = asyncio.get_running_loop().create_task(
            self._run_rebalance(group, initial)
        )

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and all(
            m.join_future is not None and not m.join_future.done() for m in group.members.values()
        ):
            group.all_joined.set()

    async def _run_rebalance(self, group: Group, initial: bool) -> None:
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
        try:
            if initial:
                # InitialDelayedJoin: wait, and keep waiting while members keep arriving.
                remaining, delay = timeout, min(self.initial_delay, timeout)
                while True:
                    before = len(group.members)
                    await asyncio.sleep(delay)
                    remaining -= delay
                    if len(group.members) == before or remaining <= 0:
                        break
                    delay = min(self.initial_delay, remaining)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(group.all_joined.wait(), timeout)
        except asyncio.CancelledError:
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        group.rebalance_task = None
        joined = [m for m in group.members.values()
                  if m.join_future is not None and not m.join_future.done()]  # fmt: skip
        if not joined and group.members:
            # Only static members that have not rejoined: they stay until their sessions
            # expire, so wait again (Kafka's onCompleteJoin does the same).
            log.info("group %s: no member rejoined; waiting for the static members",
                     group.group_id)  # fmt: skip
            group.all_joined = asyncio.Event()
            group.rebalance_task = asyncio.get_running_loop().create_task(
                self._run_rebalance(group, False)
            )
            return
        for m in list(group.members.values()):
            if m not in joined and m.group_instance_id is None:
                log.info("group %s: removing %s (did not rejoin)", group.group_id, m.member_id)
                self._remove(group, m)
        group.generation += 1
        if not group.members:
            # The protocol type stays: an empty group with offsets is still a consumer group.
            group.state = GroupState.EMPTY
            group.protocol_name = group.leader = ""
            self._store_later(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader not in {m.member_id for m in joined}:
            group.leader = joined[0].member_id
        group.state = GroupState.COMPLETING_REBALANCE
        now = self._now()
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id, group.generation, len(group.members), group.protocol_name,
            group.leader,
        )  # fmt: skip
        for m in group.members.values():
            m.last_heartbeat = now
            m.assignment = b""
            future, m.join_future = m.join_future, None
            if future is not None and not future.done():
                future.set_result(self._join_result(group, m))

    # -- SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------

    def _check_member(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> Group | Errors:
        group = self.groups.get(group_id)
        if group is not None and self._fenced(group, member_id, group_instance_id):
            return Errors.FENCED_INSTANCE_ID
        if group is None or member_id not in group.members:
            return Errors.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return Errors.ILLEGAL_GENERATION
        return group

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes],
        group_instance_id: str | None = None,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        # v5+ (KIP-559): a given type / name must be the group's (Kafka's doSyncGroup order).
        checked = self._check_member(group_id, generation, member_id, group_instance_id)
        log.debug("group %s: sync from %s generation %d: %s", group_id, member_id, generation,
                  checked if isinstance(checked, Errors) else checked.state.value)  # fmt: skip
        if isinstance(checked, Errors):
            return SyncResult(checked)
        group = checked
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        member.last_heartbeat = self._now()
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            return SyncResult(Errors.NONE, member.assignment)
        member.sync_future = asyncio.get_running_loop().create_future()
        future = member.sync_future
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            error = await self._store(group)
            if group.state is not GroupState.COMPLETING_REBALANCE or (
                generation != group.generation
            ):
                return await future  # a rebalance began meanwhile and answered the syncs
            if error != Errors.NONE:
                # Not durable: nobody gets an assignment; the group rebalances (Kafka's
                # resetAndPropagateAssignmentError, then maybePrepareRebalance).
                for m in group.members.values():
                    m.assignment = b""
                    if m.sync_future is not None and not m.sync_future.done():
                        m.sync_future.set_result(SyncResult(error))
                    m.sync_future = None
                self._prepare_rebalance(group, "the group's metadata could not be stored")
                return await future
            group.state = GroupState.STABLE
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(Errors.NONE, m.assignment))
                m.sync_future = None
        return await future

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None = None
    ) -> Errors:
        self._ensure_expiry_task()  # a group loaded at startup: its sessions expire from now
        checked = self._check_member(group_id, generation, member_id, group_instance_id)
        state = checked if isinstance(checked, Errors) else checked.state.value
        log.debug("group %s: heartbeat from %s generation %d: %s",
                  group_id, member_id, generation, state)  # fmt: skip
        if isinstance(checked, Errors):
            return checked
        checked.members[member_id].last_heartbeat = self._now()
        if checked.state is GroupState.PREPARING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def leave(
        self,
        group_id: str,
        member_ids: Sequence[str],
        instance_ids: Sequence[str | None] | None = None,
    ) -> tuple[Errors, list[Errors]]:
        """LeaveGroup: one error per member. ``instance_ids`` (v3+, parallel to
        ``member_ids``): a static member may be named by instance id with an empty member id
        (Kafka's ``removeMembersFromConsumerGroup``); a member id that is not the instance's
        current one is FENCED_INSTANCE_ID."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID, [Errors.UNKNOWN_MEMBER_ID] * len(member_ids)
        errors: list[Errors] = []
        for member_id, instance_id in zip(
            member_ids, instance_ids or [None] * len(member_ids), strict=True
        ):
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    errors.append(Errors.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    errors.append(Errors.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            member = group.members.get(member_id)
            if member is None:
                errors.append(Errors.UNKNOWN_MEMBER_ID)
                continue
            errors.append(Errors.NONE)
            self._remove(group, member)
        if any(e == Errors.NONE for e in errors):
            self._member_gone(group, f"{len(member_ids)} member(s) left")
        return Errors.NONE, errors

    def _remove(self, group: Group, member: Member) -> None:
        """Take ``member`` out of ``group`` (with its static instance id) and answer whatever
        it was waiting for."""
        del group.members[member.member_id]
        instance = member.group_instance_id
        if instance is not None and group.static_members.get(instance) == member.member_id:
            del group.static_members[instance]
        self._drop(member)

    def _drop(self, member: Member) -> None:
        """Answer whatever the removed member was waiting for."""
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(Errors.UNKNOWN_MEMBER_ID))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(Errors.UNKNOWN_MEMBER_ID))

    def _member_gone(self, group: Group, reason: str) -> None:
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
            if not group.members:
                group.all_joined.set()
        elif group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, reason)
            else:
                group.state = GroupState.EMPTY
                group.generation += 1
                group.leader = group.protocol_name = ""
                self._store_later(group)

    # -- sessions --------------------------------------------------------------------------

    def _ensure_expiry_task(self) -> None:
        if self._expiry_task is None or self._expiry_task.done():
            self._expiry_task = asyncio.get_running_loop().create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        checked = self._now()
        while True:
            # Wake at the next session deadline (at most 0.25 s away: a heartbeat only moves
            # deadlines later, a join adds one no sooner than its session timeout): a session
            # ends when it is due, as Kafka's DelayedHeartbeat does, not up to a tick after.
            # librdkafka's test 0081 deletes a static member's group exactly one session
            # timeout after its last commit.
            await asyncio.sleep(min(0.25, max(0.001, self._next_deadline() - self._now())))
            self.expire_sessions()
            if self._now() - checked >= self.empty_group_check_interval:
                checked = self._now()
                self.remove_empty_groups()

    def remove_empty_groups(self) -> list[str]:
        """Remove every Empty group without committed offsets, writing its tombstone (Kafka's
        ``cleanupGroupMetadata``: such a group is Dead and its metadata record deleted, so
        compaction drops it); the removed group ids. A group with a join under way (a member
        asked to rejoin with its id, or a rebalance task) stays."""
        removed = []
        for group in list(self.groups.values()):
            idle = not group.pending_members and group.rebalance_task is None
            if group.state is GroupState.EMPTY and idle and not self._has_offsets(group.group_id):
                group.state = GroupState.DEAD
                del self.groups[group.group_id]
                self._store_later(group, deleted=True)
                removed.append(group.group_id)
        if removed:
            log.info("removed %d empty group(s) without offsets: %s", len(removed),
                     ", ".join(removed))  # fmt: skip
        return removed

    # -- coordination moving (Kafka's onElection / onResignation) ------------------------------

    def load_groups(self, stored: Mapping[str, GroupMetadataValue]) -> list[str]:
        """Take over the groups whose metadata a ``__consumer_offsets`` partition this broker
        now leads holds (Kafka's ``loadGroup`` / ``onGroupLoaded``): each is rebuilt with its
        generation, protocol, leader and members' assignments — Stable, or Empty without
        members — every member's session starting now, so that its heartbeats and commits
        with its generation succeed here and a stable group keeps its assignment. A group
        already held here is kept, as Kafka's loader keeps a cached group. The loaded ids."""
        now = self._now()
        loaded = []
        for group_id, value in stored.items():
            if group_id in self.groups:
                continue
            self.groups[group_id] = Group.from_metadata(group_id, value, now)
            loaded.append(group_id)
            log.info("group %s: loaded generation %d (%d members, protocol %s, leader %s)",
                     group_id, value.generation, len(value.members), value.protocol,
                     value.leader)  # fmt: skip
        with contextlib.suppress(RuntimeError):  # no loop yet: the first request starts it
            self._ensure_expiry_task()
        return loaded

    def unload_groups(self, belongs: Callable[[str], bool]) -> list[str]:
        """Give up every group for which ``belongs(group_id)`` (its partition's leadership
        moved away: Kafka's ``onGroupUnloaded``): it becomes Dead and is forgotten; a member
        waiting for its JoinGroup or SyncGroup answer gets NOT_COORDINATOR and looks the
        coordinator up again. The unloaded ids."""
        gone = [g for g in self.groups.values() if belongs(g.group_id)]
        for group in gone:
            group.state = GroupState.DEAD
            if group.rebalance_task is not None:
                group.rebalance_task.cancel()
            for m in group.members.values():
                if m.join_future is not None and not m.join_future.done():
                    m.join_future.set_result(
                        JoinResult(Errors.NOT_COORDINATOR, member_id=m.member_id)
                    )
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(Errors.NOT_COORDINATOR))
            del self.groups[group.group_id]
        if gone:
            log.info("unloaded %d group(s)", len(gone))
        return [g.group_id for g in gone]

    def _next_deadline(self) -> float:
        """The earliest moment a session of a member not waiting in a join may expire."""
        return min(
            (m.last_heartbeat + m.session_timeout_ms / 1000
             for group in self.groups.values() for m in group.members.values()
             if m.join_future is None or m.join_future.done()),
            default=self._now() + 0.25,
        )  # fmt: skip

    def expire_sessions(self) -> None:
        now = self._now()
        for group in list(self.groups.values()):
            expired = [
                m for m in group.members.values()
                # A member waiting in a join is bounded by the rebalance timeout instead.
                if (m.join_future is None or m.join_future.done())
                and now - m.last_heartbeat > m.session_timeout_ms / 1000
            ]  # fmt: skip
            for m in expired:
                log.info("group %s: session of %s expired", group.group_id, m.member_id)
                self._remove(group, m)
            if expired:
                self._member_gone(group, f"{len(expired)} session(s) expired")

    # -- durability (Kafka's storeGroup) ---------------------------------------------------

    async def _store(self, group: Group, *, deleted: bool = False) -> Errors:
        """Make the group's metadata durable; the code its members get if that failed (the
        rule of ``sluice.broker.groups.commit_failure``, as for an offset commit)."""
        if self._store_group is None:
            return Errors.NONE
        try:
            value = None if deleted else group.to_metadata(int(time.time() * 1000))
            await self._store_group(group.group_id, value)
        except OffsetCommitFailedError as exc:
            log.warning("group %s: metadata not stored: %s", group.group_id, exc)
            return commit_failure_code(exc)
        return Errors.NONE

    def _store_later(self, group: Group, *, deleted: bool = False) -> None:
        """Store the group's metadata without waiting (a group that became empty or was
        deleted: nobody awaits an answer)."""
        if self._store_group is None:
            return
        task = asyncio.get_running_loop().create_task(self._store(group, deleted=deleted))
        self._store_tasks.add(task)
        task.add_done_callback(self._store_tasks.discard)

    def close(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for task in list(self._store_tasks):
            task.cancel()
        for group in self.groups.values():
            if group.rebalance_task is not None:
                group.rebalance_task.cancel()
            for m in group.members.values():
                self._drop(m)

    # -- offsets and introspection ---------------------------------------------------------

    def validate_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None = None,
        *,
        transactional: bool = False,
    ) -> Errors:
        """Kafka's checks before an OffsetCommit (any version) or a TxnOffsetCommit is stored
        (``GroupCoordinator.handleCommitOffsets`` / ``validateOffsetCommit`` /
        ``doCommitOffsets``; ``ClassicGroup.validateOffsetCommit`` in Kafka 4), in Kafka's
        order — the member and its generation first, the group's state last:

        1. a group this coordinator does not know: a commit with generation < 0 (a consumer
           that does not use group management, ``assign()``) or a transactional one is
           accepted (Kafka creates an empty "simple" group); any other is
           ILLEGAL_GENERATION (an older generation's);
        2. a Dead group: COORDINATOR_NOT_AVAILABLE;
        3. generation < 0 while the group is Empty: accepted;
        4. a request naming a member (generation >= 0, a member id or an instance id):
           FENCED_INSTANCE_ID for a replaced static member, UNKNOWN_MEMBER_ID for a member
           the group does not hold, ILLEGAL_GENERATION for another generation than the
           group's; a request naming none (OffsetCommit v0/v1 without a generation) in a
           group with members: UNKNOWN_MEMBER_ID, unless it is transactional
           (TxnOffsetCommit v0–v2 carry neither);
        5. only then, for a plain commit, CompletingRebalance: REBALANCE_IN_PROGRESS (the
           member has the new generation from its JoinGroup answer but not its assignment).

        So a member committing for its old generation during a rebalance is told
        ILLEGAL_GENERATION, which librdkafka and the Java client treat as "rejoin"
        (librdkafka's test 0113, commit during a rebalance). Members may commit for their
        generation while a rebalance is being prepared (their revoke callbacks do); such a
        commit counts as a heartbeat, as in Kafka. Runs on the event loop."""
        group = self.groups.get(group_id)
        if group is None:
            accepted = generation < 0 or transactional
            return Errors.NONE if accepted else Errors.ILLEGAL_GENERATION
        if group.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is GroupState.EMPTY:
            return Errors.NONE
        if generation >= 0 or member_id or group_instance_id is not None:
            if self._fenced(group, member_id, group_instance_id):
                return Errors.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return Errors.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return Errors.ILLEGAL_GENERATION
        elif not transactional and group.state is not GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            member.last_heartbeat = self._now()
        return Errors.NONE

    def list_groups(self, with_offsets: Sequence[str] = ()) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group, including offset-only groups."""
        out = {g.group_id: (g.group_id, g.protocol_type, g.state.value)
               for g in self.groups.values()}  # fmt: skip
        for group_id in with_offsets:
            out.setdefault(group_id, (group_id, "consumer", GroupState.EMPTY.value))
        return sorted(out.values())

    def describe(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def delete_group(self, group_id: str) -> Errors:
        """DeleteGroups' check and removal (Kafka's ``GroupCoordinator.handleDeleteGroups``): a
        group with members is NON_EMPTY_GROUP; an empty one is forgotten (the caller deletes
        its offsets). A group unknown here answers NONE: it may be offsets alone. Sessions
        already due end first, so the answer does not hang on when the expiry task runs."""
        self.expire_sessions()
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE
        if group.members or group.state not in (GroupState.EMPTY, GroupState.DEAD):
            return Errors.NON_EMPTY_GROUP
        if group.rebalance_task is not None:
            group.rebalance_task.cancel()
        group.state = GroupState.DEAD
        del self.groups[group_id]
        self._store_later(group, deleted=True)
        log.info("group %s: deleted", group_id)
        return Errors.NONE

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the members of a consumer group subscribe to, read from their
        subscriptions (``ConsumerProtocolSubscription``: version INT16, topics [STRING], …);
        empty for an empty group or another protocol type."""
        group = self.groups.get(group_id)
        if group is None or group.protocol_type != "consumer" or not group.members:
            return set()
        topics: set[str] = set()
        for member in group.members.values():
            for _name, metadata in member.protocols:
                topics |= _subscription_topics(metadata)
        return topics


def _subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: they come first);
    empty if the bytes are not one."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            (size,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
