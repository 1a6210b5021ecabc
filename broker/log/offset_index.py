"""``OffsetIndex``: the sparse ``.index`` file of a segment.

Byte layout: a sequence of 8-byte entries, no header::

    0  relative offset  int32   the last offset of a batch, minus the segment's base offset
    4  position         int32   byte position of that batch in the segment's ``.log``

One entry is written for the batch that crosses every ``index.interval.bytes`` (4096) of log
appended, so a lookup lands at most one interval (plus one batch) before the batch sought.

Invariants, checked on load by :meth:`sanity_check` and on append: relative offsets strictly
increase, positions strictly increase and stay below the ``.log`` size. A failed check raises
:class:`CorruptIndexError`; the segment then rebuilds its index from the log.
"""

from __future__ import annotations

import struct
from pathlib import Path

from sluice.broker.log.errors import CorruptIndexError, NonMonotonicOffsetError
from sluice.broker.log.index_file import IndexFile

ENTRY_SIZE = 8


class OffsetIndex(IndexFile):
    """Maps absolute offsets to byte positions. Not thread-safe (see ``index_file``)."""

    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_bytes: int = 10 * 1024 * 1024) -> None:
        super().__init__(path, base_offset, max(max_bytes // ENTRY_SIZE, 1))

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        return self.base_offset + key, value

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key - self.base_offset, value)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` and ``position`` must exceed the last entry's."""
        last = self.last_entry()
        if last is not None and (offset <= last[0] or position <= last[1]):
            raise NonMonotonicOffsetError(
                f"{self.path}: expected an entry after (offset {last[0]}, position {last[1]}), "
                f"found (offset {offset}, position {position})"
            )
        if offset < self.base_offset:
            raise NonMonotonicOffsetError(
                f"{self.path}: expected an offset >= base {self.base_offset}, found {offset}"
            )
        self._append(offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The largest entry with offset <= ``offset``, or (base offset, 0) when none is."""
        i = self.floor(offset)
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def lookup_position(self, position: int) -> int:
        """The largest indexed position <= ``position`` (a batch boundary), or 0."""
        lo, hi = 0, len(self.values)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.values[mid] <= position:
                lo = mid + 1
            else:
                hi = mid
        return self.values[lo - 1] if lo else 0

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self.truncate_to_entries(self.floor(offset - 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        prev_offset, prev_position = self.base_offset - 1, -1
        for offset, position in zip(self.keys, self.values, strict=True):
            if offset <= prev_offset or position <= prev_position or position >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: expected increasing entries below position {log_size}, "
                    f"found (offset {offset}, position {position}) after "
                    f"(offset {prev_offset}, position {prev_position})"
                )
            prev_offset, prev_position = offset, position
