"""``leader_election``: the controller's reconciliation rule and ElectLeaders' (KIP-460)."""

from __future__ import annotations

from sluice.broker.cluster.leader_election import (
    ElectionType,
    admin_election,
    elect_leader,
    reassignment_leader,
)
from sluice.broker.cluster.zk_data import NO_LEADER, PartitionState
from sluice.broker.protocol.errors import Errors


def state(leader: int, isr: tuple[int, ...], epoch: int = 3) -> PartitionState:
    return PartitionState(leader, epoch, isr, controller_epoch=1, zk_version=5)


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    outcome = admin_election(ElectionType.PREFERRED, state(2, (2, 1, 3)), (1, 2, 3), {1, 2, 3})
    assert outcome.error is Errors.NONE
    assert outcome.target == (1, 4, (2, 1, 3))  # ISR unchanged, epoch bumped


def test_preferred_election_not_needed_or_not_available() -> None:
    live = {1, 2, 3}
    assert (
        admin_election(ElectionType.PREFERRED, state(1, (1, 2)), (1, 2, 3), live).error
        is Errors.ELECTION_NOT_NEEDED
    )
    out_of_sync = admin_election(ElectionType.PREFERRED, state(2, (2, 3)), (1, 2, 3), live)
    assert out_of_sync.error is Errors.PREFERRED_LEADER_NOT_AVAILABLE
    assert out_of_sync.target is None and out_of_sync.message
    dead = admin_election(ElectionType.PREFERRED, state(2, (1, 2)), (1, 2, 3), {2, 3})
    assert dead.error is Errors.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_takes_a_live_replica_outside_the_isr() -> None:
    offline = state(NO_LEADER, (1,))
    outcome = admin_election(ElectionType.UNCLEAN, offline, (1, 2, 3), {2, 3})
    assert outcome.error is Errors.NONE
    assert outcome.target == (2, 4, (2,))
    # An ISR member alive is preferred over an unclean pick.
    clean = admin_election(ElectionType.UNCLEAN, state(NO_LEADER, (1, 3)), (1, 2, 3), {2, 3})
    assert clean.target == (3, 4, (3,))


def test_unclean_election_not_needed_or_impossible() -> None:
    led = admin_election(ElectionType.UNCLEAN, state(1, (1,)), (1, 2), {1, 2})
    assert led.error is Errors.ELECTION_NOT_NEEDED
    nobody = admin_election(ElectionType.UNCLEAN, state(NO_LEADER, (1,)), (1, 2), set())
    assert nobody.error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_reconciliation_drops_non_replicas_and_moves_a_removed_leader() -> None:
    # After a reassignment [1,2] -> [2,3]: the ISR loses 1, and a leader 1 is replaced.
    assert elect_leader(state(2, (1, 2, 3)), (2, 3), {1, 2, 3}, unclean=False) == (2, 3, (2, 3))
    assert elect_leader(state(1, (1, 2, 3)), (2, 3), {1, 2, 3}, unclean=False) == (2, 4, (2, 3))


def test_reassignment_leader_is_the_first_target_replica_alive_in_the_isr() -> None:
    s = state(1, (1, 2, 3))
    assert reassignment_leader(s, (3, 2), {1, 2, 3}) == 3
    assert reassignment_leader(s, (3, 2), {1, 2}) == 2
    assert reassignment_leader(s, (4,), {1, 2, 3, 4}) is None
