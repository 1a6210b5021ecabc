"""Moving a partition's log between log dirs (``log_mover`` through ``LogManager``): what the
moved log holds equals the source (records, offsets, indexes, producer state, aborted
transactions, leader epochs), appends made during the copy end up in it, and a crash after
any step leaves exactly one complete log after a restart.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sluice.broker.log.errors import LogDirectoryError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.log_mover import LogMove, LogMoveCancelledError
from sluice.broker.log.records import encode_batch
from sluice.common.topic_partition import TopicPartition

from .compaction_helpers import read_all
from .helpers import batch

CONFIG = LogConfig(segment_bytes=2048, file_delete_delay_ms=0, index_interval_bytes=256)
TP = TopicPartition("moving", 0)


class Crash(Exception):
    pass


def start(tmp_path: Path) -> tuple[LogManager, Path, Path]:
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    manager = LogManager([a, b], CONFIG)
    manager.startup()
    return manager, a, b


def fill(log: Log, rounds: int = 6) -> None:
    """Plain batches, an idempotent producer, an aborted and a committed transaction, in
    several segments, two leader epochs, and a log start moved by DeleteRecords."""
    for r in range(rounds):
        log.append(batch(3, tag=b"r%d" % r, value_size=300), leader_epoch=r // 3)
        log.append(
            encode_batch(
                [(b"idem", b"x%d" % r)], timestamps=[1000 + r], producer_id=7,
                producer_epoch=0, base_sequence=r,
            ),
            leader_epoch=r // 3,
        )  # fmt: skip
        pid = 100 + r
        log.append(
            encode_batch(
                [(b"t", b"txn%d" % r)], timestamps=[1000 + r], producer_id=pid,
                producer_epoch=0, base_sequence=0, transactional=True,
            ),
            leader_epoch=r // 3,
        )  # fmt: skip
        log.append_marker(pid, 0, commit=r % 2 == 0, leader_epoch=r // 3)
    log.increment_log_start_offset(2)
    # A loaded log's epoch cache starts at the log start (Kafka's truncateFromStart, which
    # Sluice's Log runs at the next retention pass): the source's, as the moved one's.
    log.leader_epochs.truncate_from_start(log.log_start_offset)


def state(log: Log) -> dict[str, object]:
    """Everything a reader or writer of the partition can observe."""
    headers, records = read_all(log)
    producers = {
        pid: (e.epoch, e.txn_first_offset, e.coordinator_epoch, list(e.batches))
        for pid, e in log.producer_state.entries.items()
    }
    segments = log.segments()
    return {
        "records": [(r.offset, r.key, r.value) for r in records],
        "batches": [(h.base_offset, h.partition_leader_epoch) for h in headers],
        "offsets": (log.log_start_offset, log.high_watermark, log.log_end_offset),
        "aborted": log.collect_aborted_transactions(0, log.log_end_offset),
        "producers": producers,
        "epochs": list(log.leader_epochs.entries),
        "bases": [s.base_offset for s in segments],
        "lookups": [s.translate_offset(s.base_offset + 1) for s in segments],
        "by_time": log.offset_for_timestamp(1003),
    }


def partition_dirs(*log_dirs: Path) -> list[Path]:
    return sorted(d / e for d in log_dirs for e in os.listdir(d) if e.startswith(TP.dir_name))


def test_move_keeps_everything_and_survives_a_restart(tmp_path: Path) -> None:
    manager, a, b = start(tmp_path)
    log = manager.get_or_create_log(TP.topic, TP.partition)
    fill(log)
    assert log.segment_count > 3 and log.log_dir == a
    before = state(log)
    assert manager.move_log(TP, b) is True
    assert manager.get_log(TP.topic, TP.partition) is log  # the same object keeps serving
    assert log.directory == b / TP.dir_name and manager.dir_of(TP.topic, TP.partition) == b
    assert partition_dirs(a, b) == [b / TP.dir_name]  # no -future, no -delete left
    assert state(log) == before
    assert manager.move_log(TP, b) is False  # already there
    log.append(batch(2, tag=b"after"), leader_epoch=2)
    after = state(log)
    manager.shutdown()
    again = LogManager([a, b], CONFIG)
    again.startup()
    assert again.dir_of(TP.topic, TP.partition) == b
    reloaded = again.get_log(TP.topic, TP.partition)
    assert reloaded is not None and state(reloaded) == after
    again.shutdown()


def test_move_rejects_unknown_dirs_and_partitions(tmp_path: Path) -> None:
    manager, a, _ = start(tmp_path)
    manager.get_or_create_log(TP.topic, TP.partition)
    with pytest.raises(LogDirectoryError):
        manager.move_log(TP, tmp_path / "elsewhere")
    with pytest.raises(KeyError):
        manager.move_log(TopicPartition("absent", 0), a)
    assert manager.move_log(TP, a) is False
    manager.shutdown()


def test_appends_during_the_copy_end_up_in_the_moved_log(tmp_path: Path) -> None:
    manager, a, b = start(tmp_path)
    log = manager.get_or_create_log(TP.topic, TP.partition)
    fill(log, rounds=3)
    stop = threading.Event()
    appended: list[int] = []

    def produce() -> None:
        i = 0
        while not stop.is_set() and i < 5000:
            info = log.append(batch(2, tag=b"live%d" % i))
            appended.append(info.first_offset)
            i += 1

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        while len(appended) < 50:  # bounded by the writer's own count
            if not writer.is_alive():
                break
            threading.Event().wait(0.001)
        manager.move_log(TP, b)
        moved_at = len(appended)
        while len(appended) < moved_at + 50 and writer.is_alive():
            threading.Event().wait(0.001)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert log.log_dir == b and len(appended) > moved_at
    offsets = {r.offset for r in read_all(log)[1]}
    assert all(o in offsets and o + 1 in offsets for o in appended)
    before = state(log)
    manager.shutdown()
    again = LogManager([a, b], CONFIG)
    again.startup()
    reloaded = again.get_log(TP.topic, TP.partition)
    assert reloaded is not None and state(reloaded) == before
    assert partition_dirs(a, b) == [b / TP.dir_name]
    again.shutdown()


def test_appends_and_retention_between_passes(tmp_path: Path) -> None:
    """The catch-up copies what changed since the first pass, and drops what retention
    removed from the source meanwhile."""
    manager, a, b = start(tmp_path)
    log = manager.get_or_create_log(TP.topic, TP.partition)
    fill(log)

    def meanwhile(step: str) -> None:
        if step == "copied":
            for r in range(5):
                log.append(batch(4, tag=b"late%d" % r), leader_epoch=3)
            log.increment_log_start_offset(log.segments()[2].base_offset)
            assert log.delete_old_segments() == 2
            log.purge_deleted_segments(force=True)

    move = LogMove(TP, log, b, manager._open_moved, on_step=meanwhile)
    move.run()
    assert log.log_dir == b
    expected = state(log)
    assert sorted(os.listdir(b / TP.dir_name)) == sorted(
        e for e in os.listdir(b / TP.dir_name) if not e.endswith(".deleted")
    )
    for segment in log.segments():
        assert segment.log_path.parent == b / TP.dir_name
    log.close()
    reopened = Log(b / TP.dir_name, CONFIG, log_start_offset=log.log_start_offset)
    assert state(reopened) == expected
    reopened.close()


def test_a_cancelled_move_changes_nothing(tmp_path: Path) -> None:
    manager, a, b = start(tmp_path)
    log = manager.get_or_create_log(TP.topic, TP.partition)
    fill(log)
    before = state(log)
    move = LogMove(TP, log, b, manager._open_moved)
    move.cancel("the test says so")
    with pytest.raises(LogMoveCancelledError):
        move.run()
    assert partition_dirs(a, b) == [a / TP.dir_name]
    assert state(log) == before and log.log_dir == a
    manager.shutdown()


@pytest.mark.parametrize("step", ["copied", "synced", "committed", "renamed", "switched"])
def test_a_crash_after_any_step_leaves_one_complete_log(tmp_path: Path, step: str) -> None:
    manager, a, b = start(tmp_path)
    log = manager.get_or_create_log(TP.topic, TP.partition)
    fill(log)
    log.flush()
    manager.checkpoint()
    expected = state(log)

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    move = LogMove(
        TP, log, b, manager._open_moved, on_step=crash,
        committing=lambda: manager._committing(TP, log, b),
    )  # fmt: skip
    with pytest.raises(Crash):
        move.run()
    # What a kill -9 leaves: the files as they are, no flush, no close, no checkpoint.
    for segment in log.segments() + [s for _, s in log._deleted]:
        segment.close()
    again = LogManager([a, b], CONFIG)
    again.startup()
    home = a if step in ("copied", "synced") else b
    assert partition_dirs(a, b) == [home / TP.dir_name]
    assert again.dir_of(TP.topic, TP.partition) == home
    reloaded = again.get_log(TP.topic, TP.partition)
    assert reloaded is not None
    assert state(reloaded) == expected
    again.shutdown()
