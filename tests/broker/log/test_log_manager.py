import time

import pytest

from sluice.broker.log.checkpoint import CorruptCheckpointError, OffsetCheckpoint
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from sluice.common.topic_partition import InvalidTopicError, TopicPartition, validate_topic

from .helpers import batch


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = LogManager(dirs)
    manager.startup()
    for p in range(6):
        manager.get_or_create_log("events", p)
    counts = {d.name: len(list(d.iterdir())) for d in dirs}
    # each dir: 2 partitions + (no checkpoint files yet)
    assert sorted(counts.values()) == [2, 2, 2]
    assert manager.dir_of("events", 0) == dirs[0].resolve()
    manager.shutdown()


def test_restart_after_clean_shutdown(tmp_path):
    manager = LogManager([tmp_path / "d"])
    manager.startup()
    log = manager.get_or_create_log("events", 0)
    for _ in range(5):
        log.append(batch(2))
    manager.shutdown()
    assert (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()
    checkpoint = OffsetCheckpoint(tmp_path / "d" / "recovery-point-offset-checkpoint").read()
    assert checkpoint == {("events", 0): 10}
    again = LogManager([tmp_path / "d"])
    again.startup()
    assert again.clean_shutdown[(tmp_path / "d").resolve()]
    assert not (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()  # a crash now is unclean
    assert again.get_log("events", 0).log_end_offset == 10
    again.shutdown()


def test_restart_after_a_crash_recovers(tmp_path):
    manager = LogManager([tmp_path / "d"])
    manager.startup()
    log = manager.get_or_create_log("events", 0)
    for _ in range(5):
        log.append(batch(2))
    segment = log.active_segment
    # "kill -9": no shutdown, and the last batch is torn.
    import os

    os.truncate(segment.log_path, segment.size - 3)
    again = LogManager([tmp_path / "d"])
    again.startup()
    assert not again.clean_shutdown[(tmp_path / "d").resolve()]
    assert again.get_log("events", 0).log_end_offset == 8
    assert again.recovered_bytes_cut == len(batch(2)) - 3
    again.shutdown()


def test_corrupt_checkpoint_falls_back_to_full_recovery(tmp_path):
    manager = LogManager([tmp_path / "d"])
    manager.startup()
    manager.get_or_create_log("events", 0).append(batch(3))
    manager.shutdown()
    (tmp_path / "d" / "recovery-point-offset-checkpoint").write_text("garbage\n")
    again = LogManager([tmp_path / "d"])
    again.startup()
    assert again.get_log("events", 0).log_end_offset == 3
    again.shutdown()


def test_delete_log(tmp_path):
    manager = LogManager([tmp_path / "d"])
    manager.startup()
    manager.get_or_create_log("events", 0).append(batch(1))
    assert manager.delete_log("events", 0)
    assert not manager.delete_log("events", 0)
    assert manager.get_log("events", 0) is None
    assert [p.name for p in (tmp_path / "d").iterdir() if p.is_dir()] == []
    manager.shutdown()


def test_background_flusher_honours_flush_messages(tmp_path):
    manager = LogManager(
        [tmp_path / "d"], LogConfig(flush_messages=1), flush_check_ms=60_000, checkpoint_ms=60_000
    )
    manager.startup()
    manager.start_background()
    log = manager.get_or_create_log("events", 0)
    log.append(batch(1))
    deadline = time.monotonic() + 10
    while log.recovery_point < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.recovery_point == 1  # woken by the append, not by the 60 s timer
    manager.shutdown()


def test_topic_names_follow_kafkas_rules(tmp_path):
    for good in ("a", "page_views", "a.b-c_1", "x" * 249):
        assert validate_topic(good) == good
    for bad in ("", ".", "..", "x" * 250, "a/b", "../etc", "a b", "tópico"):
        with pytest.raises(InvalidTopicError):
            validate_topic(bad)
    manager = LogManager([tmp_path / "d"])
    manager.startup()
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("../escape", 0)
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("ok", -1)
    manager.shutdown()
    assert TopicPartition.from_dir_name("page-views-12") == ("page-views", 12)
    with pytest.raises(InvalidTopicError):
        TopicPartition.from_dir_name("nopartition")


def test_checkpoint_format_and_errors(tmp_path):
    cp = OffsetCheckpoint(tmp_path / "cp")
    assert cp.read() == {}
    cp.write({("b", 1): 5, ("a", 0): 7})
    assert (tmp_path / "cp").read_text() == "0\n2\na 0 7\nb 1 5\n"
    assert cp.read() == {("a", 0): 7, ("b", 1): 5}
    for text, message in [
        ("1\n0\n", "expected version 0"),
        ("0\nx\n", "entry count"),
        ("0\n2\na 0 1\n", "expected 2 entries"),
        ("0\n1\na zero 1\n", "topic partition offset"),
    ]:
        (tmp_path / "cp").write_text(text)
        with pytest.raises(CorruptCheckpointError, match=message):
            cp.read()


def test_log_config_from_broker_and_topic_keys():
    cfg = LogConfig.from_broker_properties(
        {
            "log.segment.bytes": "1000",
            "log.retention.hours": "1",
            "log.retention.minutes": "2",
            "log.flush.interval.messages": "1",
            "unrelated.key": "x",
        }
    )
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.flush_messages) == (1000, 120_000, 1)
    topic = cfg.with_overrides({"retention.ms": "-1", "read.flushed.only": "true"})
    assert topic.retention_ms == -1 and topic.read_flushed_only and topic.segment_bytes == 1000
    with pytest.raises(ValueError, match="unknown topic config"):
        cfg.with_overrides({"retention.msx": "1"})
    with pytest.raises(ValueError, match="expected an integer"):
        cfg.with_overrides({"retention.ms": "soon"})
    with pytest.raises(ValueError, match="segment.bytes"):
        LogConfig(segment_bytes=1 << 40)
