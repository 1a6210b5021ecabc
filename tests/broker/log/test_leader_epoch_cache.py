import pytest

from sluice.broker.log.errors import StorageError
from sluice.broker.log.leader_epoch_cache import LeaderEpochCache


def test_assign_persist_and_answer(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch: nothing new
    cache.assign(2, 10)
    cache.assign(5, 30)
    assert cache.entries == [(0, 0), (2, 10), (5, 30)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    again = LeaderEpochCache(tmp_path)
    assert again.entries == cache.entries
    # OffsetForLeaderEpoch: where did each epoch end?
    assert again.end_offset_for(0, 42) == (0, 10)
    assert again.end_offset_for(1, 42) == (0, 10)  # unknown epoch 1: the one before it
    assert again.end_offset_for(4, 42) == (2, 30)
    assert again.end_offset_for(5, 42) == (5, 42)
    assert again.end_offset_for(9, 42) == (5, 42)
    with pytest.raises(StorageError, match="expected an epoch after"):
        again.assign(3, 50)


def test_an_epoch_that_wrote_nothing_is_replaced(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 0)
    assert cache.entries == [(2, 0)]


def test_truncation_both_ends(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in [(0, 0), (1, 10), (2, 20)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(15)
    assert cache.entries == [(0, 0), (1, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(1, 12)]
    cache.clear()
    assert cache.entries == [] and cache.end_offset_for(0, 5) == (-1, -1)


def test_a_torn_file_starts_empty(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")
    assert LeaderEpochCache(tmp_path).entries == []
