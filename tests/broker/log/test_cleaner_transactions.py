"""The cleaner and transactions: an aborted record never hides a committed one, aborted
batches are dropped, the aborted-transaction index follows the aborted data that remains, an
open transaction's data is never cleaned, and markers go as Kafka's cleaner removes them —
once no batch of their transaction is left and their delete horizon has passed, never a
producer's last batch."""

import pytest

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch

from .compaction_helpers import Clock, clean, read_all

CONFIG = LogConfig(segment_bytes=300, cleanup_policy="compact", delete_retention_ms=1000)


def markers(lg):
    """(offset, record count, delete horizon) of every control batch."""
    headers, _ = read_all(lg)
    return [(h.base_offset, h.record_count, h.delete_horizon_ms) for h in headers if h.is_control]


def fill(lg, n=6):
    for i in range(n):  # rolls everything above into inactive segments
        lg.append(encode_batch([(b"filler%d" % i, b"x" * 40)]))


def txn(pid, key, value, seq=0):
    return encode_batch(
        [(key, value)], producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True
    )


def test_aborted_data_is_dropped_and_never_shadows_committed_data(tmp_path):
    clock = Clock()
    lg = Log(tmp_path / "t-0", CONFIG, clock=clock)
    try:
        lg.append(encode_batch([(b"k", b"committed")]))
        lg.append(txn(7, b"k", b"aborted"))
        aborted_marker = lg.append_marker(7, 0, commit=False).first_offset
        lg.append(txn(8, b"other", b"kept", 0))
        lg.append_marker(8, 0, commit=True)
        fill(lg)
        entries = [t for s in lg.segments() for t in s.txn_index.entries]
        clean(lg, clock.now)
        _, records = read_all(lg)
        values = {r.key: r.value for r in records if r.key and not r.key.startswith(b"\0")}
        assert values[b"k"] == b"committed"
        assert b"aborted" not in [r.value for r in records]
        assert values[b"other"] == b"kept"
        assert [t for s in lg.segments() for t in s.txn_index.entries] == entries
        assert entries[0].last_offset == aborted_marker
    finally:
        lg.close()


def test_an_open_transaction_bounds_the_cleanable_range(tmp_path):
    clock = Clock()
    lg = Log(tmp_path / "t-0", CONFIG, clock=clock)
    try:
        lg.append(txn(9, b"k", b"open"))
        for i in range(8):
            lg.append(encode_batch([(b"k", b"later-%d" % i)]))
        assert lg.last_stable_offset == 0
        stats = clean(lg, clock.now)
        assert stats.segments_cleaned == 0
        _, records = read_all(lg)
        assert [r.value for r in records][0] == b"open"
    finally:
        lg.close()


def test_markers_go_once_their_data_is_gone_and_their_horizon_has_passed(tmp_path):
    clock = Clock()
    lg = Log(tmp_path / "t-0", CONFIG, clock=clock)
    try:
        lg.append(txn(7, b"a", b"aborted"))  # 0
        abort = lg.append_marker(7, 0, commit=False).first_offset  # 1
        lg.append(txn(8, b"b", b"old"))  # 2
        commit = lg.append_marker(8, 0, commit=True).first_offset  # 3
        lg.append(encode_batch([(b"b", b"newer")]))  # 4: hides the committed record
        lg.append(encode_batch([(b"z", b"1")], producer_id=7, producer_epoch=0, base_sequence=1))
        lg.append(encode_batch([(b"z", b"2")], producer_id=8, producer_epoch=0, base_sequence=1))
        fill(lg)
        # Pass 1 removes the transactions' data; the markers stay (their data was seen).
        clean(lg, clock.now)
        assert [m[:2] for m in markers(lg)] == [(abort, 1), (commit, 1)]
        assert [m[2] for m in markers(lg)] == [None, None]
        assert [t.last_offset for s in lg.segments() for t in s.txn_index.entries] == [abort]
        # Pass 2 finds no data left: it stamps the delete horizon; the index entry goes.
        clock.now += 10
        clean(lg, clock.now)
        assert markers(lg) == [(abort, 1, clock.now + 1000), (commit, 1, clock.now + 1000)]
        assert [t for s in lg.segments() for t in s.txn_index.entries] == []
        # Before the horizon they stay; after it they go.
        clock.now += 999
        clean(lg, clock.now)
        assert len(markers(lg)) == 2
        clock.now += 1
        clean(lg, clock.now)
        assert markers(lg) == []
        _, records = read_all(lg)
        assert {r.key: r.value for r in records}[b"b"] == b"newer"
    finally:
        lg.close()


def test_a_marker_that_is_its_producers_last_batch_stays_empty(tmp_path):
    """Kafka's ``isBatchLastRecordOfProducer``: the marker holds the producer's epoch (the
    coordinator bumped it when it aborted), which fences the old epoch after a restart."""
    clock = Clock()
    directory = tmp_path / "t-0"
    lg = Log(directory, CONFIG, clock=clock)
    lg.append(txn(7, b"a", b"aborted"))
    marker = lg.append_marker(7, 1, commit=False).first_offset  # epoch 1: data has none
    fill(lg)
    for _ in range(3):
        clean(lg, clock.now)
        clock.now += 2000
    assert markers(lg) == [(marker, 0, None)]  # emptied, kept
    headers, records = read_all(lg)
    assert b"aborted" not in [r.value for r in records]
    lg.close()
    again = Log(directory, CONFIG, clock=clock)  # replays the empty marker: no harm
    try:
        from sluice.broker.log.errors import InvalidProducerEpochError

        with pytest.raises(InvalidProducerEpochError):
            again.append(txn(7, b"a", b"zombie", seq=1))
    finally:
        again.close()


def test_read_committed_after_cleaning_sees_no_aborted_data(tmp_path):
    """An aborted transaction whose last batch stays (empty: its producer's last) keeps its
    index entry and its marker; one spread over two segments is dropped in both."""
    clock = Clock()
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=200, cleanup_policy="compact"), clock=clock)
    try:
        for seq in range(4):  # spans segments
            lg.append(txn(9, b"k%d" % seq, b"aborted-%d" % seq, seq))
        lg.append_marker(9, 0, commit=False)
        fill(lg)
        clean(lg, clock.now)
        headers, records = read_all(lg)
        assert not [r for r in records if r.value.startswith(b"aborted")]
        last = [h for h in headers if h.producer_id == 9 and not h.is_control]
        assert [(h.base_offset, h.record_count) for h in last] == [(3, 0)]
        assert [t.first_offset for t in lg.collect_aborted_transactions(0, 100)] == [0]
    finally:
        lg.close()
