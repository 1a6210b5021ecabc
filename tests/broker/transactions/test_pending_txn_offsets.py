"""``PendingTxnOffsets``: held until the marker, committed or dropped by it, per partition of
groups; zombies fenced by epoch."""

from __future__ import annotations

from sluice.broker.protocol.errors import Errors
from sluice.broker.transactions.pending_txn_offsets import PendingTxnOffsets


def in_partition(*groups: str):
    return lambda group: group in groups


def test_a_commit_marker_takes_the_offsets_of_its_partition_only():
    held = PendingTxnOffsets()
    assert held.hold(7, 0, "g1", [("src", 0, 10, -1, None)]) == Errors.NONE
    assert held.hold(7, 0, "g1", [("src", 0, 12, -1, "m")]) == Errors.NONE  # replaced
    assert held.hold(7, 0, "g2", [("src", 1, 5, 3, None)]) == Errors.NONE
    assert held.complete(7, 0, True, in_partition("g1")) == {"g1": [("src", 0, 12, -1, "m")]}
    assert held.pending(7) == {"g2": [("src", 1, 5, 3, None)]}
    assert held.complete(7, 0, True, in_partition("g2")) == {"g2": [("src", 1, 5, 3, None)]}
    assert held.complete(7, 0, True, in_partition("g1", "g2")) == {}  # a resent marker
    assert held.pending(7) == {}


def test_an_abort_drops_and_a_fencing_marker_refuses_the_zombie():
    held = PendingTxnOffsets()
    held.hold(7, 3, "g", [("src", 0, 10, -1, None)])
    assert held.complete(7, 4, False, in_partition("g")) == {}  # aborted with a bump
    assert held.pending(7) == {}
    assert held.hold(7, 3, "g", [("src", 0, 11, -1, None)]) == Errors.PRODUCER_FENCED
    assert held.hold(7, 4, "g", [("src", 0, 11, -1, None)]) == Errors.NONE


def test_offsets_of_an_older_epoch_are_not_committed_by_a_newer_marker():
    held = PendingTxnOffsets()
    held.hold(7, 1, "g", [("src", 0, 10, -1, None)])
    assert held.complete(7, 2, True, in_partition("g")) == {}


def test_restore_puts_back_what_could_not_be_committed():
    held = PendingTxnOffsets()
    held.hold(7, 0, "g", [("src", 0, 10, -1, None)])
    taken = held.complete(7, 0, True, in_partition("g"))
    held.restore(7, 0, taken)
    assert held.pending(7) == taken
