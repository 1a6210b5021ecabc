"""``EpochWriter``: writes the replicas' leader epoch checkpoints from worker threads, so the
event loop never waits on their fsyncs.

A new epoch must be in a partition's ``leader-epoch-checkpoint``, durably, before the first
batch of that epoch is written to its log (``LeaderEpochCache`` says why); each write is two
fsyncs, 1–7 ms, once per partition and leader change — seconds of a stalled event loop after
a leader change at thousands of partitions if they ran on it. So the replication layer
records the epoch here first and appends after the write finished, when ``Log.append`` finds
the epoch already written and does no I/O:

* a **leader** records its epoch at its log end as it takes over (Kafka's
  ``Partition.makeLeader``), and a produce to it waits for that write if it is not done yet
  (:meth:`leader_epoch`);
* a **follower** records the epochs the fetched batches start, from their headers, before it
  appends them (:meth:`assign`), and writes its truncations before it fetches again
  (:meth:`flush`).

A write that fails takes the partition's log dir offline through the
:class:`LogDirFailureChannel` (as a failed append does) and raises its
``LogDirFailureError``.

Thread safety: the coroutine-returning methods run on the broker's event loop; the writes run
on this writer's own threads (not the loop's default executor, which the ZooKeeper writes
use), a few at a time, since the fsyncs of different partitions overlap well.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from sluice.broker.log.errors import StorageError
from sluice.broker.log.log import Log
from sluice.broker.log.log_dir_failure_channel import LogDirFailureChannel

#: Worker threads writing checkpoints (each mostly waits on an fsync).
WORKERS = 4


class EpochWriter:
    def __init__(self, dir_failures: LogDirFailureChannel | None = None) -> None:
        """``dir_failures``: where a failed write is reported (None: only raised)."""
        self._dir_failures = dir_failures
        self._executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="leader-epoch-writer")
        self.closed = False

    def leader_epoch(self, log: Log, epoch: int) -> asyncio.Future[None]:
        """Record that ``epoch`` starts at ``log``'s end (this broker now leads it).

        The end is read here, on the event loop that appends to the log, not on the worker:
        a batch appended meanwhile without waiting (a transaction marker) starts the epoch
        at that same offset and finds it recorded, never one past it."""
        start = log.log_end_offset
        return self._submit(log, lambda: log.leader_epochs.assign(epoch, start))

    def assign(self, log: Log, entries: Sequence[tuple[int, int]]) -> asyncio.Future[None]:
        """Record each (epoch, start offset) of ``entries``, in order."""
        return self._submit(log, lambda: log.leader_epochs.assign_all(entries))

    def flush(self, log: Log) -> asyncio.Future[None]:
        """Write what changed since the last write (a truncation)."""
        return self._submit(log, log.leader_epochs.flush)

    async def close(self) -> None:
        """Wait for the writes already asked for, then stop the threads. Idempotent."""
        self.closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)

    def _submit(self, log: Log, write: Callable[[], None]) -> asyncio.Future[None]:
        def run() -> None:  # on a worker thread
            try:
                write()
            except OSError as exc:
                operation = "write the leader epoch checkpoint"
                if self._dir_failures is not None:
                    raise self._dir_failures.failed(log.directory, operation, exc) from exc
                raise StorageError(f"{log.directory.name}: {operation} failed: {exc}") from exc

        return asyncio.get_running_loop().run_in_executor(self._executor, run)
