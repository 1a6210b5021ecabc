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
record a new epoch the first time a batch carries it (a batch of an older epoch is accepted
only where that epoch is recorded to hold it: written ahead by the replication layer);
truncation at the end removes entries at or after the truncation offset; retention at the
start moves the first entry's offset.

**When the file is written** (Kafka's ``LeaderEpochFileCache``): a write is the whole file —
``.tmp``, fsync, rename, fsync of the directory — so a crash leaves the old file or the new.

* A new epoch (:meth:`assign`, :meth:`assign_all`) is durable before it returns, so before
  the batch it describes is written to the log: after any crash every batch on disk has its
  epoch in the file. Were it the other way round, an old leader coming back with a batch of
  epoch *e* but no *e* in its file would ask where an older epoch ended, get an end past its
  own divergent batch, and keep it. (An order that only waited before acknowledging would not
  do: that batch need not have been acknowledged.) The fsyncs cost 1–7 ms, so the broker's
  event loop does not call these first: the replication layer records the epoch from a worker
  thread before the append (a new leader's epoch when it takes over, as Kafka's
  ``Partition.makeLeader`` does; a follower's from the headers of the batches it fetched), and
  the append then finds it already recorded and written — no I/O.
* Truncations (:meth:`truncate_from_end`, :meth:`truncate_from_start`) change the entries but
  do not write (Kafka flushes them asynchronously): the next write, or :meth:`flush`, carries
  them. A crash before that leaves entries past the log's end or before its start, which
  ``Log`` cuts again when it loads. The follower flushes its truncation before it fetches
  again, so the file never names an epoch start past data written after the cut.
* :meth:`clear` removes the file at once (nothing of the log is left).

Thread safety: every method is safe from any thread. ``Log`` calls it under its own lock; the
replication layer calls :meth:`assign`, :meth:`assign_all` and :meth:`flush` from worker
threads. The entries have one lock, held only to change or copy them; file writes have
another, so a write in progress never makes a reader (or an append whose epoch is already
written) wait.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

from sluice.broker.log.checkpoint import fsync_dir
from sluice.broker.log.errors import StorageError

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.entries: list[tuple[int, int]] = []
        self._lock = threading.Lock()  # guards entries and the versions
        self._write_lock = threading.Lock()  # one file write at a time
        self._version = 0  # bumped by every change of ``entries``
        self._assigned = 0  # the version of the last new epoch
        self._written = 0  # the version the file holds (durably)
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

    def _write(self) -> None:
        """Write the entries as they are now, unless the file already holds them (or a newer
        state). Blocking; raises ``OSError``."""
        with self._write_lock:
            with self._lock:
                version, entries = self._version, list(self.entries)
            if version <= self._written:
                return
            lines = "".join(f"{epoch} {offset}\n" for epoch, offset in entries)
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(f"0\n{len(entries)}\n{lines}")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
                fsync_dir(self.path.parent)
            except FileNotFoundError:
                if self.path.parent.is_dir():
                    raise
                # The partition was deleted meanwhile: nothing to keep (Kafka's
                # writeIfDirExists).
            self._written = version

    def _changed(self) -> int:
        """Count a change of ``entries`` (under ``_lock``); returns the new version."""
        self._version += 1
        return self._version

    @property
    def latest_epoch(self) -> int:
        entries = self.entries
        return entries[-1][0] if entries else UNDEFINED

    @property
    def written(self) -> bool:
        """Whether the file holds every change so far (truncations included)."""
        return self._written >= self._version

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already the latest), and
        return once the file holds it. Blocking when the epoch is new, or recorded but its
        write still in progress on another thread; raises ``OSError`` if it cannot be written
        (the entry then stays in memory and the next write retries it)."""
        self.assign_all([(epoch, start_offset)])

    def assign_all(self, entries: Sequence[tuple[int, int]]) -> None:
        """:meth:`assign` each of ``entries`` in order, with one write for them all."""
        with self._lock:
            for epoch, start_offset in entries:
                if self._add(epoch, start_offset):
                    self._assigned = self._changed()
            pending = self._written < self._assigned
        if pending:
            self._write()

    def _add(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self.entries:
            last_epoch, last_offset = self.entries[-1]
            if epoch == last_epoch:
                return False
            if epoch < last_epoch and self._holds(epoch, start_offset):
                # Recorded ahead of the append (a follower writes every epoch a fetch starts
                # before appending its batches, which then assign their epochs in order).
                return False
            if epoch < last_epoch or start_offset < last_offset:
                raise StorageError(
                    f"{self.path}: expected an epoch after ({last_epoch}, {last_offset}), "
                    f"found ({epoch}, {start_offset})"
                )
            if start_offset == last_offset:
                self.entries = self.entries[:-1]  # the previous epoch wrote nothing
        self.entries = [*self.entries, (epoch, start_offset)]
        return True

    def _holds(self, epoch: int, offset: int) -> bool:
        """Whether ``epoch`` is recorded and ``offset`` falls in it."""
        entries = self.entries
        for i, (e, start) in enumerate(entries):
            if e == epoch:
                return start <= offset and (i + 1 == len(entries) or offset < entries[i + 1][1])
        return False

    def flush(self) -> None:
        """Write what changed since the last write (a truncation). Blocking: off the event
        loop. Raises ``OSError``."""
        if not self.written:
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the offset where it ended) — Kafka's
        OffsetForLeaderEpoch answer (``LeaderEpochFileCache.endOffsetFor``). The latest epoch
        ends at the log end. An epoch before the first known one (its records are gone, to
        retention or never here) gives (``epoch``, the first known epoch's start), as Kafka
        answers, so a follower or consumer still on it truncates where this log's history
        begins; ``-1`` (no epoch) and an empty cache give (-1, -1).

        One deliberate difference: an epoch after the latest known one gives (latest, log
        end), where Kafka's code answers (-1, -1) ("should never be hit": its new leader
        records its epoch before it answers). Here a new leader's epoch is written off the
        event loop (module doc), and until it is, (latest, log end) is the answer Kafka gives
        once the new epoch starts at that log end: appends wait for the write."""
        entries = self.entries  # replaced, never changed in place: a consistent copy
        if not entries or epoch == UNDEFINED:
            return UNDEFINED, UNDEFINED
        if epoch < entries[0][0]:
            return epoch, entries[0][1]
        for i, (e, _) in enumerate(entries):
            nxt = entries[i + 1] if i + 1 < len(entries) else None
            if nxt is None:
                return e, log_end_offset
            if nxt[0] > epoch:
                return e, nxt[1]
        return UNDEFINED, UNDEFINED  # unreachable

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was cut there). Not
        written until the next write (see the module docstring)."""
        with self._lock:
            kept = [(e, o) for e, o in self.entries if o < end_offset]
            if kept != self.entries:
                self.entries = kept
                self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts there. Not
        written until the next write (see the module docstring)."""
        with self._lock:
            kept = [(e, o) for e, o in self.entries if o >= start_offset]
            covering = [(e, o) for e, o in self.entries if o < start_offset]
            if covering and (not kept or kept[0][1] > start_offset):
                kept.insert(0, (covering[-1][0], start_offset))
            if kept != self.entries:
                self.entries = kept
                self._changed()

    def clear(self) -> None:
        """Forget every epoch and remove the file."""
        with self._write_lock, self._lock:
            self.entries = []
            self._written = self._assigned = self._changed()
            self.path.unlink(missing_ok=True)
