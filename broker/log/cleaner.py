"""The log cleaner: ``Cleaner`` compacts one log, ``LogCleaner`` runs it on background
threads (Kafka's ``LogCleaner.scala``).

A pass over one log (``Cleaner.clean``), given its first dirty and first uncleanable offsets
(``cleaner_manager``):

1. **Map**: read the dirty inactive segments [first dirty, first uncleanable) and record in
   an :class:`~sluice.broker.log.offset_map.OffsetMap` each key's latest offset. The map is
   bounded; when it fills, mapping stops after the last whole batch and the pass cleans
   only up to there. ``end offset`` = the map's latest offset + 1 is where the next pass
   starts (the cleaner checkpoint).
2. **Group**: the segments from the log start up to the end offset, in runs whose total
   ``.log`` size fits ``segment.bytes`` and whose index sizes fit ``segment.index.bytes``
   (Kafka's ``groupSegmentsBySize``), so small cleaned segments merge into one.
3. **Rewrite** each group into one ``.cleaned`` segment (indexes rebuilt by appending), batch
   by batch with :func:`~sluice.broker.log.record_filter.filter_batch`:

   * a record is kept if its offset is above the map's latest offset, or it is its key's
     latest record and either has a value or is a tombstone whose batch's delete horizon
     (``delete.retention.ms`` after the cleaning that first kept it) has not passed; a
     record without a key is dropped (Kafka's rule);
   * a batch is kept even when emptied if it is its producer's last batch (so idempotence
     state, the last sequence and epoch, survives a restart) or the last batch before the
     first uncleanable offset (so the last offset is not lost);
   * offsets never change: kept batches keep their base and last offsets.

4. **Swap** it in with ``Log.replace_segments`` (crash-safe, see ``log_loader``).

Transactions (Kafka's ``CleanedTransactionMetadata``, see ``cleaned_transactions``): only
offsets below the last stable offset are cleaned (see ``cleaner_manager``), so every
transaction there is decided. The batches of aborted transactions (known from the
transaction indexes) are left out of the offset map — an aborted record never hides a
committed one — and dropped when rewriting, unless one is its producer's last batch (kept
empty, as any such batch). A marker (control batch) stays while any batch of its
transaction is left in the log; once none is (a pass found none), that pass stamps the
marker's batch with a delete horizon (``delete.retention.ms`` on, as for tombstones,
KIP-534) and the first pass after the horizon removes it — unless it is its producer's last
batch (the producer's epoch, for fencing), which stays, emptied. A cleaned segment's
``.txnindex`` holds the entries of the ABORT markers kept whose aborted data is still there,
so ``read_committed`` fetches still learn of every aborted batch they may receive.

Thread safety: a ``Cleaner`` is used by one thread at a time (it holds its lock while
cleaning). The log is read without its lock while appends, reads and fetches go on: only
inactive segments below the high watermark are read, ``Log.begin_cleaning`` keeps their files
open, and the swap happens under the log's lock and aborts if a truncation or a retention
delete changed the segments meanwhile (the pass is retried later). ``LogCleaner``'s methods
are thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sluice.broker.log.cleaned_transactions import CleanedTransactions
from sluice.broker.log.cleaner_config import CleanerConfig
from sluice.broker.log.cleaner_manager import LogCleanerManager, LogToClean, segments_overlapping
from sluice.broker.log.compaction_errors import CleaningAbortedError, OffsetMapTooSmallError
from sluice.broker.log.control_batch import read_marker
from sluice.broker.log.log import Log, now_ms
from sluice.broker.log.log_dir_failure_channel import LogDirFailureChannel
from sluice.broker.log.log_segment import CLEANED_SUFFIX, LogSegment
from sluice.broker.log.offset_map import OffsetMap
from sluice.broker.log.producer_state import LastRecord
from sluice.broker.log.record_batch import BatchHeader, parse_header
from sluice.broker.log.record_filter import (
    BatchRetention,
    RawRecord,
    filter_batch,
    iter_records,
    record_bytes,
)
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

_WRITE_CHUNK = 1 << 20  # cleaned batches are appended in chunks of about this size


@dataclass
class CleanerStats:
    """What one pass did (Kafka's ``CleanerStats``)."""

    end_offset: int = -1
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records_read: int = 0
    segments_cleaned: int = 0
    groups: list[list[int]] = field(default_factory=list)  # base offsets per group
    started: float = field(default_factory=time.perf_counter)
    elapsed_s: float = 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.elapsed_s if self.elapsed_s else 0.0


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive runs of ``segments`` whose ``.log`` sizes sum to at most ``max_size``,
    whose index sizes each sum to at most ``max_index_size``, and whose offsets fit one
    segment's 4-byte relative offsets (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[LogSegment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index.size_bytes
        time_size = group[0].time_index.size_bytes
        while rest:
            nxt = rest[0]
            # The last offset of ``nxt`` is at most the next base - 1 (or the bound - 1).
            last = (rest[1].base_offset if len(rest) > 1 else first_uncleanable) - 1
            if (
                log_size + nxt.size > max_size
                or index_size + nxt.offset_index.size_bytes > max_index_size
                or time_size + nxt.time_index.size_bytes > max_index_size
                or (nxt.size > 0 and last - group[0].base_offset > (1 << 31) - 1)
            ):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += nxt.offset_index.size_bytes
            time_size += nxt.time_index.size_bytes
        groups.append(group)
    return groups


class Cleaner:
    """Compacts one log at a time with its own offset map. See the module docstring."""

    def __init__(
        self,
        max_keys: int,
        check_done: Callable[[TopicPartition], None] = lambda _tp: None,
    ) -> None:
        self.offset_map = OffsetMap(max_keys)
        self._check_done = check_done
        self.lock = threading.Lock()

    def clean(self, cleanable: LogToClean, now: int) -> CleanerStats:
        """Compact [log start, first uncleanable) of ``cleanable.log``; returns the stats,
        whose ``end_offset`` is the next first dirty offset. Raises
        :class:`CleaningAbortedError` if the log changed under it (nothing swapped in for
        the group being cleaned; earlier groups of the pass stay swapped, which is safe)."""
        with self.lock:
            return self._clean(cleanable, now)

    def _clean(self, cleanable: LogToClean, now: int) -> CleanerStats:
        stats = CleanerStats()
        target = cleanable.log
        tp = cleanable.tp
        generation = target.begin_cleaning()
        try:
            inactive = target.segments()[:-1]
            start, upper = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
            if upper <= start:
                stats.end_offset = start  # nothing dirty is cleanable yet
                return stats
            self._build_offset_map(tp, target, inactive, start, upper, stats)
            end_offset = self.offset_map.latest_offset + 1
            if end_offset <= start:
                raise OffsetMapTooSmallError(
                    f"{tp}: expected the key map ({self.offset_map.capacity} keys) to hold at "
                    f"least one batch from offset {start}, found it full before"
                )
            to_clean = [s for s in inactive if s.base_offset < end_offset]
            config = target.config
            producers = target.last_records_of_producers()
            txns = CleanedTransactions()  # carried from group to group, as Kafka does
            for group in group_segments_by_size(
                to_clean, config.segment_bytes, config.segment_index_bytes, upper
            ):
                stats.groups.append([s.base_offset for s in group])
                self._clean_segments(
                    tp, target, group, now, producers, txns, upper, generation, stats
                )
            stats.end_offset = end_offset
            stats.elapsed_s = time.perf_counter() - stats.started
            return stats
        finally:
            target.end_cleaning()

    # -- step 1: the offset map ------------------------------------------------------------

    def _build_offset_map(
        self,
        tp: TopicPartition,
        target: Log,
        inactive: list[LogSegment],
        start: int,
        end: int,
        stats: CleanerStats,
    ) -> None:
        self.offset_map.clear()
        dirty = segments_overlapping(inactive, start, end)
        txns = CleanedTransactions(target.collect_aborted_transactions(start, end))
        for i, segment in enumerate(dirty):
            self._check_done(tp)
            following = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(target, segment, start, txns, stats):
                return  # the map is full: clean what it covers
            # Offsets may have gaps (an earlier cleaning): the segment is mapped to its end.
            self.offset_map.update_latest_offset(following - 1)

    def _map_segment(
        self,
        target: Log,
        segment: LogSegment,
        start: int,
        txns: CleanedTransactions,
        stats: CleanerStats,
    ) -> bool:
        offset_map = self.offset_map
        for header, batch in segment.iter_batches(target.config.max_message_bytes + 1024):
            if header.is_control:
                txns.on_marker(header, read_marker(batch, header._replace(position=0)))
            elif header.last_offset < start:
                txns.on_batch(header)
            elif not txns.on_batch(header):  # an aborted batch hides no key
                for record in iter_records(record_bytes(batch, header), header):
                    stats.map_records_read += 1
                    key = record.key
                    if (
                        key is not None
                        and record.offset >= start
                        and not offset_map.put(key, record.offset)
                    ):
                        return True
            if header.last_offset >= start:
                offset_map.update_latest_offset(header.last_offset)
        return False

    # -- steps 3 and 4: rewrite a group and swap it in --------------------------------------

    def _clean_segments(
        self,
        tp: TopicPartition,
        target: Log,
        group: list[LogSegment],
        now: int,
        producers: dict[int, LastRecord],
        txns: CleanedTransactions,
        upper_bound: int,
        generation: int,
        stats: CleanerStats,
    ) -> None:
        cleaned = target.new_cleaned_segment(group[0].base_offset)
        try:
            for i, segment in enumerate(group):
                self._check_done(tp)
                # Every aborted transaction with a batch in the segment, from the whole log's
                # indexes (its marker may lie in a later segment), as Kafka's cleanSegments.
                end = group[i + 1].base_offset if i + 1 < len(group) else segment.next_offset
                txns.add_aborted(target.collect_aborted_transactions(segment.base_offset, end))
                self._clean_into(target, segment, cleaned, now, producers, txns, upper_bound, stats)
                for txn in txns.cleaned_index:
                    cleaned.txn_index.append(txn)
                txns.cleaned_index.clear()
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms())
            self._check_done(tp)
            target.replace_segments(cleaned, group, generation)
        except BaseException:
            # Before the first rename the ``.cleaned`` files are only ours to drop. After it
            # (an I/O error mid-swap) they must stay: the old segments may already be
            # ``.deleted``, and the next open finishes the swap (``log_loader``).
            if cleaned.suffix == CLEANED_SUFFIX:
                cleaned.delete()
            raise
        stats.segments_cleaned += len(group)

    def _clean_into(
        self,
        target: Log,
        source: LogSegment,
        dest: LogSegment,
        now: int,
        producers: dict[int, LastRecord],
        txns: CleanedTransactions,
        upper_bound: int,
        stats: CleanerStats,
    ) -> None:
        offset_map = self.offset_map
        latest = offset_map.latest_offset
        delete_retention_ms = target.config.delete_retention_ms
        out = bytearray()
        headers: list[BatchHeader] = []

        def keep(record: RawRecord, header: BatchHeader, discard: bool) -> bool:
            stats.records_read += 1
            if discard:
                return False  # aborted data or an expired marker, even in a batch kept empty
            if record.offset > latest or header.is_control:
                return True
            if record.key is None:
                return False  # a keyless record on a compacted log (Kafka drops it)
            if record.offset < offset_map.get(record.key):
                return False  # a later record has this key
            horizon = header.delete_horizon_ms
            return record.has_value or horizon is None or now < horizon

        for header, batch in source.iter_batches(target.config.max_message_bytes + 1024):
            stats.bytes_read += header.size
            if header.is_control:
                may_go = txns.on_marker(header, read_marker(batch, header._replace(position=0)))
                horizon = header.delete_horizon_ms
                discard = may_go and horizon is not None and horizon <= now
            else:
                may_go = discard = txns.on_batch(header)
            data, kept = filter_batch(
                batch,
                header,
                _batch_retention(header, producers, upper_bound, discard),
                lambda r, h=header, d=discard: keep(r, h, d),  # type: ignore[misc]
                now_ms=now,
                delete_retention_ms=delete_retention_ms,
                contains_marker_for_empty_txn=may_go and header.is_control,
            )
            stats.records_kept += kept
            if data is None:
                continue
            headers.append(parse_header(data, 0, len(out)))
            out += data
            if len(out) >= _WRITE_CHUNK:
                dest.append(out, headers)
                stats.bytes_written += len(out)
                out, headers = bytearray(), []
        if headers:
            dest.append(out, headers)
            stats.bytes_written += len(out)


