"""``PendingTxnOffsets``: per producer id until its marker; later records replace earlier
ones; tombstones and deletions remove entries."""

from sluice.broker.groups.pending_txn_offsets import PendingTxnOffsets


def test_a_marker_takes_all_of_its_producers_entries_and_only_those():
    held: PendingTxnOffsets[str] = PendingTxnOffsets()
    assert not held
    held.add(7, ("g1", "t", 0), 10, "a")
    held.add(7, ("g1", "t", 0), 12, "b")  # replaced by the later record
    held.add(7, ("g2", "t", 1), 13, "c")
    held.add(8, ("g1", "t", 0), 14, "d")
    assert held.has("g1", "t", 0) and held.has("g2", "t", 1) and not held.has("g2", "t", 0)
    assert held.take(7) == {("g1", "t", 0): (12, "b"), ("g2", "t", 1): (13, "c")}
    assert held.take(7) == {}  # a resent marker
    assert held.producers() == {8: {("g1", "t", 0): "d"}}
    assert held.take(8) == {("g1", "t", 0): (14, "d")}
    assert not held


def test_tombstones_and_deletions_remove_entries():
    held: PendingTxnOffsets[str] = PendingTxnOffsets()
    held.add(7, ("g", "t", 0), 10, "a")
    held.add(7, ("g", "t", 1), 10, "b")
    held.add(7, ("g", "t", 0), 11, None)
    assert held.producers() == {7: {("g", "t", 1): "b"}}
    held.remove([("g", "t", 1)])
    assert held.producers() == {7: {}} and not held.has("g", "t", 1)
    assert held.take(7) == {}
