"""The cleaner and transactions: an aborted record never hides a committed one, aborted
batches are dropped, markers and the aborted-transaction index survive the swap, and an open
transaction's data is never cleaned."""

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch

from .compaction_helpers import Clock, clean, read_all

CONFIG = LogConfig(segment_bytes=300, cleanup_policy="compact")


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
        for i in range(6):  # roll past everything above
            lg.append(encode_batch([(b"filler%d" % i, b"x" * 40)]))
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
