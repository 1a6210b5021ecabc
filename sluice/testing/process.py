"""``ChildProcess``: one command run as a child process, the base of every server class here.

Lifecycle::

    ChildProcess ──start()──▶ spawned ──ready()──▶ running ──stop()/kill()──▶ exited
                                 │ exits, or not ready in time: killed, start() raises
                                 ▼
                         ProcessExitedError / ProcessNotReadyError

* :meth:`start` spawns :meth:`command` with stdin closed and stdout+stderr *appended* to
  ``output_path`` (never to the test output; a restart adds to the same file), then polls
  :meth:`ready` every 50 ms until it holds. A start that fails — the process exits, is not
  ready in time, or :meth:`ready` raises — leaves no process behind.
* :meth:`stop` sends SIGTERM (or the signal given) and waits ``stop_timeout`` seconds, then
  SIGKILLs; :meth:`kill` is SIGKILL at once, a crash. Both return the exit status (negative:
  the signal number) and are idempotent; the object can be started again afterwards.
* As a context manager it starts on entry (unless running) and always stops on exit.

Children get ``HYPOTHESIS_STORAGE_DIRECTORY`` pointing at ``./.hypothesis`` of the *parent's*
working directory: kio imports hypothesis when it is installed, and hypothesis builds its
Unicode tables in the working directory — about 3 s on the test box for each new one.

Not thread-safe: one thread drives a process (start, stop, kill); :attr:`running` and the
output readers may be called from any thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
POLL_INTERVAL = 0.05


class ProcessExitedError(RuntimeError):
    """A child process exited while it was starting (its output tail is in the message)."""


class ProcessNotReadyError(RuntimeError):
    """A child process ran but did not become ready within its start timeout (it is killed)."""


class ProcessRunningError(RuntimeError):
    """``start()`` on a process object whose process is still running."""


def signal_and_wait(proc: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> int | None:
    """Send ``sig`` to a running ``proc``, wait up to ``timeout`` for it to exit (SIGKILL
    after that) and return its exit status; None if it was never started. Idempotent."""
    if proc is None:
        return None
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class ChildProcess:
    """A command as a child process with its output in ``output_path``; see the module doc.

    Subclasses override :meth:`command` (the argv) and :meth:`ready` (the readiness probe).
    Used directly, ``args`` is the argv and ``ready`` the probe (default: started is ready).
    """

    def __init__(
        self,
        output_path: Path,
        args: Sequence[str] | None = None,
        *,
        name: str = "process",
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        start_timeout: float = START_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        self.output_path = Path(output_path)
        self.args = None if args is None else list(args)
        self.name = name
        self.cwd = cwd
        self.env = dict(env or {})
        self._ready = ready
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    # -- what to run, and when it is up ----------------------------------------------------

    def command(self) -> list[str]:
        """The argv to run."""
        if self.args is None:
            raise NotImplementedError(f"{type(self).__name__} must define command()")
        return list(self.args)

    def ready(self) -> bool:
        """Whether the started process serves requests (polled by :meth:`wait_ready`)."""
        return True if self._ready is None else self._ready()

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path.cwd() / ".hypothesis"))
        env.update(self.env)
        return env

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def spawn(self) -> Self:
        """Start the process without waiting for it to be ready (see :meth:`wait_ready`)."""
        if self.running:
            raise ProcessRunningError(f"{self.name} (pid {self.pid}) is already running")
        self.output_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        with open(self.output_path, "ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.cwd,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll :meth:`ready` until it holds. The process exiting meanwhile raises
        :class:`ProcessExitedError`; ``timeout`` seconds passing (default ``start_timeout``)
        kills it and raises :class:`ProcessNotReadyError`."""
        if self.proc is None:
            raise ProcessExitedError(f"{self.name} was never started")
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ProcessExitedError(
                    f"{self.name} exited with {self.proc.returncode} while starting:\n"
                    + self.output_tail()
                )
            if self.ready():
                return
            time.sleep(POLL_INTERVAL)
        self.kill()
        raise ProcessNotReadyError(
            f"{self.name} was not ready within {timeout}s:\n" + self.output_tail()
        )

    def start(self, timeout: float | None = None) -> Self:
        """:meth:`spawn` and :meth:`wait_ready`; a failed start kills what it spawned."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, sig: int = signal.SIGTERM, *, timeout: float | None = None) -> int | None:
        """Send ``sig`` (SIGTERM), wait up to ``timeout`` (default ``stop_timeout``), then
        SIGKILL; the exit status, None if never started. Idempotent."""
        return signal_and_wait(self.proc, sig, self.stop_timeout if timeout is None else timeout)

    def kill(self) -> int | None:
        """SIGKILL — a crash: no shutdown hooks run. The exit status (``-9``)."""
        return signal_and_wait(self.proc, signal.SIGKILL, self.stop_timeout)

    def __enter__(self) -> Self:
        return self if self.running else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- output ------------------------------------------------------------------------------

    def output(self) -> str:
        """Everything the process (and earlier starts of it) wrote; "" before the first."""
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def output_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of :meth:`output`, for failure messages."""
        return "\n".join(self.output().splitlines()[-lines:]) or "(no output)"
