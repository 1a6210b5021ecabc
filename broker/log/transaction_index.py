"""``TransactionIndex``: a segment's ``.txnindex`` — the aborted transactions whose ABORT
markers lie in the segment (Kafka's ``TransactionIndex``).

A ``read_committed`` fetch must tell the consumer which of the batches it receives belong to
aborted transactions; scanning the log for ABORT markers on every fetch would read every
batch, so each marker of an aborted transaction adds an entry here instead, and Fetch's
``aborted_transactions`` is collected from the indexes of the segments it reads.

Byte layout (big-endian), 34-byte entries back to back, in the order their markers were
appended (Kafka's ``AbortedTxn``)::

     0  Version           int16   0
     2  ProducerId        int64
    10  FirstOffset       int64   the transaction's first offset in this partition
    18  LastOffset        int64   the offset of its ABORT marker
    26  LastStableOffset  int64   the partition's last stable offset once the marker was
                                  written: the first offset of the oldest transaction still
                                  open then, or LastOffset + 1 when none was

Invariants, checked on load and on append: the file size is a multiple of 34, every version
is 0, ``FirstOffset <= LastOffset`` and LastOffset strictly increases. A file that breaks one
raises :class:`CorruptIndexError` on load; the segment then rebuilds it from the log (see
``Log._rebuild_producer_state``).

The file is created on the first append (most segments never hold an aborted transaction);
entries are mirrored in memory. Thread safety: none; the owning ``LogSegment`` is driven by
``Log`` under its lock, and ``collect`` only reads the list, which appends extend in place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from pathlib import Path
from typing import NamedTuple

from sluice.broker.log.errors import CorruptIndexError, NonMonotonicOffsetError

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry: an aborted transaction of ``producer_id`` from ``first_offset`` to its
    ABORT marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment. See the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd = -1
        if path.exists():
            self._fd = os.open(path, os.O_RDWR, 0o644)
            self._load()

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: expected a size that is a multiple of {ENTRY_SIZE}, "
                f"found {len(data)} bytes"
            )
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != VERSION:
                raise CorruptIndexError(
                    f"{self.path}: expected entry version {VERSION}, found {version}"
                )
            self._check(AbortedTxn(pid, first, last, lso), CorruptIndexError)
            self.entries.append(AbortedTxn(pid, first, last, lso))

    def _check(self, txn: AbortedTxn, error: type[Exception]) -> None:
        if txn.first_offset > txn.last_offset:
            raise error(
                f"{self.path}: expected FirstOffset <= LastOffset, found {txn.first_offset} > "
                f"{txn.last_offset}"
            )
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise error(
                f"{self.path}: expected a LastOffset above {self.entries[-1].last_offset}, "
                f"found {txn.last_offset}"
            )

    @property
    def size_bytes(self) -> int:
        return len(self.entries) * ENTRY_SIZE

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of an ABORT marker; raises :class:`NonMonotonicOffsetError` if its
        LastOffset is not above the last entry's (a bug in the caller)."""
        self._check(txn, NonMonotonicOffsetError)
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        position = len(self.entries) * ENTRY_SIZE
        data = _ENTRY.pack(VERSION, *txn)
        try:
            written = os.pwrite(self._fd, data, position)
            if written != len(data):  # a short write: the rest raises the real error
                written += os.pwrite(self._fd, data[written:], position + written)
            if written != len(data):
                raise OSError(errno.EIO, f"short write of a {ENTRY_SIZE}-byte entry")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)  # else cut_to_size cuts it later
            raise OSError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc
        self.entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [``fetch_offset``, ``upper_bound``), and
        whether the search is complete: an entry whose LastStableOffset reaches the upper
        bound proves that no later segment holds a transaction begun before it (Kafka's
        ``collectAbortedTxns``)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at ``offset`` or after."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        if self._fd >= 0:
            os.ftruncate(self._fd, keep * ENTRY_SIZE)

    def cut_to_size(self) -> None:
        """Cut the file to the entries held in memory (after a failed append)."""
        if self._fd >= 0 and os.fstat(self._fd).st_size != self.size_bytes:
            os.ftruncate(self._fd, self.size_bytes)

    def reset(self) -> None:
        """Drop every entry (the segment is about to be replayed)."""
        self.truncate_to(-1)

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        if self._fd >= 0 or self.path.exists():
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
