"""Transactional offsets in ``__consumer_offsets`` (Kafka's TxnOffsetCommit path): appended as
transactional batches, pending until the producer's marker, committed or dropped by it —
live, and rebuilt from the log when a partition is loaded (restart, failover)."""

import asyncio

import pytest

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.groups import offset_store
from sluice.broker.groups.offset_store import CommittedOffset, OffsetStore, _batch, _commit_record
from sluice.broker.log.errors import InvalidProducerEpochError
from sluice.broker.log.log_manager import LogManager

TOPIC = offset_store.TOPIC


class Offsets:
    """A store over one local offsets partition (the only replica), reloadable."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.manager = LogManager([tmp_path / "logs"])
        self.manager.startup()
        metadata = LocalMetadataStore(tmp_path / "logs", 0)
        if metadata.get(TOPIC) is None:
            metadata.create_topic(TOPIC, 1, 1, {}, internal=True)
        self.log = self.manager.get_or_create_log(TOPIC, 0)

        async def append(partition, batch):
            assert partition == 0
            return self.log.append(batch, coordinator=True).first_offset

        self.store = OffsetStore(1, append)
        self.store.load_partition(0, self.log, compact=True)

    def reopen(self):
        self.manager.shutdown()
        return Offsets(self.tmp_path)

    def txn(self, pid, epoch, group, offsets):
        """TxnOffsetCommit through the store: ``offsets`` {(topic, partition): offset}."""
        entries = [(t, p, CommittedOffset(o, -1, None, 1)) for (t, p), o in offsets.items()]
        asyncio.run(self.store.commit_txn(group, pid, epoch, entries))

    def commit(self, group, offsets):
        entries = [(t, p, CommittedOffset(o, -1, None, 1)) for (t, p), o in offsets.items()]
        asyncio.run(self.store.commit(group, entries))

    def marker(self, pid, epoch, commit, *, apply=True):
        """The marker written as ``write_marker`` does: appended, then applied."""
        self.log.append_marker(pid, epoch, commit=commit, coordinator_epoch=0)
        if apply:
            self.store.complete_txn(0, pid, commit)

    def offsets(self, group):
        return {tp: c.offset for tp, c in self.store.committed(group).items()}

    def pending(self):
        return {
            pid: {(g, t, p): c.offset for (g, t, p), c in held.items()}
            for pid, held in self.store.pending_txn(0).items()
        }


def test_commit_applies_abort_drops_and_an_open_transaction_stays_pending(tmp_path):
    o = Offsets(tmp_path)
    o.commit("g", {("t", 0): 5})
    o.txn(7, 0, "g", {("t", 0): 10, ("t", 1): 3})
    assert o.offsets("g") == {("t", 0): 5}  # not visible before the marker
    assert o.store.has_pending_txn("g", "t", 0) and o.store.has_pending_txn("g", "t", 1)
    o.marker(7, 0, commit=True)
    o.txn(8, 0, "g", {("t", 0): 20})
    o.marker(8, 0, commit=False)
    o.txn(9, 2, "g", {("t", 2): 99})
    expected = {("t", 0): 10, ("t", 1): 3}
    assert o.offsets("g") == expected
    assert o.pending() == {9: {("g", "t", 2): 99}}
    assert not o.store.has_pending_txn("g", "t", 0)
    assert o.store.has_pending_txn("g", "t", 2)
    # The log alone gives the same state: a restart (or another broker loading the partition).
    o = o.reopen()
    assert o.offsets("g") == expected
    assert o.pending() == {9: {("g", "t", 2): 99}}
    # The open transaction's marker, resent by its coordinator after the restart.
    o.marker(9, 2, commit=True)
    assert o.offsets("g") == {**expected, ("t", 2): 99}
    assert o.pending() == {}
    o = o.reopen()
    assert o.offsets("g") == {**expected, ("t", 2): 99}
    o.manager.shutdown()


def test_a_marker_written_before_a_crash_is_applied_by_the_reload(tmp_path):
    """The broker died after appending the marker, before applying it in memory."""
    o = Offsets(tmp_path)
    o.txn(7, 0, "g", {("t", 0): 10})
    o.marker(7, 0, commit=True, apply=False)
    assert o.offsets("g") == {}
    o = o.reopen()
    assert o.offsets("g") == {("t", 0): 10} and o.pending() == {}
    o.txn(7, 1, "g", {("t", 0): 11})  # the next transaction, aborted before the crash
    o.marker(7, 1, commit=False, apply=False)
    o = o.reopen()
    assert o.offsets("g") == {("t", 0): 10} and o.pending() == {}
    o.manager.shutdown()


def test_a_plain_commit_later_in_the_log_than_the_transaction_wins(tmp_path):
    """Kafka orders by the appended offset: a commit written after the transactional records
    but before the marker is not overwritten by the COMMIT marker; one written before is."""
    o = Offsets(tmp_path)
    o.commit("g", {("t", 0): 1})  # before the transaction: overwritten
    o.txn(7, 0, "g", {("t", 0): 10, ("t", 1): 10})
    o.commit("g", {("t", 1): 50})  # after the transactional records: kept
    o.marker(7, 0, commit=True)
    assert o.offsets("g") == {("t", 0): 10, ("t", 1): 50}
    o = o.reopen()
    assert o.offsets("g") == {("t", 0): 10, ("t", 1): 50}
    o.manager.shutdown()


def test_producers_and_groups_of_one_partition_are_independent(tmp_path):
    o = Offsets(tmp_path)
    o.txn(7, 0, "g1", {("t", 0): 1})
    o.txn(8, 0, "g2", {("t", 0): 2})
    o.txn(7, 0, "g2", {("t", 1): 3})
    o.txn(7, 0, "g1", {("t", 0): 4})  # a later TxnOffsetCommit of the same transaction
    o.marker(8, 0, commit=False)
    assert o.pending() == {7: {("g1", "t", 0): 4, ("g2", "t", 1): 3}}
    o.marker(7, 0, commit=True)
    assert (o.offsets("g1"), o.offsets("g2")) == ({("t", 0): 4}, {("t", 1): 3})
    o = o.reopen()
    assert (o.offsets("g1"), o.offsets("g2")) == ({("t", 0): 4}, {("t", 1): 3})
    o.manager.shutdown()


def test_a_fenced_producer_cannot_add_offsets(tmp_path):
    o = Offsets(tmp_path)
    o.txn(7, 3, "g", {("t", 0): 1})
    o.marker(7, 4, commit=False)  # the coordinator aborted it with a bump (a new producer)
    with pytest.raises(InvalidProducerEpochError):
        o.txn(7, 3, "g", {("t", 0): 2})
    assert o.pending() == {} and o.offsets("g") == {}
    o = o.reopen()
    assert o.pending() == {} and o.offsets("g") == {}
    o.manager.shutdown()


def test_deleted_offsets_leave_the_pending_ones_too(tmp_path):
    o = Offsets(tmp_path)
    o.commit("g", {("t", 0): 1})
    o.txn(7, 0, "g", {("t", 0): 10, ("t", 1): 10})
    asyncio.run(o.store.delete("g", [("t", 0), ("t", 1)]))
    assert o.offsets("g") == {} and o.pending() == {7: {}}
    assert not o.store.has_pending_txn("g", "t", 1)
    o.marker(7, 0, commit=True)
    assert o.offsets("g") == {}
    o.manager.shutdown()


def test_a_transactional_tombstone_removes_the_pending_entry_on_load(tmp_path):
    o = Offsets(tmp_path)
    o.txn(7, 0, "g", {("t", 0): 10, ("t", 1): 11})
    tombstone = _batch([_commit_record(("g", "t", 1), None)], producer_id=7, producer_epoch=0)
    o.log.append(tombstone, coordinator=True)
    o = o.reopen()
    assert o.pending() == {7: {("g", "t", 0): 10}}
    o.marker(7, 0, commit=True)
    assert o.offsets("g") == {("t", 0): 10}
    o.manager.shutdown()


def test_a_partition_with_pending_offsets_is_not_rewritten(tmp_path, monkeypatch):
    """The standalone rewrite of a stale partition would drop the producer ids."""
    monkeypatch.setattr(offset_store, "COMPACT_SLACK", 10)
    o = Offsets(tmp_path)
    for i in range(50):
        o.commit("g", {("t", 0): i})
    o.txn(7, 0, "g", {("t", 1): 5})
    o = o.reopen()
    assert o.log.log_start_offset == 0
    assert o.pending() == {7: {("g", "t", 1): 5}}
    o.marker(7, 0, commit=True)
    o = o.reopen()  # nothing pending now: rewritten, and still the same state
    assert o.log.log_start_offset > 0
    assert o.offsets("g") == {("t", 0): 49, ("t", 1): 5} and o.pending() == {}
    o.manager.shutdown()
