"""``LogDirFailureChannel``: which log dirs are offline after a storage failure, and why
(Kafka's ``LogDirFailureChannel``).

A filesystem call that fails on a write path — the append of a batch, a roll, an index
entry, an fsync, a checkpoint — is reported here by the ``Log`` or ``LogManager`` that made
it, after undoing what it wrote. From then on every partition in that dir refuses writes with
:class:`~sluice.broker.log.errors.LogDirOfflineError` (KAFKA_STORAGE_ERROR to a producer),
while reads of what it holds go on: the bytes below the log end are whole and need no space.
Kafka takes the dir offline for reads too, because another replica can lead its partitions;
a standalone broker has no other replica, so refusing reads would only hide acknowledged
data. In cluster mode the broker listens here (:meth:`add_listener`) to move leadership away.

Two kinds of failure, told apart by what was lost:

* **Retryable** — ``ENOSPC`` or ``EDQUOT`` from a write, an open, a rename. The call failed
  and nothing that had succeeded before was lost, so once space is back the dir can come back
  online without a restart: the log manager probes it (free space, then a small written and
  fsynced file) every ``log_dir_retry_ms`` and, when the probe passes, cuts each log's files
  back to the last whole batch and calls :meth:`mark_online`.
* **Until restart** — any other errno (``EIO``, ...), and *any* failed fsync. After a failed
  fsync Linux may have dropped the dirty pages and a second fsync may report success for data
  that never reached the disk (the PostgreSQL "fsyncgate" finding), so only a restart, which
  re-validates every batch from the recovery point, can say what the files hold.

Logging: exactly one line per event — when a dir goes offline (the operation, the file and the
OS error, no traceback), when a retryable failure turns into one until restart, and when a dir
comes back. Refused writes while it is offline log nothing above DEBUG.

Thread safety: every method is thread-safe (one lock; listeners are called outside it, on
the thread that reported the event).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from sluice.broker.log.errors import LogDirFailureError, LogDirOfflineError

log = logging.getLogger(__name__)

#: Errors a later call may not meet again once space is freed: nothing already written is lost.
RETRYABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class LogDirFailure(NamedTuple):
    """Why a log dir is offline."""

    log_dir: Path
    operation: str  # "append", "roll", "flush", "checkpoint", ...
    reason: str  # the OS error, one line
    retryable: bool  # True: a probe may bring it back; False: until the broker restarts
    since_ms: int


Listener = Callable[[Path, "LogDirFailure | None"], None]


class LogDirFailureChannel:
    """The offline log dirs of one broker. See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, LogDirFailure] = {}
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(log_dir, failure)`` when a dir goes offline (or its failure turns
        into one until restart), and ``listener(log_dir, None)`` when it comes back."""
        with self._lock:
            self._listeners.append(listener)

    def fail(
        self, log_dir: Path, operation: str, exc: OSError, *, until_restart: bool = False
    ) -> LogDirFailure:
        """Record that ``operation`` failed in ``log_dir`` with ``exc`` (``until_restart``: a
        failed fsync, or an undo that failed — what the files hold is not known). Logs one
        line if this changes the dir's state.
        Returns the dir's failure as it now stands."""
        retryable = not until_restart and exc.errno in RETRYABLE_ERRNOS
        failure = LogDirFailure(
            log_dir, operation, _one_line(exc), retryable, int(time.time() * 1000)
        )
        with self._lock:
            old = self._offline.get(log_dir)
            if old is not None and (retryable or not old.retryable):
                return old  # already offline for at least this long: not a new event
            self._offline[log_dir] = failure
            listeners = list(self._listeners)
        log.error(
            "log dir %s is offline: %s failed: %s; %s",
            log_dir,
            operation,
            failure.reason,
            "writes to its partitions are refused until space is free again"
            if retryable
            else "writes to its partitions are refused until the broker restarts",
        )
        for listener in listeners:
            listener(log_dir, failure)
        return failure

    def failure(self, log_dir: Path) -> LogDirFailure | None:
        """Why ``log_dir`` is offline, or None when it is online."""
        with self._lock:
            return self._offline.get(log_dir)

    def is_offline(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    def offline_dirs(self) -> dict[Path, LogDirFailure]:
        with self._lock:
            return dict(self._offline)

    def check_writable(self, directory: Path, what: str, *, retryable_ok: bool = False) -> None:
        """Raise :class:`LogDirOfflineError` if the log dir holding the partition directory
        ``directory`` is offline (``retryable_ok``: only if it is offline until restart)."""
        # Every append asks; nearly always no dir is offline. Reading the dict's emptiness
        # without the lock is one atomic read: a dir going offline at the same moment is seen
        # by the next call, exactly as if this call had taken the lock just before ``fail``.
        if not self._offline:
            return
        failure = self.failure(directory.parent)
        if failure is not None and not (retryable_ok and failure.retryable):
            raise LogDirOfflineError(
                f"{directory.name}: cannot {what} it: log dir {directory.parent} is offline "
                f"since {failure.operation} failed ({failure.reason})"
            )

    def failed(
        self, directory: Path, operation: str, exc: OSError, *, until_restart: bool = False
    ) -> LogDirFailureError:
        """:meth:`fail` for the log dir holding the partition directory ``directory``; returns
        the error the partition raises from ``exc``."""
        self.fail(directory.parent, operation, exc, until_restart=until_restart)
        return LogDirFailureError(
            f"{directory.name}: {operation} failed: {_one_line(exc)}; log dir "
            f"{directory.parent} is now offline",
            log_dir=str(directory.parent),
        )

    def mark_online(self, log_dir: Path) -> bool:
        """Bring a retryable dir back (the caller has probed it and cut its logs back);
        logs one line. Returns False, changing nothing, if the dir is online or may only come
        back after a restart."""
        with self._lock:
            old = self._offline.get(log_dir)
            if old is None or not old.retryable:
                return False
            del self._offline[log_dir]
            listeners = list(self._listeners)
        seconds = (time.time() * 1000 - old.since_ms) / 1000
        log.warning("log dir %s is back online after %.1f s offline", log_dir, seconds)
        for listener in listeners:
            listener(log_dir, None)
        return True


def _one_line(exc: OSError) -> str:
    return " ".join(str(exc).split())
