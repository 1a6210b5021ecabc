"""``TimeIndex``: the sparse ``.timeindex`` file of a segment.

Byte layout: a sequence of 12-byte entries, no header::

    0  timestamp        int64   the largest timestamp seen in the segment so far
    8  relative offset  int32   the offset of the record carrying it, minus the base offset

An entry is added beside each offset-index entry, and once more when the segment stops being
the active one, but only when the timestamp grew: timestamps strictly increase, so a lookup
by timestamp is a ``bisect``. Its last entry gives the segment's largest timestamp, which
time-based retention reads.

Invariants, checked on load and on append: timestamps and offsets strictly increase and the
offsets lie in the segment. A failed check raises :class:`CorruptIndexError`.
"""

from __future__ import annotations

import struct
from pathlib import Path

from sluice.broker.log.errors import CorruptIndexError
from sluice.broker.log.index_file import IndexFile

ENTRY_SIZE = 12


class TimeIndex(IndexFile):
    """Maps timestamps to offsets. Not thread-safe (see ``index_file``)."""

    ENTRY = struct.Struct(">qi")

    def __init__(self, path: Path, base_offset: int, max_bytes: int = 10 * 1024 * 1024) -> None:
        super().__init__(path, base_offset, max(max_bytes // ENTRY_SIZE, 1))

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        return key, self.base_offset + value

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value - self.base_offset)

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if the timestamp is larger than the last one's."""
        last = self.last_entry()
        if last is not None and (timestamp <= last[0] or offset < last[1]):
            return False
        if self.is_full:
            return False
        self._append(timestamp, offset)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= ``timestamp``, or (-1, base offset)."""
        i = self.floor(timestamp)
        if i < 0:
            return -1, self.base_offset
        return self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        n = len(self.values)
        while n and self.values[n - 1] >= offset:
            n -= 1
        self.truncate_to_entries(n)

    def sanity_check(self, next_offset: int) -> None:
        prev_ts, prev_offset = None, self.base_offset - 1
        for ts, offset in zip(self.keys, self.values, strict=True):
            if (
                (prev_ts is not None and ts <= prev_ts)
                or offset < prev_offset
                or (offset >= next_offset)
            ):
                raise CorruptIndexError(
                    f"{self.path}: expected increasing timestamps and offsets below "
                    f"{next_offset}, found (timestamp {ts}, offset {offset}) after "
                    f"(timestamp {prev_ts}, offset {prev_offset})"
                )
            prev_ts, prev_offset = ts, offset
