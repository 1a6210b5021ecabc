"""``LazyTransactionCoordinator``: a broker's one transaction coordinator, built on first use.

The broker builds this holder once (``Broker.__init__``) and hands it to its handlers as
``ctx.transactions``; the coordinator itself (``sluice.broker.transactions.coordinator``) is
built and started by the first call that needs it, because building it creates
``__transaction_state`` (``transaction.state.log.num.partitions`` partitions), which Kafka
does on the first transactional request, not at every start. Who calls:

* every transaction API (InitProducerId with a transactional id, FindCoordinator for a
  transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit):
  :meth:`get`, which builds it if need be;
* a ``read_committed`` Fetch or ListOffsets, and the broker at start: :meth:`get_if_used`,
  which builds it only where ``__transaction_state`` already exists, so that transactions a
  restart left open are resolved before a reader waits on them, and a broker that never saw
  a transaction creates nothing (see ``get_if_used`` for why a reader must not create it).

Invariants: at most one build runs at a time (concurrent callers await the same task); a
build that failed or was cancelled is retried by the next call; after :meth:`close` the
coordinator's background task is stopped.

Thread-safety: none; every method runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from sluice.broker.transactions.coordinator import TransactionCoordinator


class LazyTransactionCoordinator:
    """The broker's transaction coordinator, built by ``build`` on first use. ``used`` says
    whether transactions were ever used in the cluster (``__transaction_state`` exists)."""

    def __init__(
        self,
        build: Callable[[], Coroutine[Any, Any, TransactionCoordinator]],
        used: Callable[[], bool],
    ) -> None:
        self._build = build
        self._used = used
        self._task: asyncio.Task[TransactionCoordinator] | None = None

    async def get(self) -> TransactionCoordinator:
        """The coordinator, built and started on the first call (and again after a build
        that failed). Raises what building raises (``MetadataUnavailableError`` when the
        state topic cannot be created)."""
        task = self._task
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = asyncio.get_running_loop().create_task(self._build())
            self._task = task
        # Shielded: a caller cancelled meanwhile (its connection closed) must not cancel a
        # build other callers wait on.
        return await asyncio.shield(task)

    async def get_if_used(self) -> TransactionCoordinator | None:
        """For a ``read_committed`` read: the coordinator if transactions were ever used in
        the cluster, else None and nothing built. Without ``__transaction_state`` no
        transaction can be open (InitProducerId with a transactional id creates it before any
        transaction begins), so a reader must not create it: librdkafka reads
        ``read_committed`` by default, and creating the topic's partitions (50 by default)
        held a standalone broker's event loop, where topic creation runs inline, for
        0.3-0.4 s on its first consumer, every connection waiting."""
        if not self._used():
            return None
        return await self.get()

    def close(self) -> None:
        """Stop the coordinator (its background task), if it was built."""
        task, self._task = self._task, None
        if task is not None and task.done() and not task.cancelled() and task.exception() is None:
            task.result().close()
