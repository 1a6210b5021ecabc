"""``LeaderEpochCache``: each leader epoch of a partition and the first offset written in it,
kept in the partition dir as ``leader-epoch-checkpoint`` (Kafka's file, same text format as
the offset checkpoints)::

    0          version
    2          number of entries
    0 0        epoch, start offset — one line each, epochs and offsets increasing
    3 1842

Why: a follower that comes back must drop what its old leader never committed. Asking the
new leader "where did my last epoch end?" (OffsetForLeaderEpoch) and truncating there keeps
exactly the committed prefix — the high watermark alone can lose committed messages or keep
divergent ones (KIP-101). ``end_offset_for(epoch)`` answers that question on the leader.

Invariants, checked on every change: epochs and start offsets strictly increase. Appends
record a new epoch the first time a batch carries it; truncation at the end removes entries
at or after the truncation offset; retention at the start moves the first entry's offset.
Thread safety: none; ``Log`` calls it under its lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from sluice.broker.log.checkpoint import fsync_dir
from sluice.broker.log.errors import StorageError

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.entries: list[tuple[int, int]] = []
        self._load()

    def _load(self) -> None:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return
        try:
            if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
                raise ValueError("bad header")
            entries = [(int(a), int(b)) for a, b in (line.split() for line in lines[2:])]
        except (ValueError, IndexError):
            # A torn file: start empty; replication re-learns epochs from the leader.
            self.entries = []
            return
        self.entries = entries

    def _save(self) -> None:
        lines = "".join(f"{epoch} {offset}\n" for epoch, offset in self.entries)
        text = f"0\n{len(self.entries)}\n{lines}"
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already the latest)."""
        if epoch < 0:
            return
        if self.entries:
            last_epoch, last_offset = self.entries[-1]
            if epoch == last_epoch:
                return
            if epoch < last_epoch or start_offset < last_offset:
                raise StorageError(
                    f"{self.path}: expected an epoch after ({last_epoch}, {last_offset}), "
                    f"found ({epoch}, {start_offset})"
                )
            if start_offset == last_offset:
                self.entries.pop()  # the previous epoch wrote nothing
        self.entries.append((epoch, start_offset))
        self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the offset where it ended) — Kafka's
        OffsetForLeaderEpoch answer. The latest epoch ends at the log end; an epoch before
        the first known one gives (-1, -1)."""
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED, UNDEFINED
        for i, (e, _) in enumerate(self.entries):
            nxt = self.entries[i + 1] if i + 1 < len(self.entries) else None
            if nxt is None:
                return e, log_end_offset
            if nxt[0] > epoch:
                return e, nxt[1]
        return UNDEFINED, UNDEFINED  # unreachable

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was cut there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts there."""
        kept = [(e, o) for e, o in self.entries if o >= start_offset]
        covering = [(e, o) for e, o in self.entries if o < start_offset]
        if covering and (not kept or kept[0][1] > start_offset):
            kept.insert(0, (covering[-1][0], start_offset))
        if kept != self.entries:
            self.entries = kept
            self._save()

    def clear(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)
