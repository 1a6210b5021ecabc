"""``ShareGroup``: the membership and assignment of one share group (KIP-932).

A member joins with ShareGroupHeartbeat at epoch 0 (its member id is the client's own, KIP-1082)
and keeps heartbeating within the session timeout; epoch -1 leaves. The group epoch rises on
every change of membership or of the partitions to assign; a member's epoch is the group epoch
at which it last received its assignment.

Assignment (Kafka's ``SimpleAssignor`` in its one-or-more-members-per-partition spirit): every
member is assigned every partition of every topic it subscribes to. In a share group a
partition's records are handed out record by record (``SharePartition``), so two members on one
partition never receive the same record; assigning all to all keeps every member busy and
needs no reconciliation (a share group has no revocation step: KIP-932).

Time is passed in (``now_ms``). Not thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int
    subscribed: tuple[str, ...]
    client_id: str = ""
    client_host: str = ""
    rack: str | None = None
    last_seen_ms: float = 0.0
    #: topic -> partitions
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)


class UnknownShareMemberError(Exception):
    """A heartbeat names a member the group does not have (it left or expired)."""


class FencedShareMemberError(Exception):
    """A heartbeat's member epoch is newer than the member's (Kafka's FENCED_MEMBER_EPOCH)."""


class ShareGroup:
    """See the module docstring."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.members: dict[str, ShareMember] = {}

    @property
    def state(self) -> str:
        """ShareGroupDescribe's group state: Empty or Stable (there is no rebalance)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        subscribed: Sequence[str] | None,
        partitions: Mapping[str, int],
        now_ms: float,
        *,
        client_id: str = "",
        client_host: str = "",
        rack: str | None = None,
    ) -> ShareMember:
        """Join (epoch 0), or renew a member; ``subscribed`` None keeps its subscription.
        ``partitions``: topic -> partition count of the topics that exist. Returns the member
        with its current assignment and epoch."""
        member = self.members.get(member_id)
        if member_epoch == 0:
            if member is None:
                member = ShareMember(member_id, 0, tuple(subscribed or ()))
                self.members[member_id] = member
                self.epoch += 1
        elif member is None:
            raise UnknownShareMemberError(f"member {member_id} is not in group {self.group_id}")
        elif member_epoch > member.epoch:
            raise FencedShareMemberError(
                f"member {member_id} sent epoch {member_epoch}, its epoch is {member.epoch}"
            )
        if subscribed is not None and tuple(subscribed) != member.subscribed:
            member.subscribed = tuple(subscribed)
            self.epoch += 1
        member.last_seen_ms = now_ms
        member.client_id, member.client_host, member.rack = client_id, client_host, rack
        assignment = {
            t: tuple(range(partitions[t])) for t in sorted(member.subscribed) if t in partitions
        }
        if assignment != member.assignment:
            if member.assignment:
                self.epoch += 1
            member.assignment = assignment
        if member.epoch != self.epoch:
            member.epoch = self.epoch
        return member

    def leave(self, member_id: str) -> ShareMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.epoch += 1
        return member

    def expire(self, now_ms: float, session_timeout_ms: int) -> list[ShareMember]:
        """Remove the members not heard from within the session timeout; those removed."""
        gone = [m for m in self.members.values() if now_ms - m.last_seen_ms > session_timeout_ms]
        for member in gone:
            self.leave(member.member_id)
        return gone