def _batch_retention(
    header: BatchHeader, producers: dict[int, LastRecord], upper_bound: int, discard: bool
) -> BatchRetention:
    """Kafka's ``checkBatchRetention``: a producer's last batch stays (emptied if need be) —
    its last data batch holds its last sequence, and a marker that is its last batch holds
    its epoch, for fencing; so does the last batch of the cleaned range (its last offset)."""
    last = producers.get(header.producer_id) if header.producer_id >= 0 else None
    if last is not None and (
        header.last_offset == last.last_data_offset
        if last.last_data_offset is not None
        else header.is_control and header.producer_epoch == last.producer_epoch
    ):
        return BatchRetention.RETAIN_EMPTY
    if header.next_offset == upper_bound:
        return BatchRetention.RETAIN_EMPTY
    return BatchRetention.DELETE if discard else BatchRetention.DELETE_EMPTY


class LogCleaner:
    """The cleaner threads (``log.cleaner.threads``) over a :class:`LogCleanerManager`."""

    def __init__(
        self,
        config: CleanerConfig,
        manager: LogCleanerManager,
        *,
        clock: Callable[[], int] = now_ms,
        dir_failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.dir_failures = dir_failures or LogDirFailureChannel()
        self._clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.cleaners = [
            Cleaner(config.max_keys_per_thread, manager.check_done)
            for _ in range(config.num_threads)
        ]
        self.last_stats: CleanerStats | None = None

    def startup(self) -> None:
        """Start the threads (if ``log.cleaner.enable``)."""
        if not self.config.enable or self._threads:
            return
        self._stop.clear()
        for i, cleaner in enumerate(self.cleaners):
            thread = threading.Thread(
                target=self._run, args=(cleaner,), name=f"sluice-log-cleaner-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Stop the threads; a pass in progress finishes its current group first."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()

    def _run(self, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest(cleaner)
            except Exception:  # a background job must outlive one bad pass, loudly
                log.exception("log cleaner pass failed")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000)

    def clean_filthiest(self, cleaner: Cleaner | None = None) -> bool:
        """Clean the dirtiest log that needs it, if any; True if one was cleaned."""
        now = self._clock()
        chosen = self.manager.grab_filthiest(now)
        if chosen is None:
            return False
        if self.dir_failures.is_offline(chosen.log.log_dir):
            self.manager.done_cleaning(chosen.tp, None)  # it writes nothing there until back
            return False
        self._clean(cleaner or self.cleaners[0], chosen, now)
        return True

    def clean_log(self, tp: TopicPartition, target: Log) -> CleanerStats | None:
        """Clean ``target`` now, whatever its dirty ratio (tools and tests)."""
        self.manager.begin(tp)
        now = self._clock()
        chosen = LogToClean.of(tp, target, self.manager.checkpoint_of(tp), now)
        return self._clean(self.cleaners[0], chosen, now)

    def _clean(self, cleaner: Cleaner, chosen: LogToClean, now: int) -> CleanerStats | None:
        end_offset = None
        try:
            stats = cleaner.clean(chosen, now)
            end_offset = stats.end_offset
            self.last_stats = stats
            log.info(
                "cleaned %s up to offset %d: %d of %d records kept, %.1f MB/s",
                chosen.tp, end_offset, stats.records_kept, stats.records_read, stats.mb_per_s,
            )  # fmt: skip
            return stats
        except CleaningAbortedError as exc:
            log.info("%s; it will be cleaned again later", exc)
            return None
        except OSError as exc:  # a full or failing disk: one line, from the channel
            self.dir_failures.fail(chosen.log.log_dir, f"cleaning {chosen.tp}", exc)
            return None
        finally:
            self.manager.done_cleaning(chosen.tp, end_offset)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)
