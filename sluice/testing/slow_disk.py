"""``SlowDisk``: a directory whose ``fsync`` takes as long as a test says — a FUSE passthrough
filesystem mounted over a broker's log dir, so the soak's "slow disk" is a slow disk.

How it works: ``python -m sluice.testing.slow_disk <backing> <mountpoint> <control>`` mounts a
FUSE filesystem at ``mountpoint`` that passes every call through to the same path under
``backing`` (a plain directory on the real disk), except ``fsync`` and ``fsyncdir``: those
first sleep for the number of seconds written in the ``control`` file (read at each call;
``0`` or a missing file: no delay), then fsync the backing file. Reads and writes go through
the page cache as on any filesystem, so what an fsync has to wait for is real.

:class:`SlowDisk` runs that process (its output in ``<control>.out``), waits for the mount,
and sets the delay (:meth:`SlowDisk.set_delay`); :meth:`SlowDisk.close` unmounts (lazily, as
the broker may still hold files) and stops it. A FUSE mount made before a broker starts is seen
inside the broker's network namespace too (``ip netns exec`` copies the mount table).

Why this and not something else: ``dm-delay`` needs a block device and delays every write;
cgroup v1 ``blkio`` throttling does not reach buffered writeback; an ``LD_PRELOAD`` shim would
need a C compiler at test time. FUSE needs ``/dev/fuse`` (the ``fuse`` kernel module) and
libfuse: Debian's ``fuse3`` package (``make system-deps``) and PyPI's ``mfusepy`` — the
maintained successor of ``fusepy`` (whose last release was 2018), pure ``ctypes`` over
libfuse 3, so nothing is compiled (``pyfuse3`` would need Cython and libfuse3's headers).
:func:`slow_disk_missing` says what is missing here, for callers to skip (or fail under CI).

Thread safety: :class:`SlowDisk` is used from one thread; the FUSE process serves calls on
libfuse's threads, each operation independent (a sleeping fsync holds up only its caller).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

MOUNT_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class SlowDiskError(RuntimeError):
    """The FUSE filesystem could not be mounted (the process's output says why)."""


def slow_disk_missing() -> str | None:
    """Why a :class:`SlowDisk` cannot be mounted here, or None if it can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no fuse kernel module)"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "not root and no fusermount3 (Debian's fuse3)"
    try:
        import mfusepy  # noqa: F401  (loads libfuse through ctypes)
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse 3 ({exc}); `make system-deps` installs fuse3"
    return None


class SlowDisk:
    """A FUSE passthrough of ``backing`` at ``mountpoint`` whose fsync waits; see the module
    docstring."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing = Path(backing).absolute()
        self.mountpoint = Path(mountpoint).absolute()
        self.control = self.backing.parent / f".{self.backing.name}.fsync-delay"
        self.output = self.control.with_suffix(".out")
        self._process: subprocess.Popen[bytes] | None = None

    def open(self) -> Self:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.set_delay(0.0)
        with self.output.open("ab") as out:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "sluice.testing.slow_disk",
                 str(self.backing), str(self.mountpoint), str(self.control)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mountpoint):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                tail = self.output.read_text(errors="replace")[-2000:]
                raise SlowDiskError(
                    f"expected a FUSE mount at {self.mountpoint} within {MOUNT_TIMEOUT:g}s, "
                    f"found none; its output:\n{tail}"
                )
            time.sleep(0.05)
        return self

    def set_delay(self, seconds: float) -> None:
        """Every fsync from now on waits ``seconds`` first (0: none)."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(f"{seconds}\n", encoding="ascii")
        tmp.replace(self.control)

    def close(self) -> None:
        """Unmount (lazily) and stop the FUSE process. Idempotent."""
        with contextlib.suppress(OSError):
            self.set_delay(0.0)
        if os.path.ismount(self.mountpoint):
            subprocess.run(
                ["umount", "-l", str(self.mountpoint)], check=False, capture_output=True,
                timeout=STOP_TIMEOUT,
            )  # fmt: skip
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# -- the FUSE process ---------------------------------------------------------------------------


class _PassthroughCalls:
    """The filesystem's operations: each passes through to the same path under ``backing``,
    fsync and fsyncdir after the delay the ``control`` file holds. A mix-in, put before
    ``mfusepy.Operations`` by :func:`_passthrough` (mfusepy loads libfuse when imported, which
    only the FUSE process needs); mfusepy sets up with libfuse only the operations a subclass
    overrides, so these and no others. Called on libfuse's threads; holds nothing that
    changes.
    """

    use_ns = True

    def __init__(self, backing: str, control: str) -> None:
        self.backing = backing
        self.control = control

    def _full(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    def _delay(self) -> float:
        """The seconds the control file says an fsync waits (0 when missing or unreadable)."""
        try:
            with open(self.control, encoding="ascii") as f:
                return max(0.0, float(f.read().strip() or 0))
        except (OSError, ValueError):
            return 0.0

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            import mfusepy

            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY | os.O_TRUNC) -> int:
        return os.open(self._full(path), flags | os.O_CREAT, mode)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        wait = self._delay()
        if wait:
            time.sleep(wait)
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        wait = self._delay()
        if wait:
            time.sleep(wait)
        fd = os.open(self._full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.lstat(self._full(path))
        keys = ("st_atime_ns", "st_ctime_ns", "st_gid", "st_mode", "st_mtime_ns",
                "st_nlink", "st_size", "st_uid", "st_blocks", "st_ino")  # fmt: skip
        out = {k.removesuffix("_ns"): getattr(st, k) for k in keys}
        return out

    def link(self, target: str, source: str) -> int:
        os.link(self._full(source), self._full(target))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def open(self, path: str, flags: int) -> int:
        return os.open(self._full(path), flags)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._full(old), self._full(new))
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")  # fmt: skip
        return {k: getattr(sv, k) for k in keys}

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._full(target))
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._full(path))
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._full(path))
        else:
            os.utime(self._full(path), ns=times)
        return 0

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return os.pwrite(fh, data, offset)


def _passthrough(backing: str, control: str) -> Any:
    """The mfusepy ``Operations`` of the filesystem (built here: mfusepy loads libfuse when
    imported, which only the FUSE process needs)."""
    import mfusepy

    class Passthrough(_PassthroughCalls, mfusepy.Operations):  # type: ignore[misc]
        pass

    return Passthrough(backing, control)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m sluice.testing.slow_disk BACKING MOUNTPOINT CONTROL",
              file=sys.stderr)  # fmt: skip
        return 2
    import mfusepy

    backing, mountpoint, control = argv
    # foreground: this process is the filesystem; multithreaded: a sleeping fsync holds up
    # only its own caller.
    mfusepy.FUSE(_passthrough(os.path.abspath(backing), control), mountpoint, foreground=True,
                 nothreads=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
