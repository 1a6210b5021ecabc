"""``ShutdownGuard``: a broker process's signals, and the bound on its shutdown.

A SIGTERM (or SIGINT) asks the broker to stop; the stop must finish whatever ZooKeeper, the
peers or the clients are doing. The broker bounds each step of its shutdown itself (see
``Broker._shutdown``); this guard bounds the whole and answers a second signal:

* the first signal calls ``on_first`` on the event loop (thread-safe hand-over) and starts a
  timer of ``bound_s`` seconds;
* a second SIGTERM or SIGINT ends the process at once: a best-effort flush of the logs (at
  most ``FORCED_FLUSH_TIMEOUT`` seconds, on a thread of its own), one line saying so, then
  ``os._exit(128 + signal)`` — 143 for SIGTERM, 130 for SIGINT, as a shell reports a process
  killed by it;
* when the timer fires first, the process ends the same way with :data:`EXIT_SHUTDOWN_TIMEOUT`
  (1), naming the step that was still running — or, if the broker had stopped cleanly and only
  a stuck thread (a ZooKeeper call that never returns, say) holds the interpreter's exit, with
  status 0.

Exit statuses of a broker process, then: 0 stopped cleanly (the logs flushed, checkpointed and
closed, the clean-shutdown marker written) — also when the controlled part gave up, which is
logged; 1 the bound ran out; 143 / 130 a second signal. A broker ended with 1, 143 or 130
recovers its logs at the next start as after a crash (nothing acknowledged with acks=all is
lost; that is what replication is for).

Why ``os._exit``: a thread blocked in a kazoo call, kazoo's ``atexit`` hook (it joins its
callback threads without a timeout) and asyncio's default-executor shutdown would each hold
a normal exit forever; nothing the bound must cut can be left to them.

Signals are taken with ``signal.signal`` (not ``loop.add_signal_handler``) so that a second
signal still ends the process when the event loop is stuck or already closed. Installed only
in the main thread; elsewhere (a broker run inside a test) signals are not touched and
``bound_s`` is not enforced. Thread-safe: the timer and the signal handler only read and set
flags and end the process. ``install`` and ``stopped_cleanly`` are called on the loop's
(the main) thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from sluice.broker.log.log_manager import LogManager

log = logging.getLogger(__name__)

#: The status of a broker whose shutdown ran out of its bound.
EXIT_SHUTDOWN_TIMEOUT = 1
#: How long a forced exit waits for its best-effort flush of the logs.
FORCED_FLUSH_TIMEOUT = 3.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ShutdownGuard:
    """See the module docstring. ``describe`` names the shutdown step in progress (for the
    line logged when the bound runs out); ``flush`` is the best-effort flush of a forced exit
    (it may raise; it runs on a thread of its own)."""

    def __init__(
        self,
        bound_s: float,
        *,
        on_first: Callable[[], None],
        flush: Callable[[], None],
        describe: Callable[[], str],
    ) -> None:
        self.bound_s = bound_s
        self._on_first = on_first
        self._flush = flush
        self._describe = describe
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first: float | None = None  # monotonic time of the first signal
        self._stopped_cleanly = False
        self._timer: threading.Timer | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}

    def install(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Take SIGTERM and SIGINT (main thread only); whether they were taken."""
        if threading.current_thread() is not threading.main_thread():
            return False
        self._loop = loop
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return True

    def stopped_cleanly(self) -> None:
        """The broker's shutdown has finished: if the process still does not exit when the
        bound runs out, nothing is lost by ending it with status 0. Without a signal (a
        programmatic stop) the previous signal handlers are put back."""
        self._stopped_cleanly = True
        if self._first is None:
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)
            self._previous.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._first is not None:
            self._exit(
                128 + signum,
                f"second {signal.Signals(signum).name}: stopping now, "
                f"{time.monotonic() - self._first:.1f}s into the shutdown ({self._describe()})",
            )
        self._first = time.monotonic()
        self._timer = threading.Timer(self.bound_s, self._expired)
        self._timer.name = "shutdown-bound"
        self._timer.daemon = True
        self._timer.start()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to stop
                loop.call_soon_threadsafe(self._on_first)

    def _expired(self) -> None:
        if self._stopped_cleanly:
            log.warning(
                "stopped cleanly, but the process did not exit within %.1fs of the signal "
                "(a thread still busy: %s): exiting with status 0",
                self.bound_s,
                ", ".join(sorted(t.name for t in threading.enumerate() if t.is_alive())),
            )
            os._exit(0)
        self._exit(
            EXIT_SHUTDOWN_TIMEOUT,
            f"shutdown did not finish within {self.bound_s:.1f}s ({self._describe()})",
        )

    def _exit(self, status: int, reason: str) -> None:
        """Best-effort flush, one line, ``os._exit(status)``."""
        flushed: list[bool] = []

        def flush() -> None:
            try:
                self._flush()
            except Exception as exc:  # best effort: what failed is recovered at the next start
                log.warning("best-effort flush failed: %r", exc)
            else:
                flushed.append(True)

        thread = threading.Thread(target=flush, name="forced-flush", daemon=True)
        thread.start()
        thread.join(FORCED_FLUSH_TIMEOUT)
        log.error(
            "%s: %s; exiting with status %d (the next start recovers the logs)",
            reason,
            "logs flushed" if flushed else "the logs could not all be flushed",
            status,
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(status)


def best_effort_flush(log_manager: LogManager) -> None:
    """What a forced exit does (any thread): fsync every log it can, then the checkpoints.
    A log that fails (closed meanwhile, its dir offline) is skipped; raises ``RuntimeError``
    counting them."""
    failed = 0
    for partition_log in list(log_manager.logs().values()):
        try:
            partition_log.flush()
        except Exception:  # a closed or offline log: the next start recovers it
            failed += 1
    log_manager.checkpoint()
    if failed:
        raise RuntimeError(f"{failed} logs could not be flushed")
