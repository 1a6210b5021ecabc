"""Unit tests of ``Log``: rolling, flush policy, retention, reads, validation."""

import struct

import pytest

from sluice.broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    NonMonotonicOffsetError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.record_batch import iter_batches, validate_batch
from sluice.broker.log.records import decode_batch, encode_batch

from .helpers import batch


class Clock:
    def __init__(self, now=1_700_000_000_000):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def make(tmp_path, clock, **config):
    return Log(tmp_path / "events-0", LogConfig(**config), clock=clock)


def test_offsets_are_consecutive_and_logical(tmp_path, clock):
    log = make(tmp_path, clock)
    infos = [log.append(batch(n)) for n in (3, 1, 5)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3), (4, 8)]
    assert log.log_end_offset == log.high_watermark == 9
    raw = log.read(0, 1 << 20).slice.read()
    assert [r.offset for h in iter_batches(raw) for r in decode_batch(raw, h.position)] == list(
        range(9)
    )
    log.close()


def test_leader_epoch_is_stamped_into_the_header(tmp_path, clock):
    log = make(tmp_path, clock)
    log.append(batch(2), leader_epoch=7)
    header = validate_batch(log.read(0, 1000).slice.read())
    assert header.partition_leader_epoch == 7
    log.close()


def test_several_batches_in_one_append(tmp_path, clock):
    log = make(tmp_path, clock)
    info = log.append(batch(2) + batch(3))
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 2)
    log.close()


