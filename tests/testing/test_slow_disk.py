"""``SlowDisk``: a FUSE passthrough whose fsync waits as long as the control says; everything
else passes through to the backing directory unchanged."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.ci import in_ci
from sluice.testing.slow_disk import SlowDisk, slow_disk_missing


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SlowDisk]:
    missing = slow_disk_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"a FUSE slow disk is needed but {missing}", pytrace=False)
        pytest.skip(f"a FUSE slow disk is needed but {missing}")
    with SlowDisk(tmp_path / "backing", tmp_path / "mnt") as d:
        yield d


def timed_fsync(fd: int) -> float:
    started = time.monotonic()
    os.fsync(fd)
    return time.monotonic() - started


def test_passthrough_and_delayed_fsync(disk: SlowDisk) -> None:
    assert os.path.ismount(disk.mountpoint)
    (disk.mountpoint / "topic-0").mkdir()
    path = disk.mountpoint / "topic-0" / "00000000000000000000.log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, b"hello, disk", 0) == 11
        assert os.pread(fd, 5, 0) == b"hello"  # read through the descriptor it was made with
        assert timed_fsync(fd) < 0.25
        disk.set_delay(0.4)
        assert timed_fsync(fd) >= 0.4
        disk.set_delay(0.0)
        assert timed_fsync(fd) < 0.25
        os.ftruncate(fd, 5)
    finally:
        os.close(fd)
    assert (disk.backing / "topic-0" / "00000000000000000000.log").read_bytes() == b"hello"
    path.rename(path.with_suffix(".deleted"))
    assert sorted(os.listdir(disk.mountpoint / "topic-0")) == ["00000000000000000000.deleted"]
    path.with_suffix(".deleted").unlink()
    (disk.mountpoint / "topic-0").rmdir()
    assert os.listdir(disk.backing) == []
    disk.close()
    assert not os.path.ismount(disk.mountpoint)
