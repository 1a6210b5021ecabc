"""Finishing or undoing, when a log opens, what a crash interrupted in its directory — Kafka's
``LogLoader.removeTempFilesAndCollectSwapFiles`` and the swap passes of ``LogLoader.load``.

The log cleaner replaces old segments by a cleaned one in four steps (``Log.replace_segments``),
each made durable by an fsync of the directory before the next:

1. write the new segment as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``) and fsync it;
2. rename its files ``.cleaned`` → ``.swap``, the ``.log`` first;
3. rename every old segment's files to ``.deleted`` (removed later);
4. rename the new files ``.swap`` → live, the ``.log`` first.

On open, :func:`prepare_directory` restores one of the two whole states:

* ``.deleted`` files are removed (steps 3–4 had begun, or a retention delete did);
* if any ``.cleaned`` file remains, step 2 did not finish: every ``.swap`` file whose base
  offset is >= the smallest ``.cleaned`` base offset is removed, then every ``.cleaned`` file
  (the old segments are all still live: the swap is rolled back);
* for each remaining ``<base>.log.swap`` (step 2 finished), the range [its base offset, its
  next offset) is what it replaces: every live segment file whose base offset falls in it
  is removed (old segments that step 3 had not reached), then every ``.swap`` file is
  renamed live (the swap is completed). A ``.swap`` index without its ``.log.swap`` (step 4
  renamed the log, then the crash) is simply renamed too.

A crash at any point thus leaves every offset either in the old segments or in the cleaned
one, never in both and never in neither. Only segment files (``.log``, ``.index``,
``.timeindex``, ``.txnindex``) are touched; producer snapshots and checkpoints are left alone.

:func:`load_segments` runs it, then opens the segments and recovers the ones that need it
(``Log`` builds the rest of its state on them). :func:`swap_files` performs steps 2–4 for
``Log.replace_segments``. None of them is thread-safe: ``prepare_directory`` and
``load_segments`` run before the ``Log`` exists, ``swap_files`` under its lock.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from sluice.broker.log.checkpoint import fsync_dir
from sluice.broker.log.errors import StorageError
from sluice.broker.log.log_segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    parse_base_offset,
)
from sluice.broker.log.record_batch import HEADER_SIZE, LOG_OVERHEAD

log = logging.getLogger(__name__)

_SEGMENT_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_PREFIX = struct.Struct(">qi")  # BaseOffset, Length
_LAST_OFFSET_DELTA = struct.Struct(">i")


def prepare_directory(directory: Path) -> None:
    """Remove temporary files and finish or roll back an interrupted swap (module docstring)."""
    cleaned: list[str] = []
    swaps: list[str] = []
    for entry in os.listdir(directory):
        if entry.endswith(DELETED_SUFFIX) or entry.endswith(".tmp"):
            (directory / entry).unlink()  # an unfinished delete or checkpoint from the last run
        elif entry.endswith(CLEANED_SUFFIX):
            cleaned.append(entry)
        elif entry.endswith(SWAP_SUFFIX):
            swaps.append(entry)
    changed = bool(cleaned or swaps)
    if cleaned:
        min_cleaned = min(_base(e) for e in cleaned)
        for entry in [e for e in swaps if _base(e) >= min_cleaned]:
            log.info("%s: removing %s, part of a swap that did not finish", directory, entry)
            (directory / entry).unlink()
            swaps.remove(entry)
        for entry in cleaned:
            (directory / entry).unlink()
    ranges = [
        (_base(e), _next_offset(directory / e))
        for e in swaps
        if e == _name(_base(e), LOG_SUFFIX) + SWAP_SUFFIX
    ]
    if ranges:
        low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for entry in os.listdir(directory):
            if not entry.endswith(_SEGMENT_KINDS):
                continue
            try:
                base = parse_base_offset(entry)
            except ValueError:
                continue
            if low <= base < high:
                log.info("%s: removing %s, replaced by an interrupted swap", directory, entry)
                (directory / entry).unlink()
    for entry in swaps:
        live = entry[: -len(SWAP_SUFFIX)]
        log.info("%s: completing the swap of %s", directory, live)
        os.rename(directory / entry, directory / live)
    if changed:
        fsync_dir(directory)


def load_segments(
    directory: Path,
    new_segment: Callable[[int], LogSegment],
    recover_from: int | None,
    max_batch_bytes: int,
) -> tuple[dict[int, LogSegment], int]:
    """Open every segment of ``directory`` (after :func:`prepare_directory`), by base offset,
    and recover: after an unclean shutdown (``recover_from``, the recovery point) every
    segment from the one holding it; after a clean one (None) only those whose indexes fail
    their sanity check. Everything after a corrupt batch is unreachable, so the segments after
    one that was cut are deleted. Returns the segments and the bytes cut."""
    prepare_directory(directory)  # .deleted, .cleaned and .swap files
    bases = set()
    for entry in os.listdir(directory):
        if entry.endswith(LOG_SUFFIX):
            try:
                bases.add(parse_base_offset(entry))
            except ValueError:
                log.warning("ignoring %s: not a segment file name", directory / entry)
    for entry in os.listdir(directory):
        # An index without its log is left over from a crash mid-delete.
        if entry.endswith(_SEGMENT_KINDS[1:]):
            try:
                if parse_base_offset(entry) not in bases:
                    (directory / entry).unlink()
            except ValueError:
                pass
    ordered = sorted(bases)
    segments = {base: new_segment(base) for base in ordered}
    start = None
    if recover_from is not None and ordered:
        start = ordered[max(bisect_right(ordered, recover_from) - 1, 0)]
    cut_total = 0
    cut_from: int | None = None
    for base in ordered:
        segment = segments[base]
        needs_recovery = start is not None and base >= start
        reason = segment.index_rebuilt_because
        if not needs_recovery:
            try:
                if reason is None:
                    segment.sanity_check()
            except (StorageError, OSError) as exc:
                reason = str(exc)
            needs_recovery = reason is not None
        if needs_recovery:
            cut, why = segment.recover(max_batch_bytes)
            if reason:
                log.warning("%s: rebuilt indexes: %s", segment.log_path, reason)
            if cut:
                cut_total += cut
                log.warning("%s: cut %d bytes at recovery: %s", segment.log_path, cut, why)
                cut_from = base
                break
    if cut_from is not None:
        for base in [b for b in ordered if b > cut_from]:
            seg = segments.pop(base)
            cut_total += seg.size
            log.warning("%s: deleted after the corrupt segment before it", seg.log_path)
            seg.delete()
    return segments, cut_total


def swap_files(directory: Path, new: LogSegment, old: list[LogSegment]) -> None:
    """Steps 2–4: ``new`` (flushed, suffix ``.cleaned``) goes ``.swap``, the ``old`` segments
    ``.deleted`` (their files stay open for reads in flight), then ``new`` goes live."""
    new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(directory)
    for segment in old:
        segment.rename_to_deleted()
    fsync_dir(directory)
    new.change_file_suffixes(SWAP_SUFFIX, "")
    fsync_dir(directory)


def _base(entry: str) -> int:
    return parse_base_offset(entry)


def _name(base: int, kind: str) -> str:
    return f"{base:020d}{kind}"


def _next_offset(path: Path) -> int:
    """One past the last offset of the whole batches in a segment file, from their headers
    (the base offset when it has none). A ``.swap`` file was fsynced whole before it got its
    name, so a torn tail is not expected; the scan stops at one all the same."""
    base = parse_base_offset(path.name)
    next_offset = base
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            head = os.pread(fd, HEADER_SIZE, position)
            if len(head) < HEADER_SIZE:
                break
            base_offset, length = _PREFIX.unpack_from(head, 0)
            if length < HEADER_SIZE - LOG_OVERHEAD or position + LOG_OVERHEAD + length > size:
                break
            (delta,) = _LAST_OFFSET_DELTA.unpack_from(head, 23)
            next_offset = max(next_offset, base_offset + delta + 1)
            position += LOG_OVERHEAD + length
    finally:
        os.close(fd)
    return next_offset
