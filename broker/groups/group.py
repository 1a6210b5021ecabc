"""A consumer group's state at its coordinator (``Group``, its ``Member``s, ``GroupState``) and
the answers a member waits for (``JoinResult``, ``SyncResult``), with the group's record form
in ``__consumer_offsets``.

The record form is Kafka's ``GroupMetadataValue`` (``sluice.broker.groups.offsets_topic_records``;
``GroupMetadataManager.groupMetadataValue`` / ``readGroupMessageValue``):
:meth:`Group.to_metadata` writes the generation, protocol type, selected protocol, leader and
every member with its ids, client id and host, timeouts, its subscription *for the selected
protocol* and its assignment; :meth:`Group.from_metadata` rebuilds a group from it as Kafka's
``GroupMetadata.loadGroup`` does — Stable if it has members, else Empty; each member knows only
the selected protocol (its other protocols were never stored), so a member that rejoins with
more protocols counts as changed and its join rebalances, as in Kafka. Waiting futures, the
rebalance task and the fenced ids are not part of the record: a loaded group starts with none.

Invariant: ``static_members`` maps each static member's instance id to its member id in
``members`` (and to nothing else). Not thread-safe: the coordinator uses these on the event
loop.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from sluice.broker.groups.offsets_topic_records import GroupMetadataValue, MemberMetadata
from sluice.broker.protocol.errors import Errors


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class JoinResult:
    error: Errors
    generation: int = -1
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # only the leader gets them


@dataclass(frozen=True)
class SyncResult:
    error: Errors
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_heartbeat: float
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None

    def metadata_for(self, protocol: str) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol_name: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id → member id
    # member ids replaced by a static member's rejoin → their instance id (fenced)
    fenced: OrderedDict[str, str] = field(default_factory=OrderedDict)
    rebalance_task: asyncio.Task[None] | None = None
    all_joined: asyncio.Event = field(default_factory=asyncio.Event)

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        if not self.members:
            return True  # an empty group takes whatever protocol its next member brings
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return any(
            all(name in {n for n, _ in m.protocols} for m in self.members.values())
            for name in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(n for n, _ in m.protocols if n in candidates)] += 1
        return max(sorted(candidates), key=lambda n: votes[n])

    def to_metadata(self, now_ms: int) -> GroupMetadataValue:
        """The group as its ``GroupMetadataValue`` (``current_state_timestamp``: ``now_ms``)."""
        return GroupMetadataValue(
            self.protocol_type,
            self.generation,
            self.protocol_name or None,
            self.leader or None,
            now_ms,
            tuple(
                MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(self.protocol_name),
                    m.assignment,
                )  # fmt: skip
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_metadata(cls, group_id: str, value: GroupMetadataValue, now: float) -> Group:
        """The group a stored ``value`` describes (see the module docstring); every member's
        session starts at ``now`` (event-loop time), as Kafka's ``onGroupLoaded`` schedules
        each member's heartbeat expiration afresh."""
        group = cls(
            group_id,
            GroupState.STABLE if value.members else GroupState.EMPTY,
            value.generation,
            value.protocol_type,
            value.protocol or "",
            value.leader or "",
        )
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol else []
            group.members[m.member_id] = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                m.rebalance_timeout, protocols, now, m.assignment,
            )  # fmt: skip
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group
