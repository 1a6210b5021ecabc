"""``reassignment``: RS/AR/RR as KIP-455 records them, against Kafka's ``ReplicaAssignment``."""

from __future__ import annotations

import pytest

from sluice.broker.cluster.reassignment import (
    InvalidReassignmentError,
    ReplicaAssignment,
    validate_target,
)


def test_reassign_records_every_replica_target_first() -> None:
    moving = ReplicaAssignment((1, 2)).reassign_to((2, 3))
    assert moving == ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    assert moving.is_being_reassigned
    # ORS in RS order (Kafka's ``replicas diff adding``), TRS in the order given.
    assert moving.origin == (2, 1) and moving.target == (2, 3)


def test_a_new_target_replaces_the_old_one_from_the_origin() -> None:
    moving = ReplicaAssignment((1, 2)).reassign_to((2, 3))
    again = moving.reassign_to((4, 1))
    assert again == ReplicaAssignment((4, 1, 2), adding=(4,), removing=(2,))
    assert set(again.origin) == {1, 2}


def test_cancel_reverts_to_the_origin() -> None:
    moving = ReplicaAssignment((1, 2)).reassign_to((2, 3))
    assert moving.cancelled() == ReplicaAssignment((2, 1))
    assert not moving.cancelled().is_being_reassigned


def test_same_target_or_reorder_moves_nothing() -> None:
    assert ReplicaAssignment((1, 2)).reassign_to((1, 2)) == ReplicaAssignment((1, 2))
    reordered = ReplicaAssignment((1, 2)).reassign_to((2, 1))
    assert reordered == ReplicaAssignment((2, 1)) and not reordered.is_being_reassigned


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ((), "Empty replica list"),
        ((1, 1), "Duplicate replica ids"),
        ((-1, 2), "Invalid broker id"),
        ((2, 9), "brokers that are not alive"),
    ],
)
def test_validate_refuses_as_kafka(target: tuple[int, ...], message: str) -> None:
    with pytest.raises(InvalidReassignmentError, match=message):
        validate_target(target, ReplicaAssignment((1, 2)), {1, 2, 3})


def test_validate_accepts_a_dead_replica_that_is_not_new() -> None:
    validate_target((1, 3), ReplicaAssignment((1, 2)), {2, 3})  # 1 is kept, not added