def test_rolls_on_segment_bytes_and_segment_ms(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=300, segment_ms=1000)
    size = len(batch(1))
    for _ in range(6):
        log.append(batch(1))
    per_segment = 300 // size
    assert log.segment_count == -(-6 // per_segment)
    clock.now += 1001
    before = log.segment_count
    log.append(batch(1))
    assert log.segment_count == before + 1
    assert [s.base_offset for s in log.segments()][-1] == 6
    log.close()


def test_a_new_config_applies_to_the_next_append(tmp_path, clock):
    # The roll limits are computed once per active segment and config: assigning a config
    # (the broker does, for a topic's overrides) must still take effect at once.
    log = make(tmp_path, clock)
    for _ in range(3):
        log.append(batch(1))
    assert log.segment_count == 1
    log.config = LogConfig(segment_bytes=len(batch(1)) * 3)
    log.append(batch(1))
    assert [s.base_offset for s in log.segments()] == [0, 3]
    log.config = LogConfig(segment_ms=1000)
    log.append(batch(1))
    assert log.segment_count == 2
    clock.now += 1001
    log.append(batch(1))
    assert [s.base_offset for s in log.segments()] == [0, 3, 5]
    log.close()


def test_rolls_when_the_offset_index_is_full(tmp_path, clock):
    # Room for one entry per index (16 bytes: two 8-byte .index entries, one 12-byte
    # .timeindex entry); with index.interval.bytes=0 every batch after a segment's first
    # adds one, so each segment holds two batches.
    log = make(tmp_path, clock, index_interval_bytes=0, segment_index_bytes=16)
    for i in range(6):
        log.append(batch(1, ts=1000 + i))
    assert [s.base_offset for s in log.segments()] == [0, 2, 4]
    assert all(s.time_index.is_full for s in log.segments())
    # A truncation removes the entry again (and restarts the interval count): the segment
    # takes two more batches, the second adding an entry, and rolls at the third.
    log.truncate_to(3)
    assert not log.active_segment.time_index.is_full
    for ts in (2000, 2001):
        log.append(batch(1, ts=ts))
        assert [s.base_offset for s in log.segments()] == [0, 2]
    assert log.active_segment.time_index.is_full
    log.append(batch(1, ts=2002))
    assert [s.base_offset for s in log.segments()] == [0, 2, 5]
    log.close()


def test_reads_out_of_range_raise(tmp_path, clock):
    log = make(tmp_path, clock)
    log.append(batch(3))
    assert log.read(3, 100).slice is None  # at the log end: nothing yet, not an error
    for offset in (-1, 4):
        with pytest.raises(OffsetOutOfRangeError, match=r"expected an offset in \[0, 3\]"):
            log.read(offset, 100)
    log.close()


def test_reads_stop_at_the_high_watermark(tmp_path, clock):
    log = make(tmp_path, clock)
    log.set_replicated(True)
    log.append(batch(2))
    log.append(batch(2))
    assert log.read(0, 1 << 20).slice is None  # nothing committed yet
    log.high_watermark = 2
    raw = log.read(0, 1 << 20).slice.read()
    assert [h.base_offset for h in iter_batches(raw)] == [0]
    raw = log.read(0, 1 << 20, upper_bound="log_end").slice.read()
    assert [h.base_offset for h in iter_batches(raw)] == [0, 2]
    log.close()


def test_read_flushed_only_exposes_messages_after_flush(tmp_path, clock):
    log = make(tmp_path, clock, read_flushed_only=True)
    log.append(batch(2))
    assert log.read(0, 1000).slice is None
    log.flush()
    assert log.read(0, 1000).slice is not None
    log.close()


def test_flush_policy_by_messages_and_time(tmp_path, clock):
    wanted = []
    log = Log(
        tmp_path / "t-0",
        LogConfig(flush_messages=3, flush_ms=5000),
        clock=clock,
        on_flush_needed=wanted.append,
    )
    log.append(batch(2))
    assert not log.needs_flush() and not wanted
    log.append(batch(1))
    assert log.needs_flush() and wanted == [log]
    assert log.flush() == 3 and log.recovery_point == 3 and not log.needs_flush()
    log.append(batch(1))
    assert not log.needs_flush()
    clock.now += 5000
    assert log.needs_flush()
    log.close()


def test_validation_rejects_bad_batches_and_writes_nothing(tmp_path, clock):
    log = make(tmp_path, clock, max_message_bytes=500)
    good = batch(1)
    corrupt = bytearray(batch(1))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(good + bytes(corrupt))
    with pytest.raises(RecordBatchTooLargeError, match="max.message.bytes"):
        log.append(batch(1, value_size=600))
    control = encode_batch([(b"k", b"v")], control=True)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append(control)
    lying = bytearray(batch(3))
    struct.pack_into(">i", lying, 57, 2)  # RecordCount 2 but LastOffsetDelta 2
    from sluice.broker.log.record_batch import compute_crc

    struct.pack_into(">I", lying, 17, compute_crc(lying))
    with pytest.raises(CorruptRecordError, match="RecordCount = LastOffsetDelta"):
        log.append(lying)
    with pytest.raises(InvalidRecordError):
        log.append(b"")
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.close()


def test_follower_append_keeps_offsets(tmp_path, clock):
    leader = make(tmp_path / "a", clock)
    leader.append(batch(2), leader_epoch=3)
    leader.append(batch(2), leader_epoch=4)
    follower = make(tmp_path / "b", clock)
    follower.append(leader.read(0, 1 << 20).slice.read(), assign=False)
    assert follower.log_end_offset == 4
    with pytest.raises(NonMonotonicOffsetError):
        follower.append(leader.read(0, 1 << 20).slice.read(), assign=False)
    leader.close()
    follower.close()


def test_log_append_time(tmp_path, clock):
    log = make(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append(batch(2, ts=5))
    assert info.log_append_time == clock.now
    raw = log.read(0, 1000).slice.read()
    header = validate_batch(raw)  # CRC recomputed
    assert header.timestamp_type == 1
    assert [r.timestamp for r in decode_batch(raw)] == [clock.now, clock.now]
    log.close()


def test_retention_by_time_deletes_whole_old_segments(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=200, retention_ms=1000, file_delete_delay_ms=50)
    for i in range(6):
        log.append(batch(1, ts=clock.now - 5000 if i < 4 else clock.now))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    deleted = log.delete_old_segments()
    assert deleted >= 1
    assert log.log_start_offset == log.segments()[0].base_offset > 0
    for segment in log.segments()[:-1]:
        assert segment.largest_timestamp() >= clock.now - 1000
    # The deleted files linger as .deleted until file.delete.delay.ms has passed.
    assert any(p.name.endswith(".deleted") for p in log.directory.iterdir())
    clock.now += 51
    log.purge_deleted_segments()
    assert not any(p.name.endswith(".deleted") for p in log.directory.iterdir())
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()


def test_retention_by_size_never_deletes_the_active_segment(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=200, retention_bytes=1)
    for _ in range(8):
        log.append(batch(1))
    log.delete_old_segments()
    assert log.segment_count == 1
    assert log.log_start_offset == log.active_segment.base_offset
    log.close()


def test_retention_stays_below_the_high_watermark(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=200, retention_ms=0)
    log.set_replicated(True)
    for _ in range(8):
        log.append(batch(1, ts=0))
    assert log.delete_old_segments(now=clock.now + 10**9) == 0  # HW is 0
    log.high_watermark = 8
    assert log.delete_old_segments(now=clock.now + 10**9) > 0
    log.close()


def test_offset_for_timestamp(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=250, index_interval_bytes=50)
    for i in range(10):
        log.append(batch(2, timestamps=[100 * i, 100 * i + 50]))
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(420) == (9, 450)
    assert log.offset_for_timestamp(451) == (10, 500)
    assert log.offset_for_timestamp(10_000) is None
    log.close()


def test_clean_reopen_keeps_everything(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=300)
    for i in range(10):
        log.append(batch(2, ts=i))
    before = log.read(0, 1 << 20).slice.read()
    rp = log.flush()
    log.close()
    again = Log(tmp_path / "events-0", LogConfig(segment_bytes=300), recovery_point=rp, clock=clock)
    assert again.log_end_offset == 20
    assert again.read(0, 1 << 20).slice.read() == before
    assert again.segments()[0].max_timestamp == log.segments()[0].max_timestamp
    again.close()


def test_segments_below_a_moved_log_start_are_deleted(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=200, retention_ms=-1)
    for _ in range(8):
        log.append(batch(1))
    second = log.segments()[1].base_offset
    log.increment_log_start_offset(second + 1)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == second + 1  # a start inside a segment stays as set
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(100)
    log.close()


def test_an_epoch_whose_records_retention_removed_ends_at_the_log_start(tmp_path, clock):
    """Kafka's OffsetForLeaderEpoch answer for an epoch before the first one the log still
    holds: that epoch, ended where the log's history now begins (not (-1, -1))."""
    log = make(tmp_path, clock, segment_bytes=200, retention_ms=-1)
    log.append(batch(2), leader_epoch=0)  # offsets 0..1
    log.append(batch(2), leader_epoch=3)  # offsets 2..3
    log.increment_log_start_offset(2)
    assert log.leader_epochs.entries == [(3, 2)]
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(3) == (3, 4)
    log.close()


def test_leader_epochs_follow_appends_truncation_and_restarts(tmp_path, clock):
    log = make(tmp_path, clock, segment_bytes=300)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(3), leader_epoch=2)  # offsets 4..6
    log.append(batch(1), leader_epoch=5)  # offset 7
    assert log.leader_epochs.entries == [(0, 0), (2, 4), (5, 7)]
    assert log.end_offset_for_epoch(2) == (2, 7)
    assert log.end_offset_for_epoch(5) == (5, 8)
    # The old leader's uncommitted epoch-5 batch goes when it truncates to where 2 ended.
    log.truncate_to(7)
    assert log.leader_epochs.entries == [(0, 0), (2, 4)]
    log.close()
    again = Log(tmp_path / "events-0", LogConfig(segment_bytes=300), clock=clock)
    assert again.leader_epochs.entries == [(0, 0), (2, 4)]
    again.truncate_fully_and_start_at(100)
    assert again.leader_epochs.entries == []
    again.close()
