"""Which log to clean next and how far: Kafka's ``LogCleanerManager`` and ``LogToClean``.

For a compacted log (``cleanup.policy`` holds ``compact``)::

    log start ......... first dirty ............ first uncleanable ........ log end
    |<-- clean bytes -->|<--- cleanable bytes --->|<-- never cleaned here -->|

* **first dirty offset**: where the last cleaning ended, from ``cleaner-offset-checkpoint``
  in the log's dir (Kafka's file and format); the log start offset when there is none or
  it lies outside [log start, log end] (a truncation or a deletion moved the log).
* **first uncleanable offset**: the smallest of the last stable offset (the high watermark
  when no transaction is open: an open transaction's data may still be aborted), the
  active segment's base offset, and —
  when ``min.compaction.lag.ms`` > 0 — the base of the first dirty segment holding a record
  newer than ``now - min.compaction.lag.ms``; then moved down to the base offset of the
  segment holding it (Kafka's ``calculateCleanableBytes``), so only whole inactive segments
  below the high watermark are ever cleaned.
* **dirty ratio** = cleanable bytes / (clean + cleanable bytes). A log is cleaned when its
  ratio exceeds ``min.cleanable.dirty.ratio``, or when ``max.compaction.lag.ms`` is overdue
  (the first batch of a dirty inactive segment is older than ``now - max.compaction.lag.ms``)
  and it has cleanable bytes; of those, the dirtiest goes first.

Thread safety: every method of :class:`LogCleanerManager` is thread-safe (one condition
guards the checkpoints and the in-progress and aborted sets).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sluice.broker.log.checkpoint import CorruptCheckpointError, OffsetCheckpoint
from sluice.broker.log.compaction_errors import CleaningAbortedError
from sluice.broker.log.log import Log
from sluice.broker.log.log_segment import LogSegment
from sluice.common.topic_partition import TopicPartition

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def segments_overlapping(segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """The segments holding offsets in [start, end) (Kafka's ``logSegments(from, to)``): from
    the one whose range holds ``start`` to the last one based below ``end``."""
    out = []
    for i, segment in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if following is None or following > start:
            out.append(segment)
    return out


def cleanable_offsets(log: Log, checkpoint: int | None, now: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) as Kafka's ``cleanableOffsets``."""
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    segments = log.segments()
    active = segments[-1]
    bounds = [log.last_stable_offset, active.base_offset]
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments_overlapping(segments[:-1], first_dirty, active.base_offset):
            if segment.largest_timestamp() > now - lag:
                bounds.append(segment.base_offset)
                break
    return first_dirty, min(bounds)


def max_compaction_delay(log: Log, first_dirty: int, now: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty inactive segment is (ms; 0
    when none is overdue), from the MaxTimestamp of each segment's first batch."""
    segments = log.segments()
    earliest = None
    for segment in segments_overlapping(segments[:-1], first_dirty, segments[-1].base_offset):
        first = next(iter(segment.batch_headers()), None)
        if first is not None and first.max_timestamp > 0:
            earliest = (
                first.max_timestamp if earliest is None else min(earliest, first.max_timestamp)
            )
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


@dataclass(frozen=True)
class LogToClean:
    """One compacted log's cleaning candidate (Kafka's ``LogToClean``)."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment's base offset
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    @property
    def should_clean(self) -> bool:
        return (
            self.needs_compaction_now and self.cleanable_bytes > 0
        ) or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio

    @classmethod
    def of(cls, tp: TopicPartition, log: Log, checkpoint: int | None, now: int) -> LogToClean:
        first_dirty, uncleanable = cleanable_offsets(log, checkpoint, now)
        segments = log.segments()
        # Down to the base of the segment holding it: only whole segments are cleaned.
        bases = [seg.base_offset for seg in segments if seg.base_offset <= uncleanable]
        first_uncleanable = bases[-1] if bases else segments[0].base_offset
        clean = segments_overlapping(segments, -1, first_dirty)
        cleanable = segments_overlapping(
            segments, min(first_dirty, first_uncleanable), first_uncleanable
        )
        return cls(
            tp,
            log,
            first_dirty,
            first_uncleanable,
            sum(s.size for s in clean),
            sum(s.size for s in cleanable),
            max_compaction_delay(log, first_dirty, now),
        )


class LogCleanerManager:
    """Cleaner checkpoints, the choice of the dirtiest log, and aborts. See the module
    docstring."""

    def __init__(
        self,
        log_dirs: list[Path],
        logs: Callable[[], Mapping[TopicPartition, Log]],
        dir_of: Callable[[TopicPartition], Path | None],
    ) -> None:
        self.log_dirs = log_dirs
        self._logs = logs
        self._dir_of = dir_of
        self._cond = threading.Condition()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        for log_dir in log_dirs:
            try:
                read = OffsetCheckpoint(log_dir / CLEANER_CHECKPOINT_FILE).read()
            except CorruptCheckpointError:
                read = {}  # everything is dirty again: safe, only slower
            self._checkpoints[log_dir] = {TopicPartition(t, p): o for (t, p), o in read.items()}

    def checkpoint_of(self, tp: TopicPartition) -> int | None:
        with self._cond:
            log_dir = self._dir_of(tp)
            return None if log_dir is None else self._checkpoints.get(log_dir, {}).get(tp)

    def grab_filthiest(self, now: int) -> LogToClean | None:
        """The dirtiest compacted log that should be cleaned, marked in progress; or None."""
        with self._cond:
            candidates = []
            for tp, log in self._logs().items():
                if not log.config.compact or tp in self._in_progress:
                    continue
                ltc = LogToClean.of(tp, log, self.checkpoint_of(tp), now)
                if ltc.total_bytes > 0 and ltc.should_clean:
                    candidates.append(ltc)
            if not candidates:
                return None
            chosen = max(candidates, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(chosen.tp)
            return chosen

    def begin(self, tp: TopicPartition) -> None:
        """Mark ``tp`` in progress (a cleaning chosen by the caller, not by the ratio)."""
        with self._cond:
            while tp in self._in_progress:
                self._cond.wait()
            self._in_progress.add(tp)

    def check_done(self, tp: TopicPartition) -> None:
        """Raise :class:`CleaningAbortedError` if ``abort_cleaning(tp)`` was called."""
        with self._cond:
            if tp in self._aborted:
                raise CleaningAbortedError(f"cleaning of {tp} aborted")

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """End ``tp``'s cleaning; record ``end_offset`` as its next first dirty offset."""
        with self._cond:
            log_dir = self._dir_of(tp)
            if end_offset is not None and tp not in self._aborted and log_dir is not None:
                self._checkpoints.setdefault(log_dir, {})[tp] = end_offset
                self._write(log_dir)
            self._in_progress.discard(tp)
            self._aborted.discard(tp)
            self._cond.notify_all()

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop a cleaning of ``tp`` in progress and wait until it has stopped."""
        with self._cond:
            if tp in self._in_progress:
                self._aborted.add(tp)
            while tp in self._in_progress:
                self._cond.wait()

    def remove(self, tp: TopicPartition, log_dir: Path) -> None:
        """Forget ``tp``'s checkpoint (its log was deleted)."""
        with self._cond:
            if self._checkpoints.get(log_dir, {}).pop(tp, None) is not None:
                self._write(log_dir)

    def _write(self, log_dir: Path) -> None:
        OffsetCheckpoint(log_dir / CLEANER_CHECKPOINT_FILE).write(
            {(tp.topic, tp.partition): o for tp, o in self._checkpoints[log_dir].items()}
        )
