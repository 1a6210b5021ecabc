"""The cleaner's rules one by one: configuration, null keys, the dirty ratio, the compaction
lags, tombstone expiry, producer state, segment grouping, the background thread."""

from __future__ import annotations

import threading

import pytest

from sluice.broker.log.cleaner_config import CleanerConfig
from sluice.broker.log.cleaner_manager import LogToClean, cleanable_offsets
from sluice.broker.log.compaction_errors import NullKeyOnCompactedTopicError
from sluice.broker.log.errors import InvalidRecordError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import LZ4, ZSTD, encode_batch

from .compaction_helpers import TP, Clock, clean, read_all

COMPACT = LogConfig(cleanup_policy="compact", file_delete_delay_ms=0)


def put(log, key, value, clock, **kw):
    return log.append(encode_batch([(key, value)], timestamps=[clock.now], **kw))


def latest(log):
    out = {}
    for r in read_all(log)[1]:
        out[r.key] = r.value
    return out


# -- configuration ---------------------------------------------------------------------------


def test_cleanup_policy_and_compaction_keys_are_accepted_and_checked():
    config = LogConfig().with_overrides(
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.2",
            "min.compaction.lag.ms": "5",
            "max.compaction.lag.ms": "60000",
            "delete.retention.ms": "100",
            "segment.ms": "3600000",
        }
    )
    assert config.compact and config.delete
    assert config.min_cleanable_dirty_ratio == 0.2
    assert config.max_segment_ms == 60_000  # rolls in time for max.compaction.lag.ms
    assert LogConfig().with_overrides({"cleanup.policy": "compact"}).delete is False
    for bad in (
        {"cleanup.policy": "shred"},
        {"cleanup.policy": ""},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        {"delete.retention.ms": "soon"},
    ):
        with pytest.raises(ValueError):
            LogConfig().with_overrides(bad)


def test_broker_keys():
    config = LogConfig.from_broker_properties(
        {"log.cleanup.policy": "compact", "log.cleaner.delete.retention.ms": "7"}
    )
    assert config.compact and config.delete_retention_ms == 7
    cleaner = CleanerConfig.from_broker_properties(
        {"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "5", "log.cleaner.enable": "false"}
    )
    assert (cleaner.num_threads, cleaner.backoff_ms, cleaner.enable) == (2, 5, False)
    assert cleaner.max_keys_per_thread > 100_000
    with pytest.raises(ValueError):
        CleanerConfig.from_broker_properties({"log.cleaner.dedupe.buffer.size": "10"})


# -- append ----------------------------------------------------------------------------------


def test_a_null_key_is_refused_on_a_compacted_log_only(tmp_path):
    clock = Clock()
    log = Log(tmp_path / "c-0", COMPACT, clock=clock)
    for codec in (0, LZ4):
        raw = encode_batch([(b"k", b"v"), (None, b"v")], codec=codec)
        with pytest.raises(NullKeyOnCompactedTopicError, match="key") as err:
            log.append(raw)
        assert isinstance(err.value, InvalidRecordError)  # mapped to INVALID_RECORD
    assert log.log_end_offset == 0
    plain = Log(tmp_path / "d-0", LogConfig(), clock=clock)
    plain.append(encode_batch([(None, b"v")]))
    log.close()
    plain.close()


def test_retention_does_not_delete_a_compact_only_log(tmp_path):
    clock = Clock()
    config = LogConfig(cleanup_policy="compact", retention_ms=1, retention_bytes=1)
    log = Log(tmp_path / "c-0", config, clock=clock)
    put(log, b"k", b"v", clock)
    log.roll()
    put(log, b"k", b"w", clock)
    clock.now += 10_000
    assert log.delete_old_segments() == 0
    log.close()


# -- what is cleaned -------------------------------------------------------------------------


def test_offsets_codecs_and_producer_fields_survive(tmp_path):
    clock = Clock()
    log = Log(tmp_path / "c-0", COMPACT, clock=clock)
    log.append(
        encode_batch(
            [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], timestamps=[1, 2, 3], codec=ZSTD,
            producer_id=9, producer_epoch=2, base_sequence=0,
        )
    )  # fmt: skip
    put(log, b"a", b"2", clock)
    log.roll()
    put(log, b"z", b"active", clock)
    clean(log, clock.now)
    headers, records = read_all(log)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (1, b"b", b"1"), (2, b"c", b"1"), (3, b"a", b"2"), (4, b"z", b"active"),
    ]  # fmt: skip
    first = headers[0]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 2, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (9, 2, 0)
    assert first.compression == ZSTD
    assert [r.timestamp for r in records[:2]] == [2, 3]
    log.close()


