"""``LogMove``: one partition's log moved to another log dir while it serves (Kafka's future
replica, ``ReplicaAlterLogDirsThread`` and ``LogManager.replaceCurrentWithFutureLog``).

Directories (Kafka's names; ``<id>`` is one random 32-hex-digit id per move)::

    <source dir>/<topic>-<p>/                  the log, serving reads and writes throughout
    <dest dir>/<topic>-<p>.<id>-future/        the copy being built
    <source dir>/<topic>-<p>.<id>-delete/      the old log once the copy has replaced it

Steps:

1. **Copy** (no lock held): every file of the partition directory — segments, indexes,
   ``.txnindex`` files, producer snapshots, ``leader-epoch-checkpoint`` — is copied into the
   ``-future`` dir, in passes, each pass copying only what changed since the last: the new
   bytes of a file that only grew (segments and indexes are append-only), the whole file
   otherwise. Passes repeat until one copies under ``catch_up_bytes`` (bounded in count).
2. **Catch up and switch** (under the log's lock, so no append, roll, truncation or
   retention runs): flush the log, snapshot its producer state at the log end, copy the last
   changes, remove copies of files the log no longer has (retention, truncation), fsync every
   copied file and the ``-future`` dir, and check that every file has the source's size;
3. **Commit**, inside ``committing()`` (the log manager writes the destination's
   checkpoints with this partition's log start offset and recovery point first, and counts
   the partition in the destination when it ends): rename the source to ``-delete`` and
   fsync its log dir. From here on the copy is the log;
4. rename ``-future`` to ``<topic>-<p>`` and fsync the destination log dir;
5. open the moved log and switch the live :class:`Log` object to it: the same object keeps
   serving (every holder of it — partitions, coordinators, the cleaner — sees the move at
   once, under its lock), its segments, producer state and leader-epoch cache now those of
   the new dir; its offsets (start, high watermark, end) are unchanged. The old segments
   stay open until ``file.delete.delay.ms`` (fetches already sending from them finish);
6. release the lock and remove the ``-delete`` dir.

When a file changed between passes is decided by the log's *generation* (bumped by every
truncation and retention deletion): after a change, the files of the segments from the
active one on may have been cut and rewritten, so they are copied whole again. A failed
append that was undone does not bump it; instead a failure of the source or destination dir
cancels the move (the log manager forwards the failure channel's events to :meth:`cancel`).

Crash states (each rename made durable by an fsync of its directory before the next step),
restored at startup by :func:`resolve_interrupted_moves` before any log is loaded:

* during 1–2: the source is whole under its name and a ``-future`` dir exists → the
  ``-future`` dir is removed (the move did not happen);
* after 3, before 4: a ``-delete`` dir and a ``-future`` dir with no source → the
  ``-future`` dir (complete: fsynced in step 2) is renamed into place;
* after 4: the moved log under its name (and maybe a ``-delete`` dir).

A ``-delete`` dir is always removed (the log manager does it as it loads). So after a crash
at any point exactly one complete log is loaded, and the log is never served from two dirs.
A move cancelled or failed before step 3 removes its ``-future`` dir and changes nothing.

Thread safety: :meth:`run` runs on one thread (the log manager's mover thread);
:meth:`cancel` and :meth:`progress` may be called from any thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from sluice.broker.log.checkpoint import fsync_dir
from sluice.broker.log.errors import LogDirectoryError, StorageError
from sluice.broker.log.log import Log
from sluice.broker.log.log_segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    parse_base_offset,
)
from sluice.broker.log.roll_limits import NO_ROLL_LIMITS
from sluice.common.topic_partition import InvalidTopicError, TopicPartition

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_SKIPPED = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
_CHUNK = 1 << 20
_MAX_PASSES = 20  # unlocked catch-up passes before the final one under the lock


class LogMoveCancelledError(StorageError):
    """A log move was cancelled before it replaced the log (a new request, a deleted
    partition, a shutdown, or a failure of one of its log dirs); nothing was changed."""


@dataclass
class _Copied:
    inode: int
    size: int
    generation: int


def future_dir_name(tp: TopicPartition, move_id: str) -> str:
    return f"{tp.dir_name}.{move_id}{FUTURE_SUFFIX}"


def delete_dir_name(tp: TopicPartition, move_id: str) -> str:
    return f"{tp.dir_name}.{move_id}{DELETE_SUFFIX}"


def _tp_of_suffixed(name: str, suffix: str) -> TopicPartition | None:
    """The partition of ``<topic>-<p>.<id><suffix>``, or None if ``name`` is not one."""
    if not name.endswith(suffix):
        return None
    stem, dot, move_id = name[: -len(suffix)].rpartition(".")
    if not dot or len(move_id) != 32:
        return None
    try:
        return TopicPartition.from_dir_name(stem)
    except InvalidTopicError:
        return None


def resolve_interrupted_moves(log_dirs: list[Path]) -> None:
    """Finish or undo, before any log loads, what a crash interrupted (module docstring):
    a ``-future`` dir is removed if its partition's log exists in some log dir, else renamed
    into place. Raises :class:`LogDirectoryError` for two ``-future`` dirs of one partition
    with no source (a state no move leaves)."""
    futures: dict[TopicPartition, list[Path]] = {}
    for log_dir in log_dirs:
        for entry in sorted(os.listdir(log_dir)):
            tp = _tp_of_suffixed(entry, FUTURE_SUFFIX)
            if tp is not None and (log_dir / entry).is_dir():
                futures.setdefault(tp, []).append(log_dir / entry)
    for tp, paths in futures.items():
        if any((d / tp.dir_name).is_dir() for d in log_dirs):
            for path in paths:
                log.info("%s: removing %s, a move that did not finish", tp, path)
                shutil.rmtree(path)
                fsync_dir(path.parent)
            continue
        if len(paths) > 1:
            raise LogDirectoryError(
                f"expected at most one future log of {tp} without its log, found {paths}"
            )
        (path,) = paths
        log.info("%s: completing its move to %s", tp, path.parent)
        os.rename(path, path.parent / tp.dir_name)
        fsync_dir(path.parent)


class LogMove:
    """Moves ``partition_log`` into ``dest_dir``. See the module docstring.

    ``open_log(directory, log_start_offset, recovery_point)`` opens the moved log (the log
    manager's settings); ``committing()`` is the context step 3 runs in (under the log's
    lock);
    ``on_step(name)``, for fault tests, is called after each step with ``"copied"``,
    ``"synced"``, ``"committed"``, ``"renamed"``, ``"switched"`` and ``"removed"``.
    """

    def __init__(
        self,
        tp: TopicPartition,
        partition_log: Log,
        dest_dir: Path,
        open_log: Callable[[Path, int, int], Log],
        *,
        committing: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
        catch_up_bytes: int = 4 << 20,
        on_step: Callable[[str], None] = lambda _step: None,
    ) -> None:
        self.tp = tp
        self.log = partition_log
        self.source_dir = partition_log.log_dir
        self.dest_dir = dest_dir
        self.move_id = uuid.uuid4().hex
        self.future = dest_dir / future_dir_name(tp, self.move_id)
        self._open_log = open_log
        self._committing = committing
        self._catch_up_bytes = catch_up_bytes
        self._on_step = on_step
        self._copied: dict[str, _Copied] = {}
        self._cancelled: str | None = None
        self._lock = threading.Lock()
        self.committed = False

    # -- state -----------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """Stop the move before it commits (it then removes its copy); no effect after."""
        with self._lock:
            if self._cancelled is None:
                self._cancelled = reason

    def _check_cancelled(self) -> None:
        with self._lock:
            if self._cancelled is not None:
                raise LogMoveCancelledError(
                    f"{self.tp}: move to {self.dest_dir} cancelled: {self._cancelled}"
                )

    def progress(self) -> tuple[int, int]:
        """(bytes copied so far, log end offset minus the offsets whole in the copy): the
        future replica's size and lag as DescribeLogDirs reports them."""
        with self._lock:
            copied = dict(self._copied)
        size = sum(c.size for c in copied.values())
        whole = self.log.log_start_offset
        for segment in self.log.segments():
            name = segment.log_path.name
            got = copied.get(name)
            if got is None or got.size < segment.size:
                break
            whole = segment.next_offset
        return size, max(self.log.log_end_offset - whole, 0)

    # -- the move --------------------------------------------------------------------------

    def run(self) -> None:
        """Steps 1–6; raises :class:`LogMoveCancelledError` or ``OSError`` (the copy removed,
        nothing changed) if it stops before the commit."""
        try:
            self.future.mkdir()
            fsync_dir(self.dest_dir)
            for _ in range(_MAX_PASSES):
                self._check_cancelled()
                if self._copy_pass() < self._catch_up_bytes:
                    break
            self._on_step("copied")
            with self.log._lock:
                self._check_cancelled()
                self._finish_locked()
        except (OSError, StorageError):
            # Anything else (a bug, or a fault test's simulated crash) leaves the -future
            # dir as a crash would: startup removes it.
            if not self.committed:
                shutil.rmtree(self.future, ignore_errors=True)
            raise
        old = self.source_dir / delete_dir_name(self.tp, self.move_id)
        shutil.rmtree(old)
        fsync_dir(self.source_dir)
        self._on_step("removed")

    def _copy_pass(self, locked: bool = False) -> int:
        """Copy what changed since the last pass; returns the bytes copied."""
        partition_log = self.log
        with partition_log._lock:
            generation = partition_log._generation
            active_base = partition_log.active_segment.base_offset
            source = partition_log.directory
        copied = 0
        names = set()
        for name in sorted(os.listdir(source)):
            if name.endswith(_SKIPPED):
                continue
            try:
                copied += self._copy_file(source / name, name, generation, active_base)
                names.add(name)
            except FileNotFoundError:
                if locked:
                    raise  # nothing may change under the lock
                # Removed meanwhile (retention, a snapshot replaced): the next pass knows.
        if locked:
            for name in set(os.listdir(self.future)) - names:
                (self.future / name).unlink()
                self._copied.pop(name, None)
        return copied

    def _copy_file(self, src: Path, name: str, generation: int, active_base: int) -> int:
        """Copy ``src`` into the future dir: its new bytes if it only grew (see the module
        docstring for when that is known), else whole; fsync the copy."""
        try:
            segment_base: int | None = parse_base_offset(name)
        except ValueError:
            segment_base = None
        is_segment = segment_base is not None and not name.endswith(".snapshot")
        with open(src, "rb") as fin:
            st = os.fstat(fin.fileno())
            prev = self._copied.get(name)
            start = 0
            if (
                prev is not None
                and is_segment
                and prev.inode == st.st_ino
                and prev.size <= st.st_size
                and (prev.generation == generation or (segment_base or 0) < active_base)
            ):
                start = prev.size
            elif prev is not None and prev.inode == st.st_ino and prev.size == st.st_size:
                return 0  # a snapshot or checkpoint is replaced, never changed in place
            if start == st.st_size and prev is not None:
                self._record(name, _Copied(st.st_ino, st.st_size, generation))
                return 0
            dst = self.future / name
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                if start == 0:
                    os.ftruncate(fd, 0)
                position = start
                while position < st.st_size:
                    self._check_cancelled()
                    chunk = os.pread(fin.fileno(), min(_CHUNK, st.st_size - position), position)
                    if not chunk:
                        break  # cut meanwhile: the final pass sees it
                    os.pwrite(fd, chunk, position)
                    position += len(chunk)
                os.fsync(fd)
            finally:
                os.close(fd)
        self._record(name, _Copied(st.st_ino, position, generation))
        return position - start

    def _record(self, name: str, copied: _Copied) -> None:
        with self._lock:
            self._copied[name] = copied

    def _finish_locked(self) -> None:
        """Steps 2–5, the log's lock held."""
        partition_log = self.log
        partition_log.flush()  # raises if the source dir is offline
        end = partition_log.log_end_offset
        partition_log.producer_state.take_snapshot(end)
        self._copy_pass(locked=True)
        source = partition_log.directory
        for name, copied in self._copied.items():
            found = (source / name).stat().st_size
            if found != copied.size:
                raise StorageError(
                    f"{self.tp}: expected the copy of {name} to hold {found} bytes, "
                    f"found {copied.size}"
                )
        fsync_dir(self.future)
        self._on_step("synced")
        self._check_cancelled()
        with self._committing():
            os.rename(source, self.source_dir / delete_dir_name(self.tp, self.move_id))
            self.committed = True
            fsync_dir(self.source_dir)
        self._on_step("committed")
        final = self.dest_dir / self.tp.dir_name
        try:
            os.rename(self.future, final)
            fsync_dir(self.dest_dir)
            self._on_step("renamed")
            moved = self._open_log(final, partition_log.log_start_offset, end)
            if moved.log_end_offset != end:
                moved.close()
                raise StorageError(
                    f"{self.tp}: expected the moved log to end at {end}, "
                    f"found {moved.log_end_offset}"
                )
        except (OSError, StorageError):
            self._roll_back(final)
            raise
        _switch(partition_log, moved)
        self._on_step("switched")
        log.info("%s: moved from %s to %s", self.tp, self.source_dir, self.dest_dir)

    def _roll_back(self, final: Path) -> None:
        """Undo steps 4 and 3 (the log's lock still held, the live log still on the old
        files), each rename durable before the next: every state on the way is one the
        startup resolves to the source. Raises ``OSError`` if a rename fails (the caller
        then takes the source dir offline until a restart resolves it)."""
        if final.exists():
            os.rename(final, self.future)
            fsync_dir(self.dest_dir)
        os.rename(self.source_dir / delete_dir_name(self.tp, self.move_id), self.log.directory)
        fsync_dir(self.source_dir)
        self.committed = False
        log.warning("%s: move to %s rolled back", self.tp, self.dest_dir)


def _switch(live: Log, moved: Log) -> None:
    """Step 5: ``live`` takes over ``moved``'s files (``live``'s lock held). Everything that
    is about the directory moves; the offsets, the config and the lock stay."""
    old = [live._segments[b] for b in live._bases]
    delete_at = live._clock() + live.config.file_delete_delay_ms
    live.directory = moved.directory
    live.log_dir = moved.log_dir
    live._segments = moved._segments
    live._bases = moved._bases
    live.producer_state = moved.producer_state
    live.leader_epochs = moved.leader_epochs
    live._roll_limits = NO_ROLL_LIMITS
    live._generation += 1
    live._recovery_point = live.log_end_offset  # flushed and copied whole
    live._unflushed_messages = 0
    live._deleted.extend((delete_at, s) for s in old)  # open for reads in flight
