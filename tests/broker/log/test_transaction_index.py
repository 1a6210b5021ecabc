"""``TransactionIndex``: Kafka's 34-byte layout, the search a fetch runs, truncation, and the
invariants checked on load and append."""

import struct

import pytest

from sluice.broker.log.errors import CorruptIndexError, NonMonotonicOffsetError
from sluice.broker.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entries_are_kafkas_34_bytes_and_survive_a_reopen(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert not path.exists()  # created on the first append only
    index.append(AbortedTxn(7, 0, 10, 11))
    index.append(AbortedTxn(8, 5, 20, 21))
    index.close()
    data = path.read_bytes()
    assert ENTRY_SIZE == 34 and len(data) == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 7, 0, 10, 11)
    again = TransactionIndex(path)
    assert again.entries == [AbortedTxn(7, 0, 10, 11), AbortedTxn(8, 5, 20, 21)]


def test_collect_matches_kafkas_search(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 4, 2))  # another txn from 2 was still open
    index.append(AbortedTxn(2, 2, 9, 10))
    index.append(AbortedTxn(3, 12, 15, 16))
    found, complete = index.collect(5, 10)
    assert found == [AbortedTxn(2, 2, 9, 10)] and complete
    found, complete = index.collect(0, 100)
    assert [t.producer_id for t in found] == [1, 2, 3] and not complete


def test_truncate_drops_entries_whose_marker_is_at_or_after(tmp_path):
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(path)
    for i in range(3):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(15)
    assert [t.last_offset for t in index.entries] == [5]
    assert path.stat().st_size == ENTRY_SIZE


def test_invariants(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 4, 5))
    with pytest.raises(NonMonotonicOffsetError, match="expected a LastOffset above 4, found 4"):
        index.append(AbortedTxn(2, 1, 4, 5))
    bad = tmp_path / "bad.txnindex"
    bad.write_bytes(b"\0" * 35)
    with pytest.raises(CorruptIndexError, match="multiple of 34, found 35"):
        TransactionIndex(bad)
    bad.write_bytes(struct.pack(">hqqqq", 1, 1, 0, 1, 2))
    with pytest.raises(CorruptIndexError, match="expected entry version 0, found 1"):
        TransactionIndex(bad)
