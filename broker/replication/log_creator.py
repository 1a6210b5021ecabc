"""``LogCreator``: creates new replicas' logs on a worker thread, so the event loop never
waits on their directories, index files and fsyncs.

Creating a partition's log makes its directory, opens (and sizes) its first segment's index
files and fsyncs the log dir: about a millisecond on a quiet disk, several under contention.
A CreateTopics of thousands of partitions reaches every broker as one burst of new
replicas, and created on the event loop they stalled every client of the broker for seconds
(three quarters of its time while a thousand partitions at RF 3 were created). The replica
manager therefore hands the new replicas of a change from the cluster's metadata worker to
:meth:`create` and makes them leaders or followers only once their logs exist: a partition
never serves, appends or fetches before its log is there, as before; it just does not exist
on the broker meanwhile (NOT_LEADER_OR_FOLLOWER to a client, as while the change was on its
way).

Thread safety: :meth:`create` and :meth:`close` run on the broker's event loop; the logs are
made on this creator's one thread (not the loop's default executor, which the ZooKeeper
writes use) through the log manager, which is thread-safe and serialises creation anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sluice.broker.log.log import Log
from sluice.common.topic_partition import TopicPartition


@dataclass
class Created:
    """What one :meth:`LogCreator.create` made: the logs, and the creations that failed."""

    logs: dict[TopicPartition, Log] = field(default_factory=dict)
    failed: dict[TopicPartition, BaseException] = field(default_factory=dict)


class LogCreator:
    def __init__(self, get_log: Callable[[str, int], Log]) -> None:
        """``get_log``: the log of a partition, created if it does not exist yet."""
        self._get_log = get_log
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="replica-log-creator")
        self.closed = False

    def create(self, tps: Sequence[TopicPartition]) -> asyncio.Future[Created]:
        """Create (or find) the logs of ``tps``, in order, on the worker; the future's result
        holds each log made and what creating each one that failed raised (one failure does
        not stop the rest). The caller takes the logs from it rather than asking the log
        manager again, whose lock the worker may be holding for the next burst's log."""

        def run() -> Created:  # on the worker thread
            created = Created()
            for tp in tps:
                try:
                    created.logs[tp] = self._get_log(tp.topic, tp.partition)
                except Exception as exc:  # a log dir offline, a full disk: the caller says so
                    created.failed[tp] = exc
            return created

        return asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def close(self) -> None:
        """Drop the creations not started, wait for the one running, stop the thread.
        Idempotent."""
        self.closed = True
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: self._executor.shutdown(wait=True, cancel_futures=True)
        )
