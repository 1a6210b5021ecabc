import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _kafka_end_offset_for(entries, epoch, log_end):
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``, branch for branch, over sorted
    (epoch, start offset) entries — except an epoch after the latest one, which Sluice answers
    with (latest, log end) (``end_offset_for``'s docstring says why)."""
    if epoch == -1:
        return -1, -1
    if entries and entries[-1][0] == epoch:
        return epoch, log_end
    higher = [(e, o) for e, o in entries if e > epoch]
    if not higher:
        return (entries[-1][0], log_end) if entries else (-1, -1)  # Kafka: (-1, -1)
    floor = [(e, o) for e, o in entries if e <= epoch]
    if not floor:
        return epoch, higher[0][1]
    return floor[-1][0], higher[0][1]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(1, 20)), max_size=6),
    st.integers(-1, 40),
    st.integers(0, 2),
)
def test_end_offset_for_answers_as_kafka(steps, epoch, retained_from):
    """Against Kafka's rule (``_kafka_end_offset_for``): epochs built by appends, the first
    ``retained_from`` entries' records then removed by retention (``truncate_from_start``), so
    epochs before the first known one come up too."""
    with tempfile.TemporaryDirectory() as d:
        cache = LeaderEpochCache(Path(d))
        current, offset = 0, 0
        for gap, records in steps:
            current += gap
            cache.assign(current, offset)
            offset += records
        if len(cache.entries) > retained_from:
            cache.truncate_from_start(cache.entries[retained_from][1])
        assert cache.end_offset_for(epoch, offset) == _kafka_end_offset_for(
            cache.entries, epoch, offset
        )


def test_an_epoch_before_the_first_ends_where_the_log_history_begins(tmp_path):
    """Retention removed epoch 0's records: a follower or consumer still on epoch 0 (or an
    epoch this log never had before 3) is told it ended where the first known epoch starts,
    as Kafka answers, not (-1, -1); no epoch (-1) is still undefined."""
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in [(0, 0), (3, 10), (4, 25)]:
        cache.assign(epoch, offset)
    cache.truncate_from_start(10)
    assert cache.entries == [(3, 10), (4, 25)]
    assert cache.end_offset_for(0, 30) == (0, 10)
    assert cache.end_offset_for(2, 30) == (2, 10)
    assert cache.end_offset_for(3, 30) == (3, 25)
    assert cache.end_offset_for(-1, 30) == (-1, -1)


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


# -- when the file is written (the module docstring's order) ---------------------------------


def checkpoint(directory):
    return (directory / "leader-epoch-checkpoint").read_text()


def test_a_new_epoch_is_on_disk_when_assign_returns_truncations_at_the_next_write(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 10)
    assert checkpoint(tmp_path) == "0\n2\n0 0\n3 10\n" and cache.written
    cache.truncate_from_end(10)
    cache.truncate_from_start(4)
    assert cache.entries == [(0, 4)] and not cache.written
    assert checkpoint(tmp_path) == "0\n2\n0 0\n3 10\n"  # not written yet
    cache.flush()
    assert checkpoint(tmp_path) == "0\n1\n0 4\n" and cache.written
    cache.truncate_from_end(8)  # nothing at or after 8: no change, nothing to write
    assert cache.written
    cache.assign(4, 12)  # a new epoch writes the whole state
    cache.truncate_from_start(6)
    cache.assign(5, 20)
    assert checkpoint(tmp_path) == "0\n3\n0 6\n4 12\n5 20\n"
    cache.clear()
    assert not (tmp_path / "leader-epoch-checkpoint").exists() and cache.written


def test_an_epoch_written_from_another_thread_leaves_no_io_to_the_append(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    # The replication layer records epoch 2 from a worker thread before the append ...
    worker = threading.Thread(target=cache.assign, args=(2, 7))
    worker.start()
    worker.join()
    written = os.stat(tmp_path / "leader-epoch-checkpoint")
    # ... and the append's own assign (the same epoch, later offsets) writes nothing: every
    # write replaces the file, so an unchanged inode means no write.
    for offset in (7, 8, 20):
        cache.assign(2, offset)
    again = os.stat(tmp_path / "leader-epoch-checkpoint")
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert cache.entries == [(1, 0), (2, 7)] and list(tmp_path.iterdir()) == [
        tmp_path / "leader-epoch-checkpoint"
    ]


def test_epochs_written_ahead_accept_their_own_batches_in_order(tmp_path):
    # A follower records every epoch a fetch starts before appending its batches; the append
    # then assigns (2, 0), (2, 3), (5, 4): each already holds its offset.
    cache = LeaderEpochCache(tmp_path)
    cache.assign_all([(2, 0), (5, 4)])
    for epoch, offset in [(2, 0), (2, 3), (5, 4), (5, 9)]:
        cache.assign(epoch, offset)
    assert cache.entries == [(2, 0), (5, 4)]
    with pytest.raises(StorageError, match="expected an epoch after"):
        cache.assign(2, 4)  # offset 4 is epoch 5's
    with pytest.raises(StorageError, match="expected an epoch after"):
        cache.assign(3, 6)  # an epoch never recorded


def test_a_write_after_the_partition_was_deleted_is_dropped(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    cache = LeaderEpochCache(directory)
    cache.assign(0, 0)
    directory.rename(tmp_path / "t-0.abc-delete")  # LogManager.delete_log's first step
    cache.truncate_from_end(0)
    cache.flush()  # no error, nothing recreated
    cache.assign(1, 0)
    assert cache.written and not directory.exists()


def test_a_write_that_fails_is_retried_by_the_next(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    (tmp_path / "leader-epoch-checkpoint.tmp").mkdir()  # the write cannot open its file
    with pytest.raises(OSError):
        cache.assign(1, 5)
    assert cache.entries == [(0, 0), (1, 5)] and not cache.written
    with pytest.raises(OSError):
        cache.assign(1, 6)  # the same epoch, still not on disk: tried again
    (tmp_path / "leader-epoch-checkpoint.tmp").rmdir()
    cache.assign(1, 6)
    assert checkpoint(tmp_path) == "0\n2\n0 0\n1 5\n" and cache.written


# What a crash leaves: the file as last written, which the log cuts to its start and end as it
# loads (Log.__init__). With a follower's end truncations written before it appends again and
# start truncations left to the next write, that is always what was in memory.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 5)),
        st.tuples(st.just("truncate_end"), st.integers(0, 30)),
        st.tuples(st.just("truncate_start"), st.integers(0, 30)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_a_crash_at_any_point_loads_what_was_in_memory(ops):
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cache = LeaderEpochCache(directory)
        start = end = 0
        for op in ops:
            if op[0] == "append":  # a batch of epoch latest + step at the log end
                epoch = max(cache.latest_epoch, 0) + op[1]
                cache.assign(epoch, end)
                end += op[2]
            elif op[0] == "truncate_end":  # a follower cutting its log, then (fetcher) writing
                end = start + op[1] % (end - start + 1)
                cache.truncate_from_end(end)
                cache.flush()
            else:  # retention or DeleteRecords: not written
                start += op[1] % (end - start + 1)
                cache.truncate_from_start(start)
            loaded = LeaderEpochCache(directory)  # a crash here
            loaded.truncate_from_end(end)
            loaded.truncate_from_start(start)
            assert loaded.entries == cache.entries
