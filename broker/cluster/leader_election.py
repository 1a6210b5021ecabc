"""Leader election rules (Kafka's ``Election`` and ``PartitionLeaderElectionAlgorithms``).

Three callers, one set of pure functions over a :class:`~sluice.broker.cluster.zk_data.
PartitionState`, the partition's replicas (in preference order) and the live brokers:

* :func:`elect_leader` — the controller's reconciliation after brokers come and go or the
  replica set changes (``OfflinePartitionLeaderElectionStrategy``, plus "the ISR holds only
  assigned replicas").
* :func:`admin_election` — an ElectLeaders request (KIP-460):

  ======================  =========================================  ============================
  election                electable when                             new leader
  ======================  =========================================  ============================
  PREFERRED (0)           the leader is not the first replica        the first replica, if alive
                                                                     and in the ISR; else
                                                                     PREFERRED_LEADER_NOT_AVAILABLE
  UNCLEAN (1)             there is no live leader                    the first live ISR member in
                                                                     assignment order, else the
                                                                     first live replica (ISR = it);
                                                                     else ELIGIBLE_LEADERS_NOT_
                                                                     AVAILABLE
  ======================  =========================================  ============================

  A partition that is not electable answers ELECTION_NOT_NEEDED, as Kafka's
  ``processReplicaLeaderElection``.
* :func:`reassignment_leader` — the replica that takes over when a reassignment removes the
  leader (``ReassignPartitionLeaderElectionStrategy``).

The leader epoch goes up by one whenever the leader changes. Pure and thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sluice.broker.cluster.zk_data import NO_LEADER, PartitionState
from sluice.broker.protocol.errors import Errors

__all__ = [
    "ElectionType",
    "ElectionOutcome",
    "admin_election",
    "elect_leader",
    "reassignment_leader",
]

LeaderAndIsr = tuple[int, int, tuple[int, ...]]
"""``(leader, leader_epoch, isr)``."""


class ElectionType(enum.IntEnum):
    """ElectLeaders' ``election_type`` (Kafka's ``ElectionType``)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectionOutcome:
    """One partition's ElectLeaders answer: ``target`` to write, or an error (with a message
    for the ones Kafka explains)."""

    error: Errors
    message: str | None = None
    target: LeaderAndIsr | None = None


def elect_leader(
    state: PartitionState, replicas: Sequence[int], live: Iterable[int], *, unclean: bool
) -> LeaderAndIsr | None:
    """The ``(leader, leader_epoch, isr)`` a partition should have given the live brokers and
    its replicas, or ``None`` if ``state`` is already right.

    * Leader alive and a replica: drop dead brokers and non-replicas (a finished reassignment's
      removed replicas) from the ISR (the leader stays; epoch unchanged).
    * Leader dead, none, or no longer a replica: the first replica in assignment order that is
      alive and in the ISR; with ``unclean``, failing that, the first live replica (ISR = just
      it). The ISR loses its dead members and non-replicas.
    * Nobody eligible: leader -1; the ISR loses its dead members but never becomes empty — it
      keeps the last ISR, so one of those brokers can come back as leader without data loss.

    The leader epoch increases by one whenever the leader changes (to -1 included).
    """
    alive = set(live)
    isr_live = tuple(b for b in state.isr if b in alive and b in replicas)
    if state.leader != NO_LEADER and state.leader in alive and state.leader in replicas:
        if isr_live == state.isr:
            return None
        return state.leader, state.leader_epoch, isr_live
    leader = next((r for r in replicas if r in alive and r in state.isr), None)
    isr: tuple[int, ...]
    if leader is not None:
        isr = isr_live
    elif unclean and (leader := next((r for r in replicas if r in alive), None)) is not None:
        isr = (leader,)
    else:
        leader, isr = NO_LEADER, isr_live or state.isr
    if leader == state.leader and isr == state.isr:
        return None
    epoch = state.leader_epoch + 1 if leader != state.leader else state.leader_epoch
    return leader, epoch, isr


def admin_election(
    election: ElectionType, state: PartitionState, replicas: Sequence[int], live: Iterable[int]
) -> ElectionOutcome:
    """What an ElectLeaders request does to one partition (table in the module docstring)."""
    alive = set(live)
    if election is ElectionType.PREFERRED:
        preferred = replicas[0] if replicas else NO_LEADER
        if state.leader == preferred:
            return ElectionOutcome(Errors.ELECTION_NOT_NEEDED)
        if preferred not in alive or preferred not in state.isr:
            return ElectionOutcome(
                Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition under strategy "
                f"PreferredReplicaPartitionLeaderElectionStrategy: expected the preferred "
                f"replica {preferred} alive and in the ISR {list(state.isr)}, found it "
                f"{'alive' if preferred in alive else 'not alive'}",
            )
        return ElectionOutcome(Errors.NONE, target=(preferred, state.leader_epoch + 1, state.isr))
    if state.leader != NO_LEADER and state.leader in alive:
        return ElectionOutcome(Errors.ELECTION_NOT_NEEDED)
    target = elect_leader(state, replicas, alive, unclean=True)
    if target is None or target[0] == NO_LEADER:
        return ElectionOutcome(
            Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition under strategy "
            f"OfflinePartitionLeaderElectionStrategy(true): expected a live replica among "
            f"{list(replicas)}, found none alive",
        )
    return ElectionOutcome(Errors.NONE, target=target)


def reassignment_leader(
    state: PartitionState, target: Sequence[int], live: Iterable[int]
) -> int | None:
    """The first replica of a reassignment's ``target`` that is alive and in the ISR, or None."""
    alive = set(live)
    return next((r for r in target if r in alive and r in state.isr), None)