def test_the_last_batch_of_a_producer_is_kept_empty(tmp_path):
    clock = Clock()
    log = Log(tmp_path / "c-0", COMPACT, clock=clock)
    put(log, b"a", b"1", clock, producer_id=5, producer_epoch=0, base_sequence=0)
    put(log, b"a", b"2", clock)
    log.roll()
    put(log, b"z", b"active", clock)
    clean(log, clock.now)
    headers, records = read_all(log)
    assert headers[0].record_count == 0 and headers[0].producer_id == 5
    assert [r.value for r in records] == [b"2", b"active"]
    log.close()
    again = Log(tmp_path / "c-0", COMPACT, recovery_point=3, clock=clock)
    put(again, b"a", b"3", clock, producer_id=5, producer_epoch=0, base_sequence=1)
    again.close()


def test_tombstones_go_after_delete_retention(tmp_path):
    clock = Clock()
    config = LogConfig(cleanup_policy="compact", delete_retention_ms=1000)
    log = Log(tmp_path / "c-0", config, clock=clock)
    put(log, b"a", b"1", clock)
    put(log, b"a", None, clock)
    log.roll()
    put(log, b"z", b"active", clock)
    clean(log, clock.now)  # stamps the tombstone's horizon: now + 1000
    assert [(r.key, r.value) for r in read_all(log)[1]] == [(b"a", None), (b"z", b"active")]
    assert read_all(log)[0][0].delete_horizon_ms == clock.now + 1000
    clock.now += 999
    clean(log, clock.now)
    assert (b"a", None) in [(r.key, r.value) for r in read_all(log)[1]]
    clock.now += 1
    clean(log, clock.now)
    assert [(r.key, r.value) for r in read_all(log)[1]] == [(b"z", b"active")]
    log.close()


def test_small_segments_merge_into_one(tmp_path):
    clock = Clock()
    log = Log(tmp_path / "c-0", COMPACT, clock=clock)
    for i in range(5):
        put(log, b"k%d" % i, b"v", clock)
        log.roll()
    put(log, b"z", b"active", clock)
    stats = clean(log, clock.now)
    assert stats.groups == [[0, 1, 2, 3, 4]]
    assert [s.base_offset for s in log.segments()] == [0, 5]
    small = LogConfig(cleanup_policy="compact", segment_bytes=200)
    log.config = small
    log.roll()
    assert len(clean(log, clock.now).groups) >= 1
    log.close()


def test_the_key_map_bound_cleans_in_several_passes(tmp_path):
    clock = Clock()
    log = Log(tmp_path / "c-0", COMPACT, clock=clock)
    for round_ in range(3):
        for i in range(10):
            put(log, b"k%d" % i, b"v%d" % round_, clock)
        log.roll()
    put(log, b"z", b"active", clock)
    stats = clean(log, clock.now, max_keys=4)
    assert 0 < stats.end_offset < 30
    checkpoint = stats.end_offset
    while checkpoint < 30:
        checkpoint = clean(log, clock.now, max_keys=4, checkpoint=checkpoint).end_offset
    assert latest(log) == {**{b"k%d" % i: b"v2" for i in range(10)}, b"z": b"active"}
    assert len(read_all(log)[1]) == 11
    log.close()


# -- which log, and how far ------------------------------------------------------------------


def test_dirty_ratio_selects_and_high_watermark_bounds(tmp_path):
    clock = Clock()
    log = Log(
        tmp_path / "c-0",
        LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.5),
        clock=clock,
    )
    for _ in range(4):
        put(log, b"a", b"x" * 100, clock)
        log.roll()
    put(log, b"z", b"active", clock)
    ltc = LogToClean.of(TP, log, None, clock.now)
    assert (ltc.first_dirty_offset, ltc.first_uncleanable_offset) == (0, 4)
    assert ltc.cleanable_ratio == 1.0 and ltc.should_clean
    end = clean(log, clock.now).end_offset
    assert end == 4
    put(log, b"a", b"y" * 100, clock)
    log.roll()
    ltc = LogToClean.of(TP, log, end, clock.now)
    assert 0 < ltc.cleanable_ratio < 0.6
    assert ltc.should_clean == (ltc.cleanable_ratio > 0.5)
    # Nothing at or above the high watermark is cleanable.
    log.set_replicated(True)
    log.high_watermark = 2
    assert cleanable_offsets(log, None, clock.now)[1] == 2
    assert (
        LogToClean.of(TP, log, None, clock.now).first_uncleanable_offset == 0
    )  # segment 0 holds 2
    log.close()


