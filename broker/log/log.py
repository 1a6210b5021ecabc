"""``Log``: one partition — an ordered list of segments and the offsets that describe it.

The paper's Figure 2: the broker keeps "an in-memory list of the first offset of each segment"
and finds the segment of an offset by binary search; here that list is ``_bases``, searched
with ``bisect``, and the segment's sparse index then finds the byte position.

Offsets (all logical, consecutive — Kafka ≥ 0.8, not the paper's byte offsets)::

    log start offset <= high watermark <= log end offset
    recovery point <= log end offset   (everything below it is fsynced)

A read at an offset outside [log start offset, log end offset] raises
:class:`OffsetOutOfRangeError`, never silently returns something else. Reads stop at the high
watermark (or at the recovery point when ``read.flushed.only`` is set, as the paper exposes a
message only once flushed).

Segments roll on ``segment.bytes``, ``segment.ms``, a full index or a relative-offset
overflow. Retention deletes whole segments only, oldest first, never the active one and never
one above the high watermark: by time (its largest timestamp older than ``retention.ms``) and
by size (``retention.bytes``). A deleted segment is renamed ``.deleted`` and closed only after
``file.delete.delay.ms``, so a fetch already sending from it finishes (Kafka does the same).

Compaction (``cleanup.policy`` with ``compact``): ``append`` refuses a record without a key
(``NullKeyOnCompactedTopicError``); the log cleaner (``cleaner``) rewrites inactive
segments below the high watermark and swaps them in with :meth:`Log.replace_segments`, the
crash-safe rename sequence ``log_loader`` documents and finishes or undoes on open. The
cleaner reads segments without the lock: between ``begin_cleaning`` and ``end_cleaning``
no segment file is closed (deleted segments wait in ``_deleted``), and every change to the
inactive segments (truncation, retention) bumps ``_generation``, which makes the swap abort.

Flushing: ``append`` never fsyncs. It counts unflushed messages; ``needs_flush`` says when
``flush.messages`` or ``flush.ms`` is reached, and the log manager's flusher thread calls
``flush``, whose fsyncs run outside the lock.

Storage failures: an ``OSError`` on a write path (append, roll, index entry, fsync) is undone
(files cut back to the last whole batch, offsets restored: nothing of the failed batch becomes
visible), reported to the ``LogDirFailureChannel`` and raised as ``LogDirFailureError``. While
the dir is offline writes raise ``LogDirOfflineError`` and reads go on; :meth:`reopen` cuts
the files back to the log end before the dir comes back.

Thread safety: every public method is thread-safe (one lock guards the segment list and the
offsets; fsync and file reads happen outside it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from sluice.broker.log.compaction_errors import CleaningAbortedError
from sluice.broker.log.control_batch import EndTxnMarker, encode_marker, read_marker
from sluice.broker.log.errors import (
    InvalidRecordError,
    LogDirFailureError,
    NonMonotonicOffsetError,
    OffsetOutOfRangeError,
)
from sluice.broker.log.leader_epoch_cache import LeaderEpochCache
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_dir_failure_channel import LogDirFailureChannel
from sluice.broker.log.log_loader import load_segments, swap_files
from sluice.broker.log.log_results import AppendInfo as AppendInfo
from sluice.broker.log.log_results import ReadInfo, duplicate_info
from sluice.broker.log.log_segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
)
from sluice.broker.log.producer_state import LastRecord, ProducerStateManager
from sluice.broker.log.record_batch import (
    CONTROL_BIT,
    LOG_OVERHEAD,
    BatchHeader,
    assign_leader_offsets,
    iter_batches,
    validate_batch,
)
from sluice.broker.log.record_filter import check_keys
from sluice.broker.log.roll_limits import NO_ROLL_LIMITS, RollLimits
from sluice.broker.log.transaction_index import AbortedTxn

log = logging.getLogger(__name__)
_new_info = tuple.__new__  # AppendInfo from a ready tuple: its Python __new__ is slower


def now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """One partition's log in ``directory`` (``<log dir>/<topic>-<partition>``)."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
        clock: Callable[[], int] = now_ms,
        on_flush_needed: Callable[[Log], None] | None = None,
        dir_failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.directory = directory
        self.log_dir = directory.parent
        self._dir_failures = dir_failures or LogDirFailureChannel()
        self.config = config
        self._clock = clock
        self._on_flush_needed = on_flush_needed
        self._lock = threading.RLock()
        self._segments: dict[int, LogSegment] = {}
        self._bases: list[int] = []
        self._deleted: list[tuple[int, LogSegment]] = []  # (delete after ms, segment)
        self._generation = 0  # bumped when an inactive segment changes (see the cleaner)
        self._cleaning = False
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self.recovered_bytes_cut = 0
        self._roll_limits = NO_ROLL_LIMITS  # the active segment's, made by _maybe_roll
        directory.mkdir(parents=True, exist_ok=True)
        self.producer_state = ProducerStateManager(directory)
        self.leader_epochs = LeaderEpochCache(directory)
        self._load(recovery_point, log_start_offset, clean_shutdown)
        self._rebuild_producer_state()
        # Recovery may have cut batches, retention may have moved the start.
        self.leader_epochs.truncate_from_end(self._log_end_offset)
        self.leader_epochs.truncate_from_start(self._log_start_offset)

    # -- loading and recovery ---------------------------------------------------------------

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=self._clock(),
            suffix=suffix,
        )

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        self._segments, self.recovered_bytes_cut = load_segments(
            self.directory,
            self._new_segment,
            None if clean_shutdown else recovery_point,
            self.config.max_message_bytes + 1024,
        )
        self._bases = sorted(self._segments)
        if not self._bases:
            base = max(log_start_offset, 0)
            self._segments[base] = self._new_segment(base)
            self._bases.append(base)
        self._log_end_offset = self.active_segment.next_offset
        # A segment's base offset is a floor: an empty active segment made by a roll or a
        # truncation records where the log ends.
        self._log_end_offset = max(self._log_end_offset, self._bases[-1])
        self._log_start_offset = min(max(log_start_offset, self._bases[0]), self._log_end_offset)
        if clean_shutdown:
            self._recovery_point = min(max(recovery_point, 0), self._log_end_offset)
        else:
            self._recovery_point = self._log_end_offset
        self._high_watermark = self._log_end_offset
        for base in self._bases[:-1]:
            self._segments[base].on_become_inactive()

    def _rebuild_producer_state(self) -> None:
        """Newest usable snapshot, then replay the batch headers after it (and the markers'
        types), which rebuilds the transaction indexes from there — from the log start, with
        no snapshot, if a ``.txnindex`` was corrupt."""
        full = any(s.txn_index_rebuilt_because for s in self._segments.values())
        loaded = None if full else self.producer_state.load_snapshot(self._log_end_offset)
        if loaded is None:
            self.producer_state.clear()
        start = self._log_start_offset if loaded is None else loaded
        for base in self._bases:
            segment = self._segments[base]
            segment.txn_index.truncate_to(-1 if full else start)
            segment.txn_index_rebuilt_because = None
            if segment.size == 0 or segment.next_offset <= start:
                continue
            for h in segment.batch_headers(start if base < start else None):
                if h.base_offset < start:
                    continue
                if h.is_control:
                    marker = read_marker(segment.read_batch(h), h._replace(position=0))
                    self._record_marker(segment, h, marker)
                else:
                    self.producer_state.update(h)

    def _record_marker(
        self, segment: LogSegment, header: BatchHeader, marker: EndTxnMarker | None
    ) -> None:
        """Close the transaction a marker ends; an aborted one goes into the marker's
        segment's transaction index."""
        done = self.producer_state.update(header, marker)
        if done is not None and done.aborted:
            lso = self.producer_state.last_stable_offset_after(done)
            segment.txn_index.append(
                AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso)
            )

    def _floor_base(self, offset: int) -> int:
        i = bisect_right(self._bases, offset) - 1
        return self._bases[max(i, 0)]

    # -- offsets ---------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[self._bases[-1]]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest open transaction below it:
        ``read_committed`` consumers read up to here."""
        with self._lock:
            first = self.producer_state.first_unstable_offset()
            hw = self._high_watermark
            return hw if first is None else min(first, hw)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments.values())

    @property
    def segment_count(self) -> int:
        return len(self._bases)

    def segments(self) -> list[LogSegment]:
        with self._lock:
            return [self._segments[b] for b in self._bases]

    # -- appending -------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        assign: bool = True,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Validate and append a record set (one or more magic-2 batches).

        With ``assign`` (the leader's path) the broker assigns consecutive offsets from the
        log end and stamps ``leader_epoch`` by rewriting each header's first 16 bytes; each
        batch must hold RecordCount == LastOffsetDelta + 1 records. ``coordinator`` (Kafka's
        ``AppendOrigin.COORDINATOR``: a marker, :meth:`append_marker`, or a group
        coordinator's transactional offsets) is the only origin a control batch is accepted
        from, and its producer's epoch is checked but not its sequence. Without ``assign``
        (a follower copying its leader) offsets are kept and must start at or after the log
        end. Raises :class:`CorruptRecordError`,
        :class:`InvalidRecordError` or :class:`RecordBatchTooLargeError`; nothing is written
        unless every batch is valid.
        """
        buf = records if isinstance(records, bytearray) else bytearray(records)
        size = len(buf)
        if not size:
            raise InvalidRecordError("expected at least one record batch, found none")
        # One batch per append is the common case (Kafka's rule for Produce v3+).
        first = validate_batch(buf)
        headers = [first] if first.length + LOG_OVERHEAD == size else list(iter_batches(buf))
        config = self.config
        for h in headers:
            if h.length + LOG_OVERHEAD > config.max_batch_bytes:
                config.check_batch_size(h.size)
        with self._lock:
            self._dir_failures.check_writable(self.directory, "append to")
            append_time = -1
            if assign:
                duplicate = self.producer_state.check_batches(headers, coordinator=coordinator)
                if duplicate is not None:
                    return duplicate_info(duplicate, headers[0], self._log_start_offset)
                if coordinator and first.is_control:  # one marker per append (append_marker)
                    self.producer_state.check_marker(first, read_marker(buf, first))
                if config.compact:
                    check_keys(buf, headers, self.directory.name)
                headers, append_time = assign_leader_offsets(
                    buf, headers, self._log_end_offset, leader_epoch, allow_control=coordinator,
                    clock=self._clock if config.message_timestamp_type == "LogAppendTime" else None,
                )  # fmt: skip
            else:
                expected = self._log_end_offset
                for h in headers:
                    if h.base_offset < expected:
                        raise NonMonotonicOffsetError(
                            f"expected a batch at offset >= {expected}, found {h.base_offset}"
                        )
                    expected = h.next_offset
            last = headers[-1]
            last_offset = last.base_offset + last.last_offset_delta
            segment = self._maybe_roll(size, headers[0].base_offset, last_offset)
            try:
                segment.append(buf, headers)  # cuts back what it wrote if it fails
            except OSError as exc:
                raise self._failed("append", exc) from exc
            end_before, self._log_end_offset = self._log_end_offset, last_offset + 1
            count = 0
            max_timestamp = -1
            try:
                for h in headers:
                    if h.attributes & CONTROL_BIT:
                        self._record_marker(segment, h, read_marker(buf, h))
                    elif h.producer_id >= 0:  # a batch without a producer id leaves no state
                        self.producer_state.update(h)
                    self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
                    count += h.record_count
                    if h.max_timestamp > max_timestamp:
                        max_timestamp = h.max_timestamp
            except OSError as exc:  # a txnindex entry or the epoch file: undo the append
                self._undo_append(end_before)
                raise self._failed("append", exc) from exc
            self._unflushed_messages += count
            if self._high_watermark_follows_leo:
                self._high_watermark = self._log_end_offset
            if self._on_flush_needed and self._unflushed_messages >= config.flush_messages:
                self._on_flush_needed(self)
            return _new_info(AppendInfo, (
                headers[0].base_offset, last_offset, max_timestamp, count, len(headers),
                size, append_time, self._log_start_offset, tuple(headers), False,
            ))  # fmt: skip

    def append_marker(
        self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
        leader_epoch: int = 0,
    ) -> AppendInfo:  # fmt: skip
        """Append the COMMIT or ABORT marker ending ``producer_id``'s transaction here (the
        coordinator's path). Raises ``InvalidProducerEpochError`` for an epoch older than the
        producer's current one in this log (a fenced producer), and
        ``TransactionCoordinatorFencedError`` for a ``coordinator_epoch`` older than the last
        marker's of the producer (a fenced coordinator)."""
        batch = encode_marker(
            producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
            timestamp=self._clock(),
        )  # fmt: skip
        return self.append(batch, leader_epoch=leader_epoch, coordinator=True)

    # A single-replica log (standalone mode) commits on append; replication turns this off
    # and moves the high watermark itself.
    _high_watermark_follows_leo = True

    def set_replicated(self, replicated: bool) -> None:
        """Whether the high watermark is moved by replication (True) or follows the log end."""
        with self._lock:
            self._high_watermark_follows_leo = not replicated
            if not replicated:
                self._high_watermark = self._log_end_offset

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int) -> LogSegment:
        segment = self._segments[self._bases[-1]]
        used = segment.size
        if used == 0:
            # An empty active segment must start exactly where the appended batches do.
            return segment if segment.base_offset == first_offset else self._roll(first_offset)
        limits = self._roll_limits
        if limits.segment is not segment or limits.config is not self.config:
            limits = self._roll_limits = RollLimits.of(segment, self.config)
        if (
            self._clock() > limits.deadline_ms  # segment.ms (max.compaction.lag.ms)
            or used + size > limits.max_bytes  # segment.bytes
            or last_offset > limits.max_offset  # a 4-byte relative offset
            or segment.offset_index.is_full
            or segment.time_index.is_full
        ):
            return self._roll(first_offset)
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (if the current one has data)."""
        with self._lock:
            self._dir_failures.check_writable(self.directory, "roll")
            if self.active_segment.size == 0:
                return self.active_segment
            return self._roll(self._log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        # Every write comes before the segment list changes, so a failed roll changes nothing.
        old = self.active_segment
        segment = None
        try:
            segment = self._new_segment(base_offset)
            if old.size:
                old.on_become_inactive()
                self.producer_state.take_snapshot(self._log_end_offset)
        except OSError as exc:
            if segment is not None:
                with contextlib.suppress(OSError):
                    segment.delete()
            raise self._failed("roll", exc) from exc
        if old.size == 0:
            # An empty active segment at the wrong base (after a truncation) is replaced.
            self._segments.pop(old.base_offset)
            self._bases.pop()
            old.delete()
        self._segments[base_offset] = segment
        self._bases.append(base_offset)
        return segment

    # -- reading ---------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: str = "high_watermark",
        min_one_batch: bool = True,
    ) -> ReadInfo:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (at least one
        batch when ``min_one_batch``), never past the high watermark — or past the log end for
        ``upper_bound="log_end"`` (replicas), the last stable offset for ``"last_stable"``
        (``read_committed``) — nor past the recovery point when
        ``read.flushed.only`` is set. Raises :class:`OffsetOutOfRangeError` for an offset
        outside [log start, log end]."""
        with self._lock:
            start, end = self._log_start_offset, self._log_end_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"{self.directory.name}: expected an offset in [{start}, {end}], "
                    f"found {offset}",
                    offset=offset,
                    log_start=start,
                    log_end=end,
                )
            bound = end if upper_bound == "log_end" else self._high_watermark
            if upper_bound == "last_stable":
                bound = self.last_stable_offset
            if self.config.read_flushed_only:
                bound = min(bound, self._recovery_point)
            info = ReadInfo(None, self._high_watermark, start, end)
            if offset >= bound:
                return info
            i = bisect_right(self._bases, offset) - 1
            segments = [self._segments[b] for b in self._bases[max(i, 0) :]]
            bound_segment = self._segments[self._floor_base(bound)]
        for segment in segments:
            max_position = None
            if segment is bound_segment:
                max_position = (
                    segment.size
                    if bound >= segment.next_offset
                    else segment.translate_offset(bound)
                )
            elif segment.base_offset > bound_segment.base_offset:
                break
            result = segment.read(offset, max_bytes, max_position, min_one_batch)
            if result is not None:
                return ReadInfo(result, info.high_watermark, start, end)
            if segment is bound_segment:
                break
        return info

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a fetch of [``fetch_offset``, ``upper_bound``) must
        report, from the transaction indexes of the segments from ``fetch_offset``'s on
        (Kafka's ``collectAbortedTransactions``)."""
        with self._lock:
            i = bisect_right(self._bases, fetch_offset) - 1
            segments = [self._segments[b] for b in self._bases[max(i, 0) :]]
        found: list[AbortedTxn] = []
        for segment in segments:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``timestamp`` at or
        after the log start, below the high watermark; None when there is none."""
        with self._lock:
            segments = [self._segments[b] for b in self._bases]
            start, hw = self._log_start_offset, self._high_watermark
        for segment in segments:
            if segment.size == 0 or segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                return found if found[0] < hw else None
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: where ``epoch`` (or the largest
        epoch before it) ended in this log."""
        with self._lock:
            return self.leader_epochs.end_offset_for(epoch, self._log_end_offset)

    # -- flushing --------------------------------------------------------------------------

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def needs_flush(self, now: int | None = None) -> bool:
        """Whether ``flush.messages`` or ``flush.ms`` says it is time to flush."""
        if self._recovery_point >= self._log_end_offset:
            return False
        now = self._clock() if now is None else now
        return (
            self._unflushed_messages >= self.config.flush_messages
            or now - self._last_flush_ms >= self.config.flush_ms
        )

    def flush(self) -> int:
        """fsync every segment holding unflushed data; move the recovery point to the log end
        as it stood at the start. Returns the new recovery point. Safe from any thread."""
        with self._lock:
            # After a failed fsync a later one may "succeed" for lost pages: no recovery
            # point may move until a restart re-validates the files.
            self._dir_failures.check_writable(self.directory, "flush", retryable_ok=True)
            target = self._log_end_offset
            pending = self._unflushed_messages
            if self._recovery_point >= target:
                return self._recovery_point
            first = self._floor_base(self._recovery_point)
            segments = [self._segments[b] for b in self._bases if b >= first]
        for segment in segments:
            try:
                segment.flush()
            except OSError as exc:
                if segment.fd >= 0:  # a closed segment was deleted meanwhile: not a failure
                    raise self._failed("flush", exc, until_restart=True) from exc
        with self._lock:
            self._recovery_point = max(self._recovery_point, min(target, self._log_end_offset))
            self._unflushed_messages = max(self._unflushed_messages - pending, 0)
            self._last_flush_ms = self._clock()
            return self._recovery_point

    # -- truncation ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (replication uses it to drop
        what its leader never committed). Returns the new log end offset (<= ``offset``)."""
        with self._lock:
            if offset >= self._log_end_offset:
                return self._log_end_offset
            if offset <= self._bases[0]:
                self._truncate_fully(max(offset, 0))
                return self._log_end_offset
            self._generation += 1
            for base in [b for b in self._bases if b >= offset]:
                self._discard(self._segments.pop(base))
            self._bases = [b for b in self._bases if b < offset]
            active = self.active_segment
            active.truncate_to(offset)
            self._log_end_offset = max(active.next_offset, active.base_offset)
            self._after_truncation()
            return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        with self._lock:
            self._truncate_fully(offset)

    def _discard(self, segment: LogSegment) -> None:
        """Delete a segment now, or once the cleaner is done if it may be reading it."""
        if self._cleaning:
            segment.rename_to_deleted()
            self._deleted.append((self._clock(), segment))
        else:
            segment.delete()

    def _truncate_fully(self, offset: int) -> None:
        self._generation += 1
        for base in self._bases:
            self._discard(self._segments[base])
        self._segments.clear()
        self._bases = [offset]
        self._segments[offset] = self._new_segment(offset)
        self._log_end_offset = offset
        self._log_start_offset = offset
        self.leader_epochs.clear()  # nothing of the old epochs is left (Kafka does the same)
        self._after_truncation()

    def _after_truncation(self) -> None:
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        if self._high_watermark_follows_leo:
            self._high_watermark = self._log_end_offset
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._unflushed_messages = 0
        self._rebuild_producer_state()
        self.leader_epochs.truncate_from_end(self._log_end_offset)
        self.leader_epochs.truncate_from_start(self._log_start_offset)

    # -- retention -------------------------------------------------------------------------

    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply ``retention.ms`` and ``retention.bytes``, and drop segments wholly below the
        log start offset: delete the oldest whole segments that break any, never the active
        one and never one reaching the high watermark. Moves the log start offset. Returns
        how many segments were deleted."""
        now = self._clock() if now is None else now
        with self._lock:
            total = sum(self._segments[b].size for b in self._bases)
            deletable = []
            for i, base in enumerate(self._bases[:-1]):
                segment = self._segments[base]
                next_base = self._bases[i + 1]
                if next_base > self._high_watermark:
                    break
                expired = (
                    self.config.delete
                    and self.config.retention_ms >= 0
                    and now - segment.largest_timestamp() > self.config.retention_ms
                )
                oversized = (
                    self.config.delete
                    and self.config.retention_bytes >= 0
                    and total - segment.size >= self.config.retention_bytes
                )
                # Wholly below a log start moved by increment_log_start_offset.
                below_start = next_base <= self._log_start_offset
                if not (expired or oversized or below_start):
                    break
                deletable.append(segment)
                total -= segment.size
            for segment in deletable:
                self._segments.pop(segment.base_offset)
                self._bases.pop(0)
                segment.rename_to_deleted()
                self._deleted.append((now + self.config.file_delete_delay_ms, segment))
            if deletable:
                self._generation += 1
                self._log_start_offset = max(self._log_start_offset, self._bases[0])
                self._recovery_point = max(self._recovery_point, self._log_start_offset)
                self.leader_epochs.truncate_from_start(self._log_start_offset)
            return len(deletable)

    def purge_deleted_segments(self, now: int | None = None, force: bool = False) -> int:
        """Close and unlink segments deleted more than ``file.delete.delay.ms`` ago."""
        now = self._clock() if now is None else now
        with self._lock:
            if self._cleaning and not force:
                return 0  # the cleaner may be reading one of them
            due = [(t, s) for t, s in self._deleted if force or t <= now]
            self._deleted = [(t, s) for t, s in self._deleted if not (force or t <= now)]
        for _, segment in due:
            segment.delete()
        return len(due)

    def increment_log_start_offset(self, offset: int) -> None:
        """Move the log start offset forward (DeleteRecords); segments below it go at the
        next retention pass. The leader epochs start there at once (Kafka's
        ``maybeIncrementLogStartOffset``): OffsetForLeaderEpoch answers from the new start."""
        with self._lock:
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"expected a new log start offset <= high watermark {self._high_watermark}, "
                    f"found {offset}",
                    offset=offset,
                    log_start=self._log_start_offset,
                    log_end=self._log_end_offset,
                )
            self._log_start_offset = max(self._log_start_offset, offset)
            self.leader_epochs.truncate_from_start(self._log_start_offset)

    # -- compaction ------------------------------------------------------------------------

    def begin_cleaning(self) -> int:
        """Mark the log as being read by the cleaner; returns the generation to hand back to
        :meth:`replace_segments`. Until :meth:`end_cleaning`, no segment file is closed."""
        with self._lock:
            self._cleaning = True
            return self._generation

    def end_cleaning(self) -> None:
        with self._lock:
            self._cleaning = False

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty segment whose files end in ``.cleaned`` (stale ones are replaced)."""
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (self.directory / f"{base_offset:020d}{kind}{CLEANED_SUFFIX}").unlink(missing_ok=True)
        return self._new_segment(base_offset, CLEANED_SUFFIX)

    def replace_segments(self, new: LogSegment, old: list[LogSegment], generation: int) -> None:
        """Swap the flushed ``.cleaned`` segment ``new`` in for ``old`` (consecutive inactive
        segments, ``new`` at the first one's base) by ``log_loader``'s crash-safe renames.
        Raises :class:`CleaningAbortedError` (``new`` deleted, nothing changed) if the log's
        inactive segments changed since ``generation``."""
        with self._lock:
            current = [self._segments.get(s.base_offset) for s in old]
            if (
                generation != self._generation
                or any(c is not s for c, s in zip(current, old, strict=True))
                or old[-1] is self.active_segment
                or new.base_offset != old[0].base_offset
            ):
                new.delete()
                raise CleaningAbortedError(
                    f"{self.directory.name}: segments {[s.base_offset for s in old]} changed "
                    "while they were cleaned"
                )
            swap_files(self.directory, new, old)  # steps 2-4 under the lock: only renames
            delete_at = self._clock() + self.config.file_delete_delay_ms
            for segment in old:
                self._segments.pop(segment.base_offset)
                self._deleted.append((delete_at, segment))
            self._segments[new.base_offset] = new
            self._bases = sorted(self._segments)

    def last_records_of_producers(self) -> dict[int, LastRecord]:
        """Producer id → its last batch (Kafka's ``lastRecordsOfActiveProducers``): the
        cleaner keeps those batches."""
        with self._lock:
            return self.producer_state.last_records()

    # -- storage failures ------------------------------------------------------------------

    def _failed(self, op: str, exc: OSError, *, until_restart: bool = False) -> LogDirFailureError:
        return self._dir_failures.failed(self.directory, op, exc, until_restart=until_restart)

    def _undo_append(self, end: int) -> None:
        """Cut a written append back to ``end`` (the log end before it) and rebuild the state
        it touched. The in-memory log end moves back even if a file cannot be cut."""
        self._log_end_offset = end
        try:
            self.active_segment.truncate_to(end)
            self._after_truncation()
        except OSError as exc:  # the files no longer match the log: only a restart may tell
            self._failed("undo of a failed append", exc, until_restart=True)

    def reopen(self) -> None:
        """Cut the files back to what the log holds in memory (bytes a failed write left past
        the log end), before the log dir comes back online. Raises ``OSError``."""
        with self._lock:
            self.active_segment.cut_to_size()

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every segment (the caller writes the clean-shutdown marker). In an
        offline log dir only an fsync is tried; a write that fails marks it offline and raises
        :class:`LogDirFailureError` once every file is closed."""
        try:
            failure = self._dir_failures.failure(self.log_dir)
            if failure is None or failure.retryable:
                self.flush()  # what was acknowledged, made durable if the disk still can
            if failure is None:
                with self._lock:
                    self.producer_state.take_snapshot(self._log_end_offset)
                    self.active_segment.on_become_inactive()
                    self.active_segment.flush()
        except OSError as exc:
            raise self._failed("close", exc, until_restart=True) from exc
        finally:
            with self._lock:
                for segment in self._segments.values():
                    segment.close()
            self.purge_deleted_segments(force=True)

    def delete(self) -> None:
        """Close and remove every file of this log, and its directory."""
        with self._lock:
            for segment in self._segments.values():
                segment.delete()
            self._segments.clear()
            self._bases = []
        self.purge_deleted_segments(force=True)
        for entry in os.listdir(self.directory):
            (self.directory / entry).unlink()
        self.directory.rmdir()
