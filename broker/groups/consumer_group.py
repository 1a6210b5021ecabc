"""A consumer group of the KIP-848 protocol: members, epochs, and incremental reconciliation.

Epochs (Kafka's ``ConsumerGroup``/``ConsumerGroupMember``):

* the **group epoch** moves when membership, a subscription, or the partition count of a
  subscribed topic changes;
* the **target assignment epoch** is the group epoch the target assignment (the assignor's
  output) was computed for;
* a member's **member epoch** reaches the target epoch once it owns exactly its target —
  until then it reconciles, one heartbeat at a time.

Reconciliation (Kafka's ``CurrentAssignmentBuilder``): from its assigned partitions and its
target a member is given

* *kept* = assigned ∩ target, *revoked* = assigned − target, *new* = target − assigned;
* if it still owns revoked partitions: state ``UNREVOKED_PARTITIONS``, its epoch unchanged,
  assigned = kept and the revoked ones *pending revocation* — until a heartbeat reports it no
  longer owns them;
* else the *new* partitions no other member holds are added; if some are still held by
  another member (assigned to it or pending its revocation): ``UNRELEASED_PARTITIONS`` at the
  target epoch, picking them up on a later heartbeat; else ``STABLE`` at the target epoch.

**Invariant** (checked by :meth:`ConsumerGroup.update_member`): a partition is held — in the
assigned or pending-revocation set — by at most one member. Since a member owns (on the
client) only what it was given and gives up a revoked partition before the coordinator
gives it to anybody else, no partition is ever consumed by two members at once.

Not thread-safe: the coordinator runs on the broker's event loop.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from sluice.broker.groups.consumer_assignors import Assignment

__all__ = ["ConsumerGroup", "ConsumerMember", "MemberState", "next_assignment"]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class ConsumerMember:
    """One member. ``member_epoch`` -2 marks a static member that left to come back."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: The loop time after which the session (or a revocation) has timed out.
    session_deadline: float = 0.0
    revocation_deadline: float | None = None

    def held(self) -> set[tuple[str, int]]:
        """Every partition this member holds: assigned or pending its revocation."""
        return {(t, p) for a in (self.assigned, self.pending_revocation) for t, ps in a.items()
                for p in ps}  # fmt: skip


def _minus(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _and(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _owns_any(owned: Mapping[str, frozenset[int]] | None, revoked: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: an unreported ownership (None) counts as owning."""
    if owned is None:
        return True
    return any(ps & owned.get(t, frozenset()) for t, ps in revoked.items())


def next_assignment(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owner_of: Mapping[tuple[str, int], str],
    owned: Mapping[str, frozenset[int]] | None,
) -> tuple[MemberState, int, Assignment, Assignment]:
    """Kafka's ``computeNextAssignment``: (state, epoch, assigned, pending revocation)."""
    kept = _and(member.assigned, target)
    revoked = _minus(member.assigned, target)
    if revoked and _owns_any(owned, revoked):
        return MemberState.UNREVOKED_PARTITIONS, member.member_epoch, kept, revoked
    new = _minus(target, member.assigned)
    assigned = {t: set(ps) for t, ps in kept.items()}
    unreleased = False
    for topic, parts in new.items():
        for p in parts:
            if owner_of.get((topic, p), member.member_id) == member.member_id:
                assigned.setdefault(topic, set()).add(p)
            else:
                unreleased = True
    frozen = {t: frozenset(ps) for t, ps in sorted(assigned.items()) if ps}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return state, target_epoch, frozen, {}


@dataclass
class ConsumerGroup:
    """One group's members, epochs and target assignment; ``owners`` indexes who holds what."""

    group_id: str
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)
    #: The partition counts of the subscribed topics the target was computed from.
    subscribed_metadata: dict[str, int] = field(default_factory=dict)
    #: The assignor that computed the target.
    assignor: str = "uniform"
    #: instance id → member id, for static members.
    static_members: dict[str, str] = field(default_factory=dict)
    #: The members' regexes the group has resolved — re-resolved against the topics at every
    #: heartbeat — and those a heartbeat brought that are resolved from the next one on (Kafka
    #: resolves a new regex in the background; until then it matches nothing).
    regexes: set[str] = field(default_factory=set)
    pending_regexes: set[str] = field(default_factory=set)

    def state(self) -> str:
        """Kafka's ``ConsumerGroup.ConsumerGroupState`` names, as DescribeGroups shows them."""
        if not self.members:
            return "Empty"
        if self.target_epoch != self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.target_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):  # fmt: skip
            return "Reconciling"
        return "Stable"

    def update_member(self, member: ConsumerMember) -> None:
        """Put ``member`` in (or replace it), keeping ``owners``; refuses a double owner."""
        # From the index, not the stored member: that may be ``member`` itself, changed.
        for tp in [tp for tp, holder in self.owners.items() if holder == member.member_id]:
            del self.owners[tp]
        for tp in member.held():
            holder = self.owners.get(tp)
            if holder is not None and holder != member.member_id:
                raise AssertionError(f"{tp} held by {holder} and {member.member_id}")
        for tp in member.held():
            self.owners[tp] = member.member_id
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        for tp in [tp for tp, holder in self.owners.items() if holder == member_id]:
            del self.owners[tp]
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        return member
