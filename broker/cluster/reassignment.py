"""Partition reassignment (KIP-455) as data: what ``/brokers/topics/<t>`` records while replicas
move, and how a new target or a cancellation changes it (Kafka's ``ReplicaAssignment``).

With ORS the original replicas and TRS the target, a reassignment in progress is written as::

    partitions[p]        = RS = (TRS ++ ORS) without duplicates   every replica, target first
    adding_replicas[p]   = AR = TRS - ORS                          still catching up
    removing_replicas[p] = RR = ORS - TRS                          leave once TRS is in the ISR

so ORS = RS - AR and TRS = RS - RR, in order, can always be read back (a new controller resumes
from the znode alone). The controller's procedure (``Controller``) is KafkaController's
``onPartitionReassignment``: write RS/AR/RR — every broker in AR creates its replica and follows
the leader; wait until the ISR holds all of TRS; if the leader is not in TRS, move leadership to
the first TRS replica alive and in the ISR; write ``partitions[p] = TRS`` with AR and RR
cleared (the RR brokers delete their replicas); then shrink the ISR to the replicas. The ISR is
only ever shrunk at that last step, when it already holds every target replica, so it never
falls below what the target provides. A new target replaces the old one (computed from ORS, as
Kafka); a cancellation (null target) reverts to ORS at once: replicas in AR leave.

Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["InvalidReassignmentError", "ReplicaAssignment", "validate_target"]


class InvalidReassignmentError(ValueError):
    """A reassignment's target replica list is not acceptable (INVALID_REPLICA_ASSIGNMENT)."""


def _distinct(replicas: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(replicas))


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's ``replicas`` (RS), ``adding`` (AR) and ``removing`` (RR)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas after it, in the order given."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from ORS to ``target`` (Kafka's ``reassignTo``)."""
        origin = self.origin
        full = _distinct([*target, *origin])
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def cancelled(self) -> ReplicaAssignment:
        """Back to ORS, nothing moving."""
        return ReplicaAssignment(self.origin)


def validate_target(
    target: Sequence[int], current: ReplicaAssignment, live: Collection[int]
) -> None:
    """Kafka's ``validateReplicas``: a non-empty list of distinct non-negative broker ids whose
    new members are live brokers. Raises :class:`InvalidReassignmentError`."""
    if not target:
        raise InvalidReassignmentError("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise InvalidReassignmentError(
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
        )
    if any(r < 0 for r in target):
        raise InvalidReassignmentError(f"Invalid broker id in replica list: {list(target)}")
    adding = current.reassign_to(target).adding
    offline = sorted(set(adding) - set(live))
    if offline:
        raise InvalidReassignmentError(
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}"
        )
