"""``LogSegment``: one ``.log`` file of record batches with its ``.index`` and ``.timeindex``.

Files, named by the segment's base offset as 20 zero-padded digits (Kafka's
``LogFileUtils``)::

    00000000000000368769.log        record batches, back to back, exactly as appended
    00000000000000368769.index      OffsetIndex: last offset of a batch → its position
    00000000000000368769.timeindex  TimeIndex: largest timestamp so far → its offset
    00000000000000368769.txnindex   TransactionIndex: the aborted transactions whose ABORT
                                    markers are in this segment (created on the first one)

While the log cleaner builds a replacement segment its files carry a suffix after the
extension (``...log.cleaned``, then ``...log.swap``; see ``log_loader``): ``suffix`` names it
and :meth:`change_file_suffixes` renames the files, the ``.log`` first (the order
``log_loader`` relies on).

Invariants: every byte of ``.log`` belongs to a whole batch (``recover`` restores this after a
crash by cutting at the first torn or corrupt batch); batch offsets strictly increase and are
all >= the base offset; every offset is < base + 2^31 so it fits the indexes' 4-byte relative
offset. ``read`` returns a :class:`FileSlice` of whole batches, fit for ``os.sendfile``.

Thread safety: ``append``, ``truncate_to``, ``recover`` and ``close`` must be serialized by
the owner (``Log`` holds its lock). ``read``, ``translate_offset`` and
``find_offset_by_timestamp`` may run beside an append: they look only at bytes that were whole
when they started. None of them may run beside ``truncate_to``: ``read`` trusts a caller's
``max_position`` to be a batch boundary of the segment as it is (``Log.read`` takes it from
the same contents under the same owner). ``flush`` may run on another thread at any time (it
only fsyncs).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from sluice.broker.log.errors import (
    CorruptIndexError,
    CorruptRecordError,
    SegmentOffsetOverflowError,
)
from sluice.broker.log.offset_index import OffsetIndex
from sluice.broker.log.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
    validate_batch,
)
from sluice.broker.log.records import decode_batch
from sluice.broker.log.time_index import TimeIndex
from sluice.broker.log.transaction_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MAX_RELATIVE_OFFSET = (1 << 31) - 1
# Header scans read blocks this large: one pread covers an index interval (4 KiB) and more.
_HEADER_BLOCK = 16 * 1024
# Recovery reads blocks this large (a batch larger than this is read on its own).
_RECOVERY_BLOCK = 1024 * 1024


def file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str) -> int:
    """The base offset in a segment file name; ``ValueError`` if it is not one."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        raise ValueError(f"expected a 20-digit base offset in {name!r}")
    return int(stem)


def _write_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """Write all of ``data`` at ``position``. A short write is followed by one for the rest,
    which either finishes or raises the real error (``ENOSPC``, ``EIO``)."""
    written = os.pwrite(fd, data, position)
    while written < len(data):
        n = os.pwrite(fd, memoryview(data)[written:], position + written)
        if n <= 0:
            raise OSError(errno.EIO, f"wrote {written} of {len(data)} bytes")
        written += n


class FileSlice(NamedTuple):
    """``size`` bytes of an open file from ``position``: whole batches, ready to send."""

    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        """The bytes themselves (for tests and for clients that are not sockets)."""
        return os.pread(self.fd, self.size, self.position)


