"""Transactions in the log: the last stable offset, markers, the aborted-transaction index
kept at append and rebuilt on recovery, reads bounded by the LSO, and fencing by producer
epoch and by coordinator epoch."""

import struct

import pytest

from sluice.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    TransactionCoordinatorFencedError,
)
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch
from sluice.broker.log.transaction_index import AbortedTxn

CONFIG = LogConfig(segment_bytes=600)


def txn_batch(pid, seq, n=2, epoch=0):
    records = [(b"k", b"v%d" % (seq + i)) for i in range(n)]
    return encode_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def plain(n=1):
    return encode_batch([(b"k", b"p")] * n)


@pytest.fixture
def log(tmp_path):
    lg = Log(tmp_path / "t-0", CONFIG)
    yield lg
    lg.close()


def all_aborted(lg):
    return [t for s in lg.segments() for t in s.txn_index.entries]


def test_lso_stops_at_the_oldest_open_transaction(log):
    log.append(plain())  # 0
    log.append(txn_batch(1, 0))  # 1-2
    log.append(txn_batch(2, 0))  # 3-4
    log.append(plain())  # 5
    assert (log.high_watermark, log.last_stable_offset) == (6, 1)
    log.append_marker(1, 0, commit=True)  # 6
    assert log.last_stable_offset == 3
    log.append_marker(2, 0, commit=False)  # 7
    assert log.last_stable_offset == log.high_watermark == 8
    assert all_aborted(log) == [AbortedTxn(2, 3, 7, 8)]


def test_abort_entry_records_the_lso_of_the_transactions_still_open(log):
    log.append(txn_batch(1, 0))  # 0-1
    log.append(txn_batch(2, 0))  # 2-3
    log.append_marker(2, 0, commit=False)  # 4: txn 1 is still open from 0
    assert all_aborted(log) == [AbortedTxn(2, 2, 4, 0)]


def test_read_committed_reads_stop_at_the_lso(log):
    log.append(plain(3))
    log.append(txn_batch(1, 0))
    info = log.read(0, 1 << 20, upper_bound="last_stable")
    assert info.slice is not None
    whole = log.read(0, 1 << 20)
    assert whole.slice is not None and info.slice.size < whole.slice.size
    assert log.read(3, 1 << 20, upper_bound="last_stable").slice is None


def test_collect_aborted_transactions_across_segments(log):
    for i in range(6):
        log.append(txn_batch(10 + i, 0, n=4))
        log.append_marker(10 + i, 0, commit=i % 2 == 0)
    assert log.segment_count > 1
    aborted = log.collect_aborted_transactions(0, log.last_stable_offset)
    assert [t.producer_id for t in aborted] == [11, 13, 15]
    late = log.collect_aborted_transactions(aborted[1].last_offset + 1, log.last_stable_offset)
    assert [t.producer_id for t in late] == [15]


def test_clients_may_not_write_markers_and_old_epochs_are_fenced(log):
    from sluice.broker.log.control_batch import encode_marker

    with pytest.raises(InvalidRecordError, match="control"):
        log.append(encode_marker(1, 0, commit=True, coordinator_epoch=0, timestamp=0))
    log.append(txn_batch(1, 0))
    log.append_marker(1, 1, commit=False)  # the coordinator fenced epoch 0
    with pytest.raises(InvalidProducerEpochError):
        log.append(txn_batch(1, 2, epoch=0))
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(1, 0, commit=True)
    log.append(txn_batch(1, 0, epoch=1))  # the new epoch starts at sequence 0


@pytest.mark.parametrize("clean", [True, False])
def test_a_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path, clean):
    directory = tmp_path / "t-0"
    lg = Log(directory, CONFIG)
    lg.append(txn_batch(1, 0))
    lg.append_marker(1, 0, commit=True, coordinator_epoch=3)
    lg.append(txn_batch(1, 2))
    end = lg.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError, match="epoch >= 3, found 2"):
        lg.append_marker(1, 0, commit=False, coordinator_epoch=2)
    assert lg.log_end_offset == end  # nothing written
    assert lg.last_stable_offset < end  # the transaction is still open
    # Another producer id has its own coordinator epoch; a new producer epoch keeps it.
    lg.append(txn_batch(2, 0))
    lg.append_marker(2, 0, commit=True, coordinator_epoch=0)
    lg.append_marker(1, 1, commit=False, coordinator_epoch=3)
    lg.append(txn_batch(1, 0, epoch=1))
    if clean:
        lg.close()
    else:  # a kill -9: the state is replayed from the markers
        lg.flush()
        for segment in lg.segments():
            segment.close()
    again = Log(directory, CONFIG, clean_shutdown=clean)
    try:
        with pytest.raises(TransactionCoordinatorFencedError):
            again.append_marker(1, 1, commit=True, coordinator_epoch=2)
        again.append_marker(1, 1, commit=True, coordinator_epoch=4)
        with pytest.raises(TransactionCoordinatorFencedError):
            again.append_marker(1, 1, commit=True, coordinator_epoch=3)
    finally:
        again.close()


def test_a_follower_copies_a_marker_of_an_older_coordinator_epoch(log):
    """Kafka's REPLICATION origin: the leader decided, a follower only copies."""
    from sluice.broker.log.control_batch import encode_marker

    log.append(txn_batch(1, 0))
    log.append_marker(1, 0, commit=True, coordinator_epoch=5)
    log.append(txn_batch(1, 2))
    marker = bytearray(encode_marker(1, 0, commit=False, coordinator_epoch=4, timestamp=0))
    struct.pack_into(">q", marker, 0, log.log_end_offset)  # BaseOffset: outside the CRC
    log.append(marker, assign=False)
    assert log.last_stable_offset == log.log_end_offset
    assert [t.first_offset for t in all_aborted(log)] == [3]


@pytest.mark.parametrize("clean", [True, False])
def test_state_and_index_survive_a_restart(tmp_path, clean):
    directory = tmp_path / "t-0"
    lg = Log(directory, CONFIG)
    for i in range(4):
        lg.append(txn_batch(20 + i, 0, n=3))
        lg.append_marker(20 + i, 0, commit=i == 1)
    lg.append(txn_batch(99, 0))  # left open
    expected = all_aborted(lg)
    lso = lg.last_stable_offset
    if clean:
        lg.close()
    else:
        lg.flush()
        for segment in lg.segments():
            segment.close()
    again = Log(directory, CONFIG, clean_shutdown=clean)
    try:
        assert all_aborted(again) == expected
        assert again.last_stable_offset == lso
        again.append_marker(99, 0, commit=False)
        assert again.last_stable_offset == again.log_end_offset
    finally:
        again.close()


def test_corrupt_txnindex_is_rebuilt_from_the_log(tmp_path):
    directory = tmp_path / "t-0"
    lg = Log(directory, CONFIG)
    lg.append(txn_batch(5, 0))
    lg.append_marker(5, 0, commit=False)
    expected = all_aborted(lg)
    lg.close()
    (index,) = directory.glob("*.txnindex")
    index.write_bytes(index.read_bytes() + b"\1")
    again = Log(directory, CONFIG)
    try:
        assert all_aborted(again) == expected
    finally:
        again.close()


def test_truncation_drops_the_entries_above(log):
    log.append(txn_batch(1, 0))
    log.append_marker(1, 0, commit=False)  # 2
    log.append(txn_batch(2, 0))
    log.append_marker(2, 0, commit=False)  # 5
    log.truncate_to(5)
    assert [t.producer_id for t in all_aborted(log)] == [1]
    assert log.last_stable_offset == 3  # producer 2's transaction is open again
