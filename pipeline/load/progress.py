"""Progress of a load's read+write job while it runs: splits done of total, rows/s, ETA.

``LoadProgress`` runs one daemon thread that polls Spark's status tracker (driver side, no
executor involvement) for the jobs of the load's job group (``SparkContext.setJobGroup``): the
tasks of their stages, completed of total. The load's read+write job has one task per split,
so "tasks done" is "splits done"; rows are estimated from the plan (the splits are cut to
near-equal offset counts by ``sluice.pipeline.source.ranges.split_ranges``), as
``offsets planned × splits done / splits total`` — the exact count is known only when the
tasks' results arrive with the job's.

The deadline for progress (``stallTimeoutMs``): when no split has finished for ``stall_s``
seconds the thread calls ``on_stall(waiting)`` with the indices of the splits whose tasks are
running (from the JVM's status store; empty if it cannot be read). A reason returned (the
brokers did not answer) is kept as ``stalled`` and the job group is cancelled, so ``collect()``
fails at once and the caller raises it; ``None`` (the brokers answer: a long split is still
reading, and each split's own ``kafkaConsumer.pollTimeoutMs`` bounds it) restarts the clock.
The cancellation is on purpose, so Spark's log is turned off before it: a killed task can end
after its job, and Spark then logs its completion as an internal error with a forty-line
stack trace (``Block broadcast_0 does not exist``), after which the load's one-line reason
would not be the end of its output. The caller waits for the killed tasks
(``await_cancelled``, bounded by ``CANCEL_WAIT_S``), which sets the log level back.

Output: on a TTY (``live=True``) one line rewritten in place on stderr every second; otherwise
a progress line through ``say`` every ``interval`` seconds (so logs and CI show it too). The
final figures (``ProgressFigures``) go into the run report.

Thread-safety: ``start``/``stop`` from the thread that runs the load; the polling thread only
reads Spark's tracker and writes the figures it alone owns until ``stop`` joins it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["CANCEL_WAIT_S", "LoadProgress", "ProgressFigures"]

CANCEL_WAIT_S = 10.0
"""At most how long ``await_cancelled`` waits for a cancelled group's tasks to end: PySpark
kills a task's Python worker ``spark.python.task.killTimeout`` (2 s) after the task was asked
to stop."""


@dataclass(slots=True)
class ProgressFigures:
    """One reading: splits done of total, offsets read (estimated while running), seconds."""

    splits_done: int
    splits_total: int
    offsets_done: int
    offsets_total: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.offsets_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the current rate; ``None`` before the first split is done."""
        if self.splits_done == 0 or self.seconds <= 0:
            return None
        return self.seconds * (self.splits_total - self.splits_done) / self.splits_done

    def line(self) -> str:
        eta = self.eta_seconds
        return (
            f"read+write: {self.splits_done}/{self.splits_total} splits, "
            f"~{self.offsets_done:,} of {self.offsets_total:,} offsets, "
            f"{self.rows_per_second:,.0f} rows/s, "
            + ("ETA --" if eta is None else f"ETA {_clock(eta)}")
            + f", {_clock(self.seconds)} elapsed"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "splits_done": self.splits_done,
            "splits_total": self.splits_total,
            "offsets_total": self.offsets_total,
            "rows_per_second": round(self.rows_per_second, 1),
            "seconds": round(self.seconds, 3),
        }


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class LoadProgress:
    """Watches the jobs of Spark job group ``group`` (see the module doc)."""

    def __init__(
        self,
        spark: Any,
        group: str,
        *,
        splits: int,
        offsets: int,
        say: Callable[[str], None],
        live: bool = False,
        interval: float = 10.0,
        stream: TextIO | None = None,
        stall_s: float | None = None,
        on_stall: Callable[[list[int]], str | None] | None = None,
    ) -> None:
        self._context = spark.sparkContext
        self.group = group
        self.splits = splits
        self.offsets = offsets
        self._say = say
        self._live = live
        self._interval = 1.0 if live else interval
        self._stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._began = time.monotonic()
        self._done = 0
        self._stall_s = stall_s
        self._on_stall = on_stall
        self._last_change = time.monotonic()
        self.stalled: str | None = None
        """Why the job group was cancelled for want of progress (see the module doc)."""
        self._quieted: str | None = None  # the log level before a stall's cancellation

    def figures(self) -> ProgressFigures:
        done = min(self._done, self.splits)
        offsets = self.offsets * done // self.splits if self.splits else 0
        return ProgressFigures(
            done, self.splits, offsets, self.offsets, time.monotonic() - self._began
        )

    def _stages(self) -> Iterator[tuple[int, Any]]:
        """(id, ``SparkStageInfo`` or ``None``) of every stage of the group's jobs."""
        tracker = self._context.statusTracker()
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                yield stage_id, tracker.getStageInfo(stage_id)

    def _poll(self) -> None:
        done = sum(stage.numCompletedTasks for _, stage in self._stages() if stage is not None)
        if done > self._done:
            self._last_change = time.monotonic()
        self._done = max(self._done, done)

    def _running(self) -> list[int]:
        """Indices of the running tasks of the group's stages (= split indices)."""
        store = self._context._jsc.sc().statusStore()
        running: list[int] = []
        for stage_id, stage in self._stages():
            attempt = stage.currentAttemptId if stage is not None else 0
            tasks = store.taskList(stage_id, attempt, 1_000_000).iterator()
            while tasks.hasNext():
                task = tasks.next()
                if task.status() == "RUNNING":
                    running.append(int(task.index()))
        return sorted(set(running))

    def _check_stall(self) -> bool:
        """Apply the deadline; True when the job group was cancelled."""
        if self._stall_s is None or self._on_stall is None:
            return False
        if time.monotonic() - self._last_change < self._stall_s:
            return False
        try:
            waiting = self._running()
        except Exception:  # noqa: BLE001 - the JVM's store is an internal API
            waiting = []
        reason = self._on_stall(waiting)
        self._last_change = time.monotonic()
        if reason is None:
            return False
        self.stalled = reason
        self._quieted = self._log_level()
        self._context.setLogLevel("OFF")  # the cancellation is on purpose (module doc)
        self._context.cancelJobGroup(self.group)
        return True

    def _log_level(self) -> str:
        """Spark's log level now (log4j's root logger), ``ERROR`` if it cannot be read."""
        try:
            level = self._context._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
            return str(level.getLevel().toString())
        except Exception:  # noqa: BLE001 - the JVM's logging is not PySpark's API
            return "ERROR"

    def await_cancelled(self, bound_s: float = CANCEL_WAIT_S) -> None:
        """After a stall: wait until no task of the cancelled group runs (at most ``bound_s``,
        polling Spark's status tracker, which has nothing to wait on), then set Spark's log
        level back to what it was before the cancellation."""
        deadline = time.monotonic() + bound_s
        try:
            while time.monotonic() < deadline:
                if not any(
                    stage is not None and stage.numActiveTasks for _, stage in self._stages()
                ):
                    return
                time.sleep(0.1)
        finally:
            if self._quieted is not None:
                self._context.setLogLevel(self._quieted)
                self._quieted = None

    def _run(self) -> None:
        shown = time.monotonic()
        tick = min(self._interval, 1.0)
        while not self._stop.wait(tick):
            try:
                self._poll()
                if self._check_stall():
                    return
            except Exception:  # noqa: BLE001 - progress must never fail the load
                continue
            if time.monotonic() - shown >= self._interval - 1e-3:
                shown = time.monotonic()
                self._show(self.figures())

    def _show(self, figures: ProgressFigures) -> None:
        if self._live:
            self._stream.write("\r\x1b[2K[sluice load] " + figures.line())
            self._stream.flush()
        else:
            self._say(figures.line())

    def configure_stall(
        self, stall_s: float | None, on_stall: Callable[[list[int]], str | None] | None
    ) -> None:
        """Set the deadline for progress (the module doc); before ``start``."""
        self._stall_s, self._on_stall = stall_s, on_stall

    def start(self) -> LoadProgress:
        self._began = self._last_change = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="sluice-load-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, finished: bool) -> ProgressFigures:
        """Stop polling; ``finished``: the job succeeded, so every split is done. Returns the
        final figures (offsets still estimated; the caller knows the exact rows)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if finished:
            self._done = self.splits
        figures = self.figures()
        if self._live:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()
        return figures
