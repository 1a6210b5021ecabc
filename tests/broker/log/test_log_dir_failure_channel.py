"""Storage errors on each write path of the log (append, roll, index entry, flush, checkpoint),
injected by a fault-injecting ``os`` for one module: each must answer KAFKA_STORAGE_ERROR,
take the log dir offline with one log line, leave nothing of the failed write visible, and
come back — by the probe (lack of space) or by a restart (an fsync or I/O error) — with every
acknowledged batch."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.broker.log import checkpoint, index_file, log_segment, producer_state
from sluice.broker.log.errors import LogDirFailureError, LogDirOfflineError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_dir_failure_channel import LogDirFailureChannel
from sluice.broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from sluice.broker.log.records import decode_batch
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.error_mapping import code_for

from .helpers import batch


class FaultyOs:
    """Stands in for ``os`` in one module: the calls named in ``calls`` fail with ``err`` on
    files whose name ends with ``suffix`` (a ``pwrite`` with ``partial`` writes half first,
    as a filling disk does); everything else is the real ``os``."""

    def __init__(
        self, calls: set[str], suffix: str, err: int = errno.ENOSPC, *, partial: bool = False
    ) -> None:
        self.calls, self.suffix, self.err, self.partial = calls, suffix, err, partial
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _fail(self) -> OSError:
        self.failures += 1
        return OSError(self.err, os.strerror(self.err))

    def _hit(self, call: str, fd: int) -> bool:
        return call in self.calls and os.readlink(f"/proc/self/fd/{fd}").endswith(self.suffix)

    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        if self._hit("pwrite", fd):
            if self.partial and len(data) > 1:
                self.partial = False
                return os.pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise self._fail()
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        if self._hit("fsync", fd):
            raise self._fail()
        os.fsync(fd)

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        if "open" in self.calls and str(path).endswith(self.suffix) and not os.path.exists(path):
            raise self._fail()
        return os.open(path, flags, mode)

    def replace(self, src: Any, dst: Any) -> None:
        if "replace" in self.calls and str(src).endswith(self.suffix):
            raise self._fail()
        os.replace(src, dst)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    m = LogManager([tmp_path / "d"], LogConfig(index_interval_bytes=1, segment_bytes=4096))
    m.startup()
    yield m
    m.shutdown()


def values(lg: Log) -> list[bytes]:
    """Every record value in the log, in offset order."""
    info = lg.read(lg.log_start_offset, 1 << 30)
    if info.slice is None:
        return []
    data = info.slice.read()
    out, position = [], 0
    while position < len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        out += [r.value or b"" for r in decode_batch(data[position : position + size])]
        position += size
    return out


def append_tagged(lg: Log, tag: str) -> int:
    return lg.append(batch(1, tag=tag.encode())).first_offset


def reopened(tmp_path: Path) -> Log:
    """The partition as a restarted broker loads it (clean or not, as the dir says)."""
    again = LogManager([tmp_path / "d"], LogConfig(index_interval_bytes=1, segment_bytes=4096))
    again.startup()
    lg = again.get_log("t", 0)
    assert lg is not None
    return lg


def check_refused_then_back(manager: LogManager, lg: Log, exc: LogDirFailureError) -> None:
    """The failure's client-visible code, the refusal while offline, then the probe."""
    assert code_for(exc) is Errors.KAFKA_STORAGE_ERROR
    assert manager.dir_failures.is_offline(lg.log_dir)
    with pytest.raises(LogDirOfflineError) as refused:
        append_tagged(lg, "refused")
    assert code_for(refused.value) is Errors.KAFKA_STORAGE_ERROR
    assert manager.probe_offline_dirs() == [lg.log_dir]
    assert not manager.dir_failures.is_offline(lg.log_dir)


