"""The mechanics shared by ``.index`` and ``.timeindex``: an append-only file of fixed-size
big-endian entries, each a (key, value) pair, mirrored in memory for ``bisect`` lookups.

Kafka memory-maps a preallocated file; Sluice appends to the file and keeps the entries in two
``array`` columns instead. Indexes are sparse (one entry per ``index.interval.bytes`` of log,
2 MiB for a full 1 GiB segment), so the memory is small, and an append-only file needs no
trimming of preallocated zeros after a crash. ``max_entries`` bounds it the way
``segment.index.bytes`` bounds Kafka's: a full index makes the log roll.

Thread safety: none of the methods are thread-safe; the owning ``LogSegment`` serializes
writers, and readers only use lookups that tolerate a concurrent append (arrays grow, never
shrink, except under ``truncate``, which the log calls with its lock held).
"""

from __future__ import annotations

import errno
import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from sluice.broker.log.errors import CorruptIndexError


class IndexFile:
    """Fixed-size (key, value) entries in a file, keys strictly increasing."""

    ENTRY: struct.Struct  # set by subclasses
    KEY_TYPECODE = "q"
    VALUE_TYPECODE = "q"

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.keys: array[int] = array(self.KEY_TYPECODE)
        self.values: array[int] = array(self.VALUE_TYPECODE)
        # Whether ``max_entries`` is reached: a flag, not a property, because the log reads
        # it before every append; updated wherever ``keys`` changes (_load, _append, truncate).
        self.is_full = False
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._load()

    def _load(self) -> None:
        data = b""
        size = os.fstat(self._fd).st_size
        if size:
            data = os.pread(self._fd, size, 0)
        if len(data) % self.ENTRY.size:
            raise CorruptIndexError(
                f"{self.path}: expected a size that is a multiple of {self.ENTRY.size}, "
                f"found {len(data)} bytes"
            )
        for key, value in self.ENTRY.iter_unpack(data):
            k, v = self._decode(key, value)
            self.keys.append(k)
            self.values.append(v)
        self._size = len(data)
        self.is_full = len(self.keys) >= self.max_entries

    # Subclasses map between the stored (relative) form and the absolute form.
    def _decode(self, key: int, value: int) -> tuple[int, int]:
        return key, value

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def size_bytes(self) -> int:
        """Bytes of entries in the file."""
        return self._size

    def last_entry(self) -> tuple[int, int] | None:
        if not self.keys:
            return None
        return self.keys[-1], self.values[-1]

    def _append(self, key: int, value: int) -> None:
        if self.is_full:
            raise CorruptIndexError(f"{self.path}: full at {self.max_entries} entries")
        entry = self._encode(key, value)
        written = os.pwrite(self._fd, entry, self._size)
        if written != len(entry):  # a short write: the rest raises the real error (ENOSPC)
            rest = os.pwrite(self._fd, entry[written:], self._size + written)
            if written + rest != len(entry):
                raise OSError(errno.EIO, f"wrote {written + rest} of a {len(entry)}-byte entry")
        self._size += len(entry)
        self.keys.append(key)
        self.values.append(value)
        self.is_full = len(self.keys) >= self.max_entries

    def floor(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return bisect_right(self.keys, key) - 1

    def truncate_to_entries(self, n: int) -> None:
        """Keep the first ``n`` entries."""
        del self.keys[n:]
        del self.values[n:]
        self.is_full = len(self.keys) >= self.max_entries
        self._size = n * self.ENTRY.size
        os.ftruncate(self._fd, self._size)

    def reset(self) -> None:
        self.truncate_to_entries(0)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
