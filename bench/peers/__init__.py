"""The systems Sluice is measured against in the paper's §5 experiments, and what they share.

One module per peer. Each has a server class (install when missing, start on 127.0.0.1 with its
own temporary data directory, wait until it answers, stop and clean up) and a driver with the
same three operations the experiments need:

``produce(queue, count, mode, sampler) -> seconds``
    send ``count`` 200-byte messages in ``mode`` (one of the driver's ``MODES``) and return when
    every one is acknowledged; feed the acknowledged count to ``sampler`` as it grows.
``consume(queue, count, timeout, min_seconds=0) -> Read``
    read ``queue`` from the start with about 1,000 messages (200 KB) per request until ``count``
    messages arrived or ``timeout`` seconds passed, whichever is first: never hangs. Where a
    read leaves the messages in place (the Kafka-protocol systems: ``REREADABLE``), it reads
    them again from the start until ``min_seconds`` have passed; RabbitMQ and ActiveMQ remove
    what they deliver, so they read once.
``first_message(queue, timeout) -> (how, seconds)``
    seconds from subscribing to the first message delivered; ``how`` names the way.

The servers run in their own process group (``start_new_session``) so ``stop()`` can end the
broker and everything it forked; every start is bounded in time and a failed start stops what
it began. Nothing listens beyond loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

from sluice.testing.net import WaitTimeoutError, wait_until

MESSAGE = 200  # bytes of payload per message, as in the paper
PEERS_DIR = Path("build/peers")  # installed binaries that do not come from apt (Tansu)

_apt_updated = False


def deb_version(package: str) -> str | None:
    """The installed version of a Debian package, or None."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status} ${Version}", package],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0 or "install ok installed" not in out.stdout:
        return None
    return out.stdout.split()[-1]


def apt_install(packages: Sequence[str]) -> None:
    """``apt-get install`` the Debian packages that are missing (``apt-get update`` once).

    Debian's postinst would start the system-wide service on its default ports; a temporary
    ``policy-rc.d`` that denies every start keeps it from doing so (unless one already exists).
    The harness starts its own instances on loopback instead.
    """
    global _apt_updated
    missing = [p for p in packages if deb_version(p) is None]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    policy = Path("/usr/sbin/policy-rc.d")
    ours = False
    if os.geteuid() == 0 and not policy.exists():
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        ours = True
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if not _apt_updated:
            print("  apt-get update", flush=True)
            subprocess.run([*sudo, "apt-get", "update", "-qq"], env=env, check=True)
            _apt_updated = True
        print(f"  apt-get install {' '.join(missing)}", flush=True)
        subprocess.run(
            [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        if ours:
            policy.unlink()


def pip_install(*requirements: str) -> None:
    """Install Python packages into the running interpreter's environment."""
    print(f"  pip install {' '.join(requirements)}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *requirements], check=True)


def disk_usage(path: Path) -> int:
    """Bytes of disk allocated under ``path`` (``du``: blocks, so sparse preallocation counts
    only what was written)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # removed by the broker meanwhile
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


class Sampler:
    """Acknowledged-message counts over time, for the throughput-over-time plot (Figure 4).

    ``observe(count)`` may be called as often as the client likes; a sample is kept at most every
    ``interval`` seconds, plus the first and the last. Not thread-safe: one producer thread.
    """

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.start = time.perf_counter()
        self.samples: list[tuple[float, int]] = [(0.0, 0)]
        self._last = 0.0
        self._count = 0

    def restart(self) -> None:
        """Start the clock again (after connection setup)."""
        self.start = time.perf_counter()
        self.samples = [(0.0, 0)]
        self._last = 0.0

    def observe(self, count: int) -> None:
        self._count = count
        now = time.perf_counter() - self.start
        if now - self._last >= self.interval:
            self.samples.append((round(now, 4), count))
            self._last = now

    def finish(self) -> None:
        now = time.perf_counter() - self.start
        if self.samples[-1][1] != self._count or len(self.samples) == 1:
            self.samples.append((round(now, 4), self._count))


@dataclass(frozen=True)
class Read:
    """What one bounded read got: ``seen`` of ``wanted`` messages in ``seconds``."""

    wanted: int
    seen: int
    seconds: float
    first: float | None  # seconds from the first request to the first message
    passes: int = 1  # times the queue was read from the start (``wanted`` counts them all)

    @property
    def complete(self) -> bool:
        return self.seen >= self.wanted

    @property
    def rate(self) -> float:
        return self.seen / self.seconds if self.seconds > 0 else 0.0


class Driver(Protocol):
    system: str
    MODES: dict[str, str]  # mode name -> what "batch" means for this system
    REREADABLE: bool  # whether a read leaves the messages for the next one

    def produce(self, queue: str, count: int, mode: str, sampler: Sampler) -> float: ...

    def consume(self, queue: str, count: int, timeout: float, min_seconds: float = 0.0) -> Read: ...

    def first_message(self, queue: str, timeout: float) -> tuple[str, float | None]: ...


class Server:
    """A broker process in its own process group, with a temporary work directory.

    Subclasses implement ``launch()`` (spawn, then ``wait_until`` ready); ``start()`` stops
    everything it began when ``launch()`` fails. Use as a context manager.
    """

    name = "server"

    def __init__(self, start_timeout: float = 120.0) -> None:
        self.start_timeout = start_timeout
        self.work = Path(tempfile.mkdtemp(prefix=f"sluice-{self.name}-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra: list[subprocess.Popen[bytes]] = []  # helpers stopped after the broker
        self._log: IO[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work / f"{self.name}.out"

    def spawn(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        if self._log is None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        return subprocess.Popen(
            argv, env=env, cwd=self.work, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Poll ``ready`` every 0.2 s until it holds; ``RuntimeError`` if the broker exits
        first or ``start_timeout`` passes."""

        def check() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before {what}; "
                    f"last output:\n{self.tail()}"
                )
            return ready()

        try:
            wait_until(check, self.start_timeout, what, interval=0.2)
        except WaitTimeoutError:
            raise RuntimeError(
                f"{self.name}: no {what} after {self.start_timeout:.0f}s:\n{self.tail()}"
            ) from None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def launch(self) -> None:  # pragma: no cover - per peer
        raise NotImplementedError

    def start(self) -> None:
        try:
            self.launch()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End the broker's process group (TERM, then KILL after 20 s), then its helpers,
        then remove the work directory. Safe to call twice."""
        for proc in [p for p in [self.proc, *self.extra] if p is not None]:
            _end_group(proc)
        self.proc = None
        self.extra = []
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _end_group(proc: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # The leader may be gone while children it forked in the group live on: KILL the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