def test_min_compaction_lag_holds_back_recent_segments(tmp_path):
    clock = Clock()
    config = LogConfig(cleanup_policy="compact", min_compaction_lag_ms=1000)
    log = Log(tmp_path / "c-0", config, clock=clock)
    put(log, b"a", b"1", clock)
    log.roll()
    clock.now += 600
    put(log, b"a", b"2", clock)
    log.roll()
    put(log, b"z", b"active", clock)
    assert cleanable_offsets(log, None, clock.now)[1] == 0  # segment 0 is 0 ms old... too new
    clock.now += 500
    assert cleanable_offsets(log, None, clock.now)[1] == 1  # only segment 0 is old enough
    clean(log, clock.now)
    assert [r.value for r in read_all(log)[1]] == [b"1", b"2", b"active"]
    clock.now += 1000
    clean(log, clock.now, checkpoint=1)
    assert [r.value for r in read_all(log)[1]] == [b"2", b"active"]
    log.close()


def test_max_compaction_lag_forces_a_roll_and_a_cleaning(tmp_path):
    clock = Clock()
    config = LogConfig(
        cleanup_policy="compact", min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000
    )
    log = Log(tmp_path / "c-0", config, clock=clock)
    put(log, b"a", b"1", clock)
    put(log, b"a", b"2", clock)
    clock.now += 1001
    put(log, b"b", b"1", clock)  # the active segment is older than the lag: it rolls
    assert log.segment_count == 2
    ltc = LogToClean.of(TP, log, 0, clock.now)
    assert ltc.cleanable_ratio < 0.99 or ltc.clean_bytes == 0
    assert ltc.needs_compaction_now and ltc.should_clean
    clean(log, clock.now)
    assert [r.value for r in read_all(log)[1]] == [b"2", b"1"]
    log.close()


def test_consumer_offsets_like_workload_shrinks(tmp_path):
    clock = Clock()
    config = LogConfig(cleanup_policy="compact", segment_bytes=64 * 1024)
    log = Log(tmp_path / "__consumer_offsets-0", config, clock=clock)
    for i in range(20_000):
        key = b"group-%d/topic/%d" % (i % 5, i % 10)
        put(log, key, b"offset=%d" % i, clock)
    size = log.size_bytes
    clean(log, clock.now)
    log.purge_deleted_segments()
    assert log.size_bytes < size / 10
    assert len(latest(log)) == 10
    log.close()


# -- the background thread -------------------------------------------------------------------


def test_log_manager_cleans_in_the_background_beside_appends_and_reads(tmp_path):
    manager = LogManager(
        [tmp_path / "d"], LogConfig(cleanup_policy="compact", segment_bytes=4096,
                                    min_cleanable_dirty_ratio=0.1, file_delete_delay_ms=0),
        cleaner_config=CleanerConfig(backoff_ms=10),
        retention_check_ms=20,
    )  # fmt: skip
    manager.startup()
    manager.start_background()
    log = manager.get_or_create_log("compacted", 0)
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            try:
                _, records = read_all(log)
                offsets = [r.offset for r in records]
                assert offsets == sorted(set(offsets))
            except Exception as exc:  # reported below
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    expected = {}
    for i in range(6000):
        key, value = b"k%d" % (i % 50), b"v%d" % i
        log.append(encode_batch([(key, value)]))
        expected[key] = value
    import time

    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline
        and manager.cleaner.manager.checkpoint_of(TP._replace(topic="compacted")) is None
    ):
        time.sleep(0.05)
    stop.set()
    thread.join()
    assert not errors
    assert manager.cleaner.last_stats is not None
    assert manager.cleaner.last_stats.records_kept < manager.cleaner.last_stats.records_read
    assert latest(log) == expected
    manager.shutdown()
    assert not manager.cleaner._threads
    again = LogManager([tmp_path / "d"], LogConfig(cleanup_policy="compact"))
    again.startup()
    assert latest(again.get_log("compacted", 0)) == expected
    again.shutdown()