class LogSegment:
    """One segment of a partition log. See the module docstring for layout and invariants."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_bytes: int = 10 * 1024 * 1024,
        now_ms: int | None = None,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix
        self.log_path = directory / (file_name(base_offset, LOG_SUFFIX) + suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._max_index_bytes = max_index_bytes
        self.index_rebuilt_because: str | None = None
        if self._size and not all(
            self._index_path(kind).exists() for kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        ):
            self.index_rebuilt_because = f"{self.log_path}: an index file is missing"
        try:
            self._open_indexes()
        except BaseException:
            # Out of descriptors or disk: give back what was opened, then fail.
            os.close(self._fd)
            raise
        # A corrupt .txnindex is dropped; the log sees the flag and rebuilds it by replay.
        self.txn_index_rebuilt_because: str | None = None
        try:
            self.txn_index = TransactionIndex(self._index_path(TXN_INDEX_SUFFIX))
        except CorruptIndexError as exc:
            self.txn_index_rebuilt_because = str(exc)
            self._index_path(TXN_INDEX_SUFFIX).unlink()
            self.txn_index = TransactionIndex(self._index_path(TXN_INDEX_SUFFIX))
        self._bytes_since_index = 0
        self._next_offset: int | None = None
        last_ts = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last_ts or (-1, base_offset)
        # ``segment.ms`` counts from here, on the broker's clock. Kafka ≥ 0.10.1 counts from
        # the first batch's timestamp instead, so a producer with a skewed clock (or replayed
        # old data) makes it roll on every append; the broker's own clock cannot do that.
        self.created_ms = int(time.time() * 1000) if now_ms is None else now_ms

    # -- properties ------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in ``.log``."""
        return self._size

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when it is empty)."""
        if self._next_offset is None:
            offset, position = self.offset_index.lookup(1 << 62)
            next_offset = self.base_offset
            for header in self._iter_headers(position):
                next_offset = header.next_offset
            self._next_offset = next_offset
        return self._next_offset

    def last_modified_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime * 1000)

    def largest_timestamp(self) -> int:
        """The largest record timestamp in the segment, or its file's modification time when
        no record carries one (Kafka's rule for time-based retention)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms()

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` if either index disagrees with the log."""
        self.offset_index.sanity_check(self._size)
        self.time_index.sanity_check(self.next_offset if self._size else self.base_offset + 1)

    # -- writing ---------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[BatchHeader]) -> int:
        """Append whole, validated batches; ``batches`` are their headers with positions
        relative to ``data``. Returns the position the data was written at.

        Offsets must increase from the segment's next offset: violating it is a bug in the
        caller, not bad input, and raises :class:`SegmentOffsetOverflowError` for an offset
        that does not fit, :class:`CorruptRecordError` for one that goes backwards.
        """
        if not batches:
            return self._size
        first, last = batches[0], batches[-1]
        next_offset = self.next_offset
        if first.base_offset < next_offset:
            raise CorruptRecordError(
                f"{self.log_path}: expected offsets from {next_offset}, "
                f"found a batch at {first.base_offset}"
            )
        last_offset = last.base_offset + last.last_offset_delta
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            raise SegmentOffsetOverflowError(
                f"{self.log_path}: offset {last_offset} is more than 2^31-1 past the "
                f"base offset {self.base_offset}"
            )
        # The running values live in locals and are stored only once every write succeeded,
        # so a failed append has nothing in memory to undo. Index entries are rare (one per
        # ``index.interval.bytes``): their counts are taken only before one is added.
        start = self._size
        max_timestamp, offset_of_max = self.max_timestamp, self.offset_of_max_timestamp
        since_index, interval = self._bytes_since_index, self.index_interval_bytes
        offset_entries = time_entries = -1  # -1: no index entry added yet
        writing = self.log_path
        try:
            _write_all(self._fd, data, start)
            for header in batches:
                if header.max_timestamp > max_timestamp:
                    max_timestamp = header.max_timestamp
                    offset_of_max = header.base_offset + header.last_offset_delta
                if since_index > interval:
                    if offset_entries < 0:
                        offset_entries, time_entries = len(self.offset_index), len(self.time_index)
                    writing = self.offset_index.path
                    self.offset_index.append(
                        header.base_offset + header.last_offset_delta, start + header.position
                    )
                    writing = self.time_index.path
                    self.time_index.maybe_append(max_timestamp, offset_of_max)
                    since_index = 0
                since_index += header.length + LOG_OVERHEAD
        except OSError as exc:
            # A full or failing disk: cut the files back, so no byte of this append stays.
            if offset_entries < 0:
                offset_entries, time_entries = len(self.offset_index), len(self.time_index)
            self._truncate_files(start, offset_entries, time_entries)
            raise OSError(exc.errno, exc.strerror or str(exc), str(writing)) from exc
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index = since_index
        self._size = start + len(data)
        self._next_offset = last_offset + 1
        return start

    def on_become_inactive(self) -> None:
        """Record the final largest timestamp so retention can read it after a restart."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that holds an offset >= ``offset`` (a batch holding ``offset``
        goes whole). Returns the number of bytes removed."""
        position = self.translate_offset(offset)
        if position is None:
            return 0
        removed = self._size - position
        self._truncate_at(position)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recompute what the remaining bytes say; they were valid when appended.
        self._next_offset = None
        self._bytes_since_index = 0
        self._recompute_max_timestamp()
        return removed

    def _truncate_at(self, position: int) -> None:
        os.ftruncate(self._fd, position)
        self._size = position

    def _truncate_files(self, size: int, offset_entries: int, time_entries: int) -> bool:
        """Set the sizes in memory back to ``size`` bytes of log and the given index entry
        counts, then cut the files to match. Returns False if a file could not be cut (the
        bytes past the end stay invisible; :meth:`cut_to_size` cuts them later)."""
        self._size = size
        try:
            self.offset_index.truncate_to_entries(offset_entries)
            self.time_index.truncate_to_entries(time_entries)
            os.ftruncate(self._fd, size)
        except OSError:
            return False
        return True

    def cut_to_size(self) -> None:
        """Cut ``.log`` and the indexes back to what the segment holds in memory: the bytes a
        failed append wrote and could not remove at once. Raises ``OSError``."""
        if os.fstat(self._fd).st_size != self._size:
            os.ftruncate(self._fd, self._size)
        self.offset_index.truncate_to_entries(len(self.offset_index))
        self.time_index.truncate_to_entries(len(self.time_index))
        self.txn_index.cut_to_size()

    def _recompute_max_timestamp(self) -> None:
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        offset, position = self.offset_index.lookup(1 << 62)
        entry = self.time_index.last_entry()
        if entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = entry
        for header in self._iter_headers(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = (
                    header.max_timestamp,
                    header.last_offset,
                )

    def _index_path(self, kind: str) -> Path:
        return self.directory / (file_name(self.base_offset, kind) + self.suffix)

    def _open_indexes(self) -> None:
        """Open both index files; rebuild them empty if one fails its format check."""
        offset_path = self._index_path(INDEX_SUFFIX)
        time_path = self._index_path(TIME_INDEX_SUFFIX)
        try:
            offset_index = OffsetIndex(offset_path, self.base_offset, self._max_index_bytes)
        except CorruptIndexError as exc:
            self.index_rebuilt_because = str(exc)
            self._reset_indexes()
            return
        try:
            time_index = TimeIndex(time_path, self.base_offset, self._max_index_bytes)
        except CorruptIndexError as exc:
            offset_index.close()
            self.index_rebuilt_because = str(exc)
            self._reset_indexes()
            return
        except BaseException:
            offset_index.close()
            raise
        self.offset_index, self.time_index = offset_index, time_index

    def _reset_indexes(self) -> None:
        """Empty both indexes (deleting their files) and open them anew."""
        for index in (getattr(self, "offset_index", None), getattr(self, "time_index", None)):
            if index is not None:
                index.close()
        for kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            self._index_path(kind).unlink(missing_ok=True)
        offset_index = OffsetIndex(
            self._index_path(INDEX_SUFFIX), self.base_offset, self._max_index_bytes
        )
        try:
            time_index = TimeIndex(
                self._index_path(TIME_INDEX_SUFFIX),
                self.base_offset,
                self._max_index_bytes,
            )
        except BaseException:
            offset_index.close()
            raise
        self.offset_index, self.time_index = offset_index, time_index

    def recover(self, max_batch_bytes: int = 1 << 31) -> tuple[int, str | None]:
        """Re-validate every batch, rebuild both indexes, and cut the file at the first torn
        or corrupt batch. Returns (bytes cut, why the scan stopped or None)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index = 0
        self._next_offset = self.base_offset
        valid_end = 0
        reason: str | None = None
        try:
            for header in self._iter_valid_batches(max_batch_bytes):
                if header.base_offset < self._next_offset:
                    reason = (
                        f"batch at position {header.position}: expected an offset >= "
                        f"{self._next_offset}, found {header.base_offset}"
                    )
                    break
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    reason = f"batch at position {header.position}: offset overflows the segment"
                    break
                # Same order as ``append``, so the rebuilt indexes equal the written ones.
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_timestamp = header.last_offset
                if self._bytes_since_index > self.index_interval_bytes:
                    self.offset_index.append(header.last_offset, header.position)
                    self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                    self._bytes_since_index = 0
                self._bytes_since_index += header.size
                self._next_offset = header.next_offset
                valid_end = header.position + header.size
        except CorruptRecordError as exc:
            reason = str(exc)
        cut = self._size - valid_end
        if cut:
            self._truncate_at(valid_end)
        return cut, reason

    # -- reading ---------------------------------------------------------------------------

    def _read_header(self, position: int) -> BatchHeader:
        return parse_header(os.pread(self._fd, HEADER_SIZE, position), 0, position)

    def _iter_headers(self, position: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers (not CRC-checked) of the batches from ``position`` up to ``end``."""
        stop = self._size if end is None else end
        block = b""
        block_start = position
        while position < stop:
            rel = position - block_start
            if rel + HEADER_SIZE > len(block):
                block = os.pread(self._fd, _HEADER_BLOCK, position)
                block_start, rel = position, 0
            header = parse_header(block, rel, position)
            if header.length <= 0:
                raise CorruptRecordError(
                    f"{self.log_path}: expected a positive Length at {position}, "
                    f"found {header.length}"
                )
            yield header
            position += header.size

    def _iter_valid_batches(self, max_batch_bytes: int) -> Iterator[BatchHeader]:
        """Fully validated batches from position 0, reading the file in large blocks."""
        for header, _ in self.iter_batches(max_batch_bytes):
            yield header

    def iter_batches(
        self, max_batch_bytes: int = 1 << 31
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch from position 0, validated, with its bytes (recovery, the log
        cleaner). Raises :class:`CorruptRecordError` at the first bad one."""
        position = 0
        block = b""
        block_start = 0
        size = self._size
        while position < size:
            rel = position - block_start
            if rel + HEADER_SIZE > len(block):
                block = os.pread(self._fd, _RECOVERY_BLOCK, position)
                block_start, rel = position, 0
            header = parse_header(block, rel, position)
            if header.size > max_batch_bytes or position + header.size > size:
                raise CorruptRecordError(
                    f"batch at position {position}: Length says {header.size} bytes, "
                    f"{size - position} remain in the file (limit {max_batch_bytes})"
                )
            if rel + header.size > len(block):
                block = os.pread(self._fd, max(_RECOVERY_BLOCK, header.size), position)
                block_start, rel = position, 0
            header = validate_batch(block, rel, position)
            yield header, memoryview(block)[rel : rel + header.size]
            position += header.size

    def read_batch(self, header: BatchHeader) -> bytes:
        """The bytes of the batch ``header`` (from :meth:`batch_headers`) describes."""
        return os.pread(self._fd, header.size, header.position)

    def batch_headers(self, from_offset: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches holding ``from_offset`` and after (all when None)."""
        position = 0 if from_offset is None else self.translate_offset(from_offset)
        if position is not None:
            yield from self._iter_headers(position)

    def translate_offset(self, offset: int, start_position: int = 0) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``, or None."""
        _, position = self.offset_index.lookup(offset)
        for header in self._iter_headers(max(position, start_position)):
            if header.last_offset >= offset:
                return header.position
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` of them
        (but at least one when ``min_one_batch``), ending at or before ``max_position`` (a
        batch boundary of the segment as it is now, e.g. the high watermark's position: a read
        that fits ends there unchecked). None when there is nothing."""
        limit_position = self._size if max_position is None else min(max_position, self._size)
        start = self.translate_offset(start_offset)
        if start is None or start >= limit_position:
            return None
        limit = min(limit_position, start + max_bytes)
        if limit == limit_position:
            # The rest fits: it ends on a batch boundary (the segment's size, or the caller's
            # ``max_position``), so no header need be read. A consumer reading a partition to
            # its end — every fetch of a load's small partitions — took one 16 KiB pread and
            # a walk of up to an index interval of headers here (a fifth of a broker's samples
            # serving 400 partitions of 100 small batches each).
            return FileSlice(self._fd, start, limit - start)
        # Jump near the limit through the index, then walk the last few batches.
        end = max(self.offset_index.lookup_position(limit), start)
        for header in self._iter_headers(end, limit_position):
            if header.position + header.size > limit:
                break
            end = header.position + header.size
        if end == start:
            if not min_one_batch:
                return None
            end = start + self._read_header(start).size
        return FileSlice(self._fd, start, end - start)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose
        timestamp is >= ``timestamp``, or None when the segment holds none."""
        # The entry just below the target: every record up to its offset is older than the
        # target, so the scan from there finds the first match even with ties.
        _, indexed_offset = self.time_index.lookup(timestamp - 1)
        position = self.translate_offset(max(indexed_offset, starting_offset))
        if position is None:
            return None
        for header in self._iter_headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                batch = os.pread(self._fd, header.size, header.position)
                for record in decode_batch(batch):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return record.offset, record.timestamp
        return None

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log and the indexes (safe to call from another thread)."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def set_last_modified(self, ms: int) -> None:
        """Set the ``.log`` file's modification time (a cleaned segment keeps its source's)."""
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the files from suffix ``old`` to ``new``, the ``.log`` first."""
        if self.suffix != old:
            raise ValueError(f"{self.log_path}: expected suffix {old!r}, found {self.suffix!r}")
        target = self.directory / (file_name(self.base_offset, LOG_SUFFIX) + new)
        os.rename(self.log_path, target)
        self.log_path = target
        self.suffix = new
        for index, kind in (
            (self.offset_index, INDEX_SUFFIX),
            (self.time_index, TIME_INDEX_SUFFIX),
        ):
            index.rename(self._index_path(kind))
        self.txn_index.rename(self._index_path(TXN_INDEX_SUFFIX))

    def rename_to_deleted(self) -> None:
        """Mark the segment deleted without closing it, so in-flight reads of its file stay
        valid until :meth:`delete` runs after ``file.delete.delay.ms``."""
        target = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.rename(self.log_path, target)
        self.log_path = target
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        txn = self.txn_index
        txn.rename(txn.path.with_name(txn.path.name + DELETED_SUFFIX))

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"
