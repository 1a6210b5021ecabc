"""``LogManager``: the logs of every partition on this broker, across its ``log.dirs``.

Layout of each log dir (Kafka's)::

    <log dir>/
        .kafka_cleanshutdown              present only after a clean shutdown
        recovery-point-offset-checkpoint  per partition: offsets below are fsynced
        cleaner-offset-checkpoint         per compacted partition: where cleaning resumes
        log-start-offset-checkpoint       per partition: the log start offset
        <topic>-<partition>/              one ``Log`` (segments, indexes)
        <topic>-<partition>.<id>-delete/  a deleted (or moved away) partition, removed
        <topic>-<partition>.<id>-future/  a partition being moved here (see ``log_mover``)

Startup: a dir with the clean-shutdown marker loads its logs as they are (indexes are only
sanity-checked); without it every log re-validates its batches from its recovery point and
cuts at the first torn or corrupt one. The marker is removed once loading is done, so a crash
from then on counts as unclean; ``shutdown`` flushes everything, writes the checkpoints and
writes the marker last.

Placement: a new partition goes to the log dir named for it by ``set_preferred_dir``
(AlterReplicaLogDirs before the replica exists, Kafka's ``preferredLogDirs``), else to the
log dir holding the fewest partitions.

Moves (AlterReplicaLogDirs): ``move_log`` moves a partition's log to another log dir while
it serves, crash-safe (``log_mover`` documents the steps and the crash states, which
``startup`` resolves before loading); ``start_move`` runs it on a thread of its own and
``future_logs`` reports the moves under way (Kafka's future replicas). During a move the
log cleaner leaves the partition alone; a second request for another dir, ``delete_log``,
``shutdown`` and a failure of either dir cancel it. The partition's cleaner checkpoint is
dropped with the move (its next cleaning starts from the log start: slower, not wrong).

Background work, on daemon threads: the flusher (every ``log.flush.scheduler.interval.ms``,
and at once when a log reaches ``flush.messages``), retention (every
``log.retention.check.interval.ms``) and the checkpoints (every
``log.flush.offset.checkpoint.interval.ms``), and the log cleaner's threads
(``log.cleaner.threads``, when ``log.cleaner.enable``; see ``cleaner``), which compact the
logs whose ``cleanup.policy`` has ``compact``. fsync never runs on the append path.
``shutdown`` stops the cleaner before it closes the logs; ``delete_log`` aborts a cleaning of
that log and waits for it to stop.

Storage failures (see ``log_dir_failure_channel``): a log, the checkpoint job or the cleaner
that meets an ``OSError`` marks its log dir offline in ``dir_failures``. The background jobs
then leave that dir alone (no checkpoint, retention or cleaning writes there; the flusher
still fsyncs what was written unless an fsync failed), new partitions go to the other dirs, and
``shutdown`` closes its logs without writing and leaves it without the clean-shutdown marker,
so the next start re-validates it. The probe job (every ``log_dir_retry_ms``) brings a dir
that failed for lack of space back online once it has ``log_dir_probe_free_bytes`` free and a
small probe file can be written and fsynced: each log is cut back to its last whole batch,
then writes are accepted again — no restart needed.

Thread safety: every public method is thread-safe.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sluice.broker.log.checkpoint import CorruptCheckpointError, OffsetCheckpoint, fsync_dir
from sluice.broker.log.cleaner import LogCleaner
from sluice.broker.log.cleaner_config import CleanerConfig
from sluice.broker.log.cleaner_manager import LogCleanerManager
from sluice.broker.log.errors import LogDirectoryError, LogDirOfflineError, StorageError
from sluice.broker.log.log import Log, now_ms
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_dir_failure_channel import LogDirFailure, LogDirFailureChannel
from sluice.broker.log.log_mover import LogMove, LogMoveCancelledError, resolve_interrupted_moves
from sluice.common.topic_partition import InvalidTopicError, TopicPartition, validate_topic

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
DELETE_SUFFIX = "-delete"
PROBE_FILE = ".sluice-log-dir-probe"


class LogManager:
    """Owns every ``Log`` on the broker. See the module docstring."""

    def __init__(
        self,
        log_dirs: Iterable[str | Path],
        default_config: LogConfig | None = None,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        flush_check_ms: int = 1000,
        retention_check_ms: int = 300_000,
        checkpoint_ms: int = 60_000,
        clock: Callable[[], int] = now_ms,
        cleaner_config: CleanerConfig | None = None,
        dir_failures: LogDirFailureChannel | None = None,
        log_dir_retry_ms: int = 5000,
        log_dir_probe_free_bytes: int = 1 << 20,
    ) -> None:
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        if not self.log_dirs:
            raise LogDirectoryError("expected at least one log dir (log.dirs), found none")
        self.default_config = default_config or LogConfig()
        self._topic_config = topic_config or (lambda _topic: self.default_config)
        self.flush_check_ms = flush_check_ms
        self.retention_check_ms = retention_check_ms
        self.checkpoint_ms = checkpoint_ms
        self._clock = clock
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._stop = threading.Event()
        self._flush_wanted = threading.Event()
        self._threads: list[threading.Thread] = []
        self.clean_shutdown: dict[Path, bool] = {}
        self.recovered_bytes_cut = 0
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = None  # made at startup, once the dirs exist
        self.dir_failures = dir_failures or LogDirFailureChannel()
        self.log_dir_retry_ms = log_dir_retry_ms
        self.log_dir_probe_free_bytes = log_dir_probe_free_bytes
        self._checkpoint_lock = threading.Lock()  # one writer of the checkpoint files
        self._moves: dict[TopicPartition, LogMove] = {}
        self._move_threads: dict[TopicPartition, threading.Thread] = {}
        self._preferred: dict[TopicPartition, Path] = {}
        self.dir_failures.add_listener(self._on_dir_failure)

    # -- startup ---------------------------------------------------------------------------

    def startup(self) -> None:
        """Create missing log dirs, resolve interrupted moves, load (and if need be recover)
        every log."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            if not os.access(log_dir, os.W_OK):
                raise LogDirectoryError(f"{log_dir}: expected a writable log dir")
        resolve_interrupted_moves(self.log_dirs)
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)
        for log_dir in self.log_dirs:
            (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            fsync_dir(log_dir)
        manager = LogCleanerManager(self.log_dirs, self.logs, self._dir_of_tp)
        self.cleaner = LogCleaner(
            self.cleaner_config, manager, clock=self._clock, dir_failures=self.dir_failures
        )

    def _read_checkpoint(self, path: Path) -> dict[tuple[str, int], int]:
        try:
            return OffsetCheckpoint(path).read()
        except CorruptCheckpointError as exc:
            # Fall back to the safe values: recover from the first segment.
            log.warning("%s; ignoring it", exc)
            return {}

    def _load_dir(self, log_dir: Path) -> None:
        clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        self.clean_shutdown[log_dir] = clean
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_FILE)
        log_starts = self._read_checkpoint(log_dir / LOG_START_FILE)
        for entry in sorted(os.listdir(log_dir)):
            path = log_dir / entry
            if not path.is_dir():
                continue
            if entry.endswith(DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = TopicPartition.from_dir_name(entry)
            except InvalidTopicError:
                log.warning("%s: not a partition directory, ignored", path)
                continue
            if tp in self._logs:
                raise LogDirectoryError(
                    f"partition {tp} found in two log dirs: {self._dir_of[tp]} and {log_dir}"
                )
            partition_log = Log(
                path,
                self._topic_config(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                clean_shutdown=clean,
                clock=self._clock,
                on_flush_needed=self._request_flush,
                dir_failures=self.dir_failures,
            )
            self.recovered_bytes_cut += partition_log.recovered_bytes_cut
            self._logs[tp] = partition_log
            self._dir_of[tp] = log_dir
        log.info(
            "loaded log dir %s (%s): %d partitions",
            log_dir,
            "clean shutdown" if clean else "unclean shutdown, recovered" if self._logs else "new",
            sum(1 for d in self._dir_of.values() if d == log_dir),
        )

    # -- partitions ------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        tp = TopicPartition(validate_topic(topic), partition)
        if partition < 0:
            raise InvalidTopicError(f"expected a partition >= 0, found {partition}")
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            log_dir = self._preferred.pop(tp, None) or self._least_loaded_dir()
            partition_log = Log(
                log_dir / tp.dir_name,
                config or self._topic_config(topic),
                clock=self._clock,
                on_flush_needed=self._request_flush,
                dir_failures=self.dir_failures,
            )
            fsync_dir(log_dir)
            self._logs[tp] = partition_log
            self._dir_of[tp] = log_dir
            return partition_log

    def _least_loaded_dir(self) -> Path:
        failures = self.dir_failures.offline_dirs()
        online = [d for d in self.log_dirs if d not in failures]
        if not online:
            # An empty log needs no space: one made in a full dir serves reads (and refuses
            # writes) rather than fail whatever created it, e.g. a coordinator's topic.
            online = [d for d in self.log_dirs if failures[d].retryable]
        if not online:
            dirs = ", ".join(map(str, self.log_dirs))
            raise LogDirOfflineError(f"cannot create a log: every log dir is offline ({dirs})")
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        # Fewest partitions first; ties go to the dir listed first (Kafka's rule).
        return min(online, key=lambda d: counts[d])

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log: renamed ``...-delete`` at once, then removed."""
        tp = TopicPartition(topic, partition)
        self.cancel_move(tp, "the partition is deleted")
        with self._lock:
            self._preferred.pop(tp, None)
            partition_log = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
        if partition_log is None or log_dir is None:
            return False
        if self.cleaner is not None:
            self.cleaner.abort_cleaning(tp)
            self.cleaner.manager.remove(tp, log_dir)
        partition_log.close()
        target = log_dir / f"{tp.dir_name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        os.rename(partition_log.directory, target)
        fsync_dir(log_dir)
        shutil.rmtree(target, ignore_errors=True)
        return True

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get(TopicPartition(topic, partition))

    def _dir_of_tp(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    # -- moves between log dirs ------------------------------------------------------------

    def log_dir_of(self, path: str | Path) -> Path | None:
        """The configured log dir ``path`` names (resolved), or None if it is not one."""
        resolved = Path(path).resolve()
        return resolved if resolved in self.log_dirs else None

    def set_preferred_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Create ``tp``'s log in ``log_dir`` when it comes (Kafka's
        ``maybeUpdatePreferredLogDir``): a no-op if its log or a move is there already."""
        with self._lock:
            move = self._moves.get(tp)
            if self._dir_of.get(tp) == log_dir or (move is not None and move.dest_dir == log_dir):
                return
            self._preferred[tp] = log_dir

    def future_logs(self) -> dict[TopicPartition, tuple[Path, int, int]]:
        """The moves under way: partition → (destination log dir, bytes copied, offset lag)."""
        with self._lock:
            moves = dict(self._moves)
        return {tp: (m.dest_dir, *m.progress()) for tp, m in moves.items()}

    def start_move(self, tp: TopicPartition, dest_dir: Path) -> bool:
        """Move ``tp``'s log to ``dest_dir`` on a thread of its own, after cancelling a move
        of it to another dir. False if there is nothing to do (already there, or on its way
        there). Raises what :meth:`move_log` raises before copying anything."""
        with self._lock:
            move = self._moves.get(tp)
            if move is not None and move.dest_dir == dest_dir:
                return False
        if move is not None:
            self.cancel_move(tp, f"a move to {dest_dir} was requested")
        prepared = self._prepare_move(tp, dest_dir)
        if prepared is None:
            return False
        thread = threading.Thread(
            target=self._run_move, args=(prepared,), name=f"sluice-log-mover-{tp}", daemon=True
        )
        with self._lock:
            self._move_threads[tp] = thread
        thread.start()
        return True

    def move_log(self, tp: TopicPartition, dest_dir: Path) -> bool:
        """Move ``tp``'s log to ``dest_dir`` now (see ``log_mover``); False if it is there
        already. Raises ``KeyError`` for a partition with no log here, ``LogDirectoryError``
        for a dir that is not one of ``log.dirs``, ``LogDirOfflineError`` if a log dir is
        offline, :class:`LogMoveCancelledError` or ``OSError`` if the move stopped (nothing
        changed)."""
        prepared = self._prepare_move(tp, dest_dir)
        if prepared is None:
            return False
        self._run_move(prepared, reraise=True)
        return True

    def _prepare_move(self, tp: TopicPartition, dest_dir: Path) -> LogMove | None:
        if dest_dir not in self.log_dirs:
            raise LogDirectoryError(
                f"expected one of the log dirs {self.log_dirs}, found {dest_dir}"
            )
        offline = self.dir_failures.offline_dirs()
        if offline:
            # Kafka's rule: no future log while a dir is offline (its replicas are unknown).
            dirs = ", ".join(map(str, offline))
            raise LogDirOfflineError(f"cannot move {tp} to {dest_dir}: log dirs {dirs} offline")
        with self._lock:
            partition_log = self._logs[tp]
            if self._dir_of[tp] == dest_dir:
                return None
            if tp in self._moves:
                raise LogMoveCancelledError(f"{tp}: a move to another dir is still stopping")

            move = LogMove(
                tp, partition_log, dest_dir, self._open_moved,
                committing=lambda: self._committing(tp, partition_log, dest_dir),
            )  # fmt: skip
            self._moves[tp] = move
        return move

    def _open_moved(self, directory: Path, log_start_offset: int, recovery_point: int) -> Log:
        with self._lock:
            config = self._logs[TopicPartition.from_dir_name(directory.name)].config
        return Log(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=True,  # flushed and fsynced whole under the log's lock
            clock=self._clock,
            on_flush_needed=self._request_flush,
            dir_failures=self.dir_failures,
        )

    @contextlib.contextmanager
    def _committing(self, tp: TopicPartition, partition_log: Log, dest_dir: Path) -> Iterator[None]:
        """Around a move's commit (the log's lock held): first the destination's checkpoints
        get the partition's log start and recovery point, so a crash from the commit on
        reloads it with them; after a commit the partition counts in ``dest_dir``. No
        checkpoint pass runs in between (it would drop the partition from those files)."""
        with self._checkpoint_lock:
            with self._lock:
                logs = {t: lg for t, lg in self._logs.items() if self._dir_of[t] == dest_dir}
            logs[tp] = partition_log
            self._write_checkpoints(dest_dir, logs)
            yield  # the commit; what follows runs only if it succeeded
            with self._lock:
                self._dir_of[tp] = dest_dir

    def _run_move(self, move: LogMove, reraise: bool = False) -> None:
        tp = move.tp
        cleaner = self.cleaner
        if cleaner is not None:
            cleaner.abort_cleaning(tp)
            cleaner.manager.begin(tp)  # held "in progress": the cleaner leaves it alone
        try:
            move.run()
        except LogMoveCancelledError as exc:
            log.info("%s", exc)
            if reraise:
                raise
        except (OSError, StorageError) as exc:
            if move.committed:  # a rollback failed: the files no longer match the log
                cause = exc if isinstance(exc, OSError) else OSError(errno.EIO, str(exc))
                self.dir_failures.fail(move.source_dir, f"moving {tp}", cause, until_restart=True)
            log.error("%s: move from %s to %s failed: %s", tp, move.source_dir, move.dest_dir, exc)
            if reraise:
                raise
        finally:
            self._end_move(move)
            if cleaner is not None:
                cleaner.manager.done_cleaning(tp, None)

    def _end_move(self, move: LogMove) -> None:
        tp = move.tp
        with self._lock:
            if tp in self._logs:  # committed, or rolled back after the commit
                self._dir_of[tp] = move.dest_dir if move.committed else move.source_dir
            if self._moves.get(tp) is move:
                del self._moves[tp]
                self._move_threads.pop(tp, None)
        if move.committed and self.cleaner is not None:
            self.cleaner.manager.remove(tp, move.source_dir)

    def cancel_move(self, tp: TopicPartition, reason: str) -> None:
        """Cancel ``tp``'s move if one is under way and wait for it to stop."""
        with self._lock:
            move = self._moves.get(tp)
            thread = self._move_threads.get(tp)
        if move is None:
            return
        move.cancel(reason)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _on_dir_failure(self, log_dir: Path, failure: LogDirFailure | None) -> None:
        # Called by whoever met the failure, maybe under a log's lock: only flags are set.
        if failure is None:
            return
        for move in list(self._moves.values()):
            if log_dir in (move.source_dir, move.dest_dir):
                move.cancel(f"log dir {log_dir} failed ({failure.reason})")

    # -- background work -------------------------------------------------------------------

    def _request_flush(self, _log: Log) -> None:
        self._flush_wanted.set()

    def flush_dirty_logs(self) -> int:
        """Flush every log whose ``flush.messages`` or ``flush.ms`` is reached."""
        now = self._clock()
        flushed = 0
        for partition_log in self.logs().values():
            if partition_log.needs_flush(now) and self._flush(partition_log):
                flushed += 1
        return flushed

    def flush_all(self) -> None:
        for partition_log in self.logs().values():
            self._flush(partition_log)

    def _flush(self, partition_log: Log) -> bool:
        try:
            partition_log.flush()
        except StorageError:  # the dir is offline: the channel said so, once
            return False
        return True

    def cleanup_logs(self) -> int:
        """One retention pass; returns the number of segments deleted."""
        deleted = 0
        for partition_log in self.logs().values():
            if self.dir_failures.is_offline(partition_log.log_dir):
                continue
            try:
                deleted += partition_log.delete_old_segments()
                partition_log.purge_deleted_segments()
            except OSError as exc:
                self.dir_failures.fail(partition_log.log_dir, "retention", exc)
        return deleted

    def checkpoint(self) -> None:
        """Write both checkpoint files in every online log dir."""
        with self._checkpoint_lock:
            with self._lock:
                by_dir: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
                for tp, partition_log in self._logs.items():
                    by_dir[self._dir_of[tp]][tp] = partition_log
            for log_dir, logs in by_dir.items():
                if self.dir_failures.is_offline(log_dir):
                    continue  # its logs may not match what a checkpoint says; restart knows
                try:
                    self._write_checkpoints(log_dir, logs)
                except OSError as exc:
                    self.dir_failures.fail(log_dir, "checkpoint", exc)

    @staticmethod
    def _write_checkpoints(log_dir: Path, logs: dict[TopicPartition, Log]) -> None:
        OffsetCheckpoint(log_dir / RECOVERY_POINT_FILE).write(
            {tp: lg.recovery_point for tp, lg in logs.items()}
        )
        OffsetCheckpoint(log_dir / LOG_START_FILE).write(
            {tp: lg.log_start_offset for tp, lg in logs.items()}
        )

    def probe_offline_dirs(self) -> list[Path]:
        """Bring back every dir offline for lack of space that has room again (see the
        module docstring); returns the dirs brought back."""
        back = []
        for log_dir, failure in self.dir_failures.offline_dirs().items():
            if not failure.retryable:
                continue
            try:
                stat = os.statvfs(log_dir)
                if stat.f_bavail * stat.f_frsize < self.log_dir_probe_free_bytes:
                    continue
                probe = log_dir / PROBE_FILE
                with open(probe, "wb") as f:
                    f.write(b"\0" * 4096)
                    f.flush()
                    os.fsync(f.fileno())
                probe.unlink()
                with self._lock:
                    logs = [lg for tp, lg in self._logs.items() if self._dir_of[tp] == log_dir]
                for partition_log in logs:
                    partition_log.reopen()
            except OSError as exc:
                log.debug("log dir %s still offline: %s", log_dir, exc)
                (log_dir / PROBE_FILE).unlink(missing_ok=True)
                continue
            if self.dir_failures.mark_online(log_dir):
                back.append(log_dir)
        return back

    def start_background(self) -> None:
        """Start the flusher, retention and checkpoint threads, and the log cleaner."""
        self._stop.clear()
        if self.cleaner is not None:
            self.cleaner.startup()
        jobs: list[tuple[str, Callable[[], object], float, threading.Event | None]] = [
            ("flusher", self.flush_dirty_logs, self.flush_check_ms / 1000, self._flush_wanted),
            ("retention", self.cleanup_logs, self.retention_check_ms / 1000, None),
            ("checkpoint", self.checkpoint, self.checkpoint_ms / 1000, None),
            ("dir-probe", self.probe_offline_dirs, self.log_dir_retry_ms / 1000, None),
        ]
        for name, job, interval, wake in jobs:
            thread = threading.Thread(
                target=self._run_periodically,
                args=(job, interval, wake),
                name=f"sluice-log-{name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def _run_periodically(
        self, job: Callable[[], object], interval: float, wake: threading.Event | None
    ) -> None:
        while not self._stop.is_set():
            if wake is not None:
                wake.wait(interval)
                wake.clear()
            else:
                self._stop.wait(interval)
            if self._stop.is_set():
                return
            try:
                job()
            except Exception:  # a background job must outlive one bad pass, loudly
                log.exception("background log job %s failed", getattr(job, "__name__", job))

    def shutdown(self) -> None:
        """Stop the threads, flush and close every log, write checkpoints and the marker."""
        self._stop.set()
        self._flush_wanted.set()
        for tp in list(self._moves):
            self.cancel_move(tp, "the broker shuts down")
        if self.cleaner is not None:
            self.cleaner.shutdown()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        with self._lock:
            logs = list(self._logs.values())
        for partition_log in logs:
            with contextlib.suppress(StorageError):  # its dir went offline: closed anyway
                partition_log.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            if self.dir_failures.is_offline(log_dir):
                log.warning("log dir %s is offline: no clean-shutdown marker", log_dir)
                continue
            try:
                (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(log_dir)
            except OSError as exc:
                self.dir_failures.fail(log_dir, "writing the clean-shutdown marker", exc)
