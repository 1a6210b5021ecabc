"""``FetchPurgatory``: where a Fetch that found less than ``min_bytes`` waits.

Kafka's DelayedFetch, on asyncio: the fetch registers one ``asyncio.Event`` under each of its
partitions and sleeps until an append to any of them sets it, or ``max_wait`` passes — no
polling loop. The handler then reads again and either answers or waits for the time left.

It also holds the broker's fetch sessions (``sessions``, a
:class:`~sluice.broker.server.fetch_session.FetchSessionCache`): every notification marks the
partition changed in the sessions that hold it and wakes their fetches, which wait on their
session rather than on each partition.

Not thread-safe: appends and fetches both run on the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from sluice.broker.server.fetch_session import FetchSessionCache
from sluice.common.topic_partition import TopicPartition


class FetchPurgatory:
    def __init__(self, sessions: FetchSessionCache | None = None) -> None:
        self._waiters: defaultdict[TopicPartition, set[asyncio.Event]] = defaultdict(set)
        self.sessions = sessions if sessions is not None else FetchSessionCache()

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
            async with asyncio.timeout(timeout):  # (wait_for would wrap the wait in a task)
                await event.wait()
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
        """An append, a high-watermark move or a role change happened: wake every fetch
        waiting on ``tp`` and mark it changed in the fetch sessions holding it."""
        for event in self._waiters.get(tp, ()):
            event.set()
        self.sessions.changed(tp)

    def waiting(self) -> int:
        return len({id(e) for events in self._waiters.values() for e in events})
