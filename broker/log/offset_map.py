"""``OffsetMap``: key → latest offset, for one cleaning pass (Kafka's ``SkimpyOffsetMap``).

Keys are stored as their 16-byte MD5 digest, as Kafka stores them, so an entry costs the same
whatever the key's size; two keys with one digest would be treated as one (probability about
n²/2^129 for n keys — Kafka accepts the same). ``put`` keeps the larger offset per key, the
map refuses keys beyond ``capacity`` (the cleaner then stops mapping and cleans what it
mapped), and ``latest_offset`` is the last offset whose batch is wholly mapped: a record
above it is kept by the cleaner whatever its key.

Thread safety: none; one cleaner thread owns one map.
"""

from __future__ import annotations

import hashlib

NOT_FOUND = -1


class OffsetMap:
    """A bounded map from key digests to offsets. See the module docstring."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"expected a capacity of at least one key, found {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.capacity

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` for ``key``; False (nothing stored) when the map is full."""
        digest = self.digest(key)
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            return False
        if offset > offsets.get(digest, NOT_FOUND):
            offsets[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1 (``NOT_FOUND``)."""
        return self._offsets.get(self.digest(key), NOT_FOUND)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
