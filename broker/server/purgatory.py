"""``FetchPurgatory``: where a Fetch that found less than ``min_bytes`` waits.

Kafka's DelayedFetch, on asyncio: the fetch registers one ``asyncio.Event`` under each of its
partitions and sleeps until an append to any of them sets it, or ``max_wait`` passes — no
polling loop. The handler then reads again and either answers or waits for the time left.

Not thread-safe: appends and fetches both run on the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from sluice.common.topic_partition import TopicPartition


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[TopicPartition, set[asyncio.Event]] = defaultdict(set)

    async def wait(self, partitions: Iterable[TopicPartition], timeout: float) -> bool:
        """Sleep until an append to one of ``partitions`` or ``timeout`` seconds; True if
        woken by an append."""
        if timeout <= 0:
            return False
        event = asyncio.Event()
        keys = list(partitions)
        for tp in keys:
            self._waiters[tp].add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for tp in keys:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[tp]

    def notify(self, tp: TopicPartition) -> None:
        """An append happened: wake every fetch waiting on ``tp``."""
        for event in self._waiters.get(tp, ()):
            event.set()

    def waiting(self) -> int:
        return len({id(e) for events in self._waiters.values() for e in events})