def test_a_partial_append_is_cut_back_and_the_dir_comes_back(manager, tmp_path, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    for i in range(3):
        append_tagged(lg, f"ok{i}")
    size = lg.active_segment.size
    monkeypatch.setattr(log_segment, "os", FaultyOs({"pwrite"}, ".log", partial=True))
    with pytest.raises(LogDirFailureError) as failed:
        append_tagged(lg, "torn")
    assert "No space left on device" in str(failed.value)
    assert os.path.getsize(lg.active_segment.log_path) == size == lg.active_segment.size
    assert lg.log_end_offset == 3
    monkeypatch.undo()
    assert [v.split(b"-")[1].rstrip(b".") for v in values(lg)] == [b"ok0", b"ok1", b"ok2"]
    check_refused_then_back(manager, lg, failed.value)
    assert append_tagged(lg, "after") == 3
    manager.flush_all()
    assert [v.split(b"-")[1].rstrip(b".") for v in values(reopened(tmp_path))] == [
        b"ok0", b"ok1", b"ok2", b"after",
    ]  # fmt: skip


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_an_index_write_failure_undoes_the_append(manager, tmp_path, monkeypatch, suffix):
    lg = manager.get_or_create_log("t", 0)
    for i in range(3):
        lg.append(batch(1, ts=1000 + i, tag=b"ok"))
    segment = lg.active_segment
    before = (segment.size, len(segment.offset_index), len(segment.time_index))
    monkeypatch.setattr(index_file, "os", FaultyOs({"pwrite"}, suffix))
    with pytest.raises(LogDirFailureError) as failed:
        lg.append(batch(1, ts=5000, tag=b"lost"))
    assert suffix in str(failed.value)  # the file that failed is named
    assert (segment.size, len(segment.offset_index), len(segment.time_index)) == before
    assert os.path.getsize(segment.log_path) == segment.size
    monkeypatch.undo()
    check_refused_then_back(manager, lg, failed.value)
    assert lg.append(batch(1, ts=6000)).first_offset == 3
    lg.active_segment.sanity_check()
    assert len(values(reopened(tmp_path))) == 4


def test_a_failed_roll_changes_nothing(manager, tmp_path, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    while lg.segment_count == 1:
        append_tagged(lg, "fill")
    end, segments = lg.log_end_offset, lg.segment_count
    active = lg.active_segment.size
    # The next append rolls only once the active segment is nearly full.
    while lg.active_segment.size + len(batch(1, tag=b"x")) <= 4096:
        append_tagged(lg, "fill")
    end, active = lg.log_end_offset, lg.active_segment.size
    monkeypatch.setattr(log_segment, "os", FaultyOs({"open"}, ".log"))
    with pytest.raises(LogDirFailureError) as failed:
        append_tagged(lg, "x")
    monkeypatch.undo()
    assert (lg.log_end_offset, lg.segment_count, lg.active_segment.size) == (
        end, segments, active,
    )  # fmt: skip
    names = sorted(p.name for p in lg.directory.glob("*.log"))
    assert len(names) == segments
    check_refused_then_back(manager, lg, failed.value)
    assert append_tagged(lg, "x") == end
    assert lg.segment_count == segments + 1


def test_a_failed_producer_snapshot_on_roll_leaves_no_file(manager, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    append_tagged(lg, "a")
    monkeypatch.setattr(producer_state, "os", FaultyOs({"replace"}, ".tmp"))
    with pytest.raises(LogDirFailureError) as failed:
        lg.roll()
    monkeypatch.undo()
    assert lg.segment_count == 1
    assert not list(lg.directory.glob("*.tmp"))
    check_refused_then_back(manager, lg, failed.value)
    assert lg.roll().base_offset == 1


def test_a_failed_fsync_keeps_the_dir_offline_until_restart(manager, tmp_path, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    for i in range(3):
        append_tagged(lg, f"ok{i}")
    monkeypatch.setattr(log_segment, "os", FaultyOs({"fsync"}, ".log", errno.EIO))
    with pytest.raises(LogDirFailureError) as failed:
        lg.flush()
    monkeypatch.undo()
    assert code_for(failed.value) is Errors.KAFKA_STORAGE_ERROR
    assert lg.recovery_point == 0  # nothing counts as flushed
    with pytest.raises(LogDirOfflineError):
        lg.flush()  # no later fsync may "succeed" for pages the kernel dropped
    with pytest.raises(LogDirOfflineError):
        append_tagged(lg, "refused")
    assert manager.probe_offline_dirs() == []
    assert len(values(lg)) == 3  # reads go on
    manager.shutdown()
    assert not (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()  # the restart re-validates
    again = reopened(tmp_path)
    assert len(values(again)) == 3
    assert again.append(batch(1)).first_offset == 3


def test_eio_on_append_needs_a_restart(manager, tmp_path, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    append_tagged(lg, "ok")
    monkeypatch.setattr(log_segment, "os", FaultyOs({"pwrite"}, ".log", errno.EIO))
    with pytest.raises(LogDirFailureError):
        append_tagged(lg, "bad")
    monkeypatch.undo()
    assert manager.probe_offline_dirs() == []
    with pytest.raises(LogDirOfflineError):
        append_tagged(lg, "refused")
    manager.shutdown()
    assert len(values(reopened(tmp_path))) == 1


def test_a_failed_checkpoint_keeps_the_old_one(manager, tmp_path, monkeypatch):
    lg = manager.get_or_create_log("t", 0)
    append_tagged(lg, "a")
    lg.flush()
    manager.checkpoint()
    path = tmp_path / "d" / "recovery-point-offset-checkpoint"
    old = path.read_text()
    append_tagged(lg, "b")
    lg.flush()
    monkeypatch.setattr(checkpoint, "os", FaultyOs({"fsync"}, ".tmp"))
    manager.checkpoint()  # no exception: the channel has it
    monkeypatch.undo()
    assert path.read_text() == old
    assert not list((tmp_path / "d").glob("*.tmp"))
    with pytest.raises(LogDirOfflineError) as refused:
        append_tagged(lg, "refused")
    assert code_for(refused.value) is Errors.KAFKA_STORAGE_ERROR
    assert manager.probe_offline_dirs() == [lg.log_dir]
    manager.checkpoint()
    assert path.read_text() != old


def test_one_log_line_per_event(manager, monkeypatch, caplog):
    lg = manager.get_or_create_log("t", 0)
    append_tagged(lg, "ok")
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(log_segment, "os", FaultyOs({"pwrite"}, ".log"))
    for _ in range(5):
        with pytest.raises((LogDirFailureError, LogDirOfflineError)):
            append_tagged(lg, "x")
    manager.flush_all()
    manager.checkpoint()
    monkeypatch.undo()
    manager.probe_offline_dirs()
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelno for r in loud] == [logging.ERROR, logging.WARNING], loud
    assert "is offline: append failed" in loud[0].getMessage()
    assert "No space left on device" in loud[0].getMessage()
    assert loud[0].exc_info is None  # a line, not a traceback
    assert "back online" in loud[1].getMessage()


def test_new_partitions_avoid_an_offline_dir(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs)
    m.startup()
    m.dir_failures.fail(dirs[0].resolve(), "append", OSError(errno.ENOSPC, "full"))
    for p in range(3):
        m.get_or_create_log("t", p)
    assert {m.dir_of("t", p) for p in range(3)} == {dirs[1].resolve()}
    m.dir_failures.fail(dirs[1].resolve(), "append", OSError(errno.EIO, "bad"))
    m.get_or_create_log("t", 8)  # empty: it may go to a dir that only lacks space
    assert m.dir_of("t", 8) == dirs[0].resolve()
    m.dir_failures.fail(dirs[0].resolve(), "flush", OSError(errno.EIO, "bad"))
    with pytest.raises(LogDirOfflineError):
        m.get_or_create_log("t", 9)
    m.shutdown()


def test_the_channel_escalates_and_tells_listeners(tmp_path):
    channel = LogDirFailureChannel()
    events: list[tuple[Path, bool | None]] = []
    channel.add_listener(lambda d, f: events.append((d, None if f is None else f.retryable)))
    channel.fail(tmp_path, "append", OSError(errno.ENOSPC, "full"))
    channel.fail(tmp_path, "append", OSError(errno.ENOSPC, "full"))  # not a new event
    channel.fail(tmp_path, "flush", OSError(errno.ENOSPC, "full"), until_restart=True)
    assert not channel.mark_online(tmp_path)  # until restart now
    assert events == [(tmp_path, True), (tmp_path, False)]
