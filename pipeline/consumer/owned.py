"""``OwnedPartitions``: what a consumer owns between two rebalances, fenced by a generation.

The one table that the connector's three kinds of thread share: the rebalance thread fills and
empties it, the fetcher thread reads from it what to fetch from where, the threads reading the
streams advance its consumed offsets. Per owned partition (:class:`OwnedPartition`)::

    stream      the index of the stream that delivers it (its assignor member is
                "<consumer id>-<stream>")
    start       where the fetcher starts it in this generation
    consumed    the offset of the next message to hand out (start <= consumed)
    committed   the last offset written to the offset registry for it

**Generation.** Every change of the table bumps the generation: :meth:`OwnedPartitions.install`
(a rebalance acquired partitions) and :meth:`OwnedPartitions.revoke` (a release, or a lost
ZooKeeper session). The fetcher tags each queued message with the generation it was fetched in,
and :meth:`OwnedPartitions.accept` hands a message out only if that generation is current, the
partition still owned and the offset not below ``consumed``, then advances ``consumed``. It does
so under the same lock under which ``revoke`` bumps the generation and snapshots the consumed
offsets that the release commits. Hence the invariant the consumer's delivery rests on: a
message handed out before a revoke is covered by the offsets that revoke returns, and a message
not handed out by then never is (it is dropped, and fetched again from the committed offset by
whoever owns the partition next). A rebalance neither repeats nor skips messages.

Thread-safety: every method takes the table's lock, held only for dictionary work (never
across I/O). :attr:`OwnedPartitions.generation` may be read without it: a stale read costs the
fetcher one more loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sluice.common.topic_partition import TopicPartition

__all__ = ["FetchPlan", "OwnedPartition", "OwnedPartitions"]

# What the fetcher fetches in one generation: partition -> (stream index, start offset).
FetchPlan = dict[TopicPartition, tuple[int, int]]


@dataclass
class OwnedPartition:
    """One owned partition: its stream and offsets (see the module docstring).

    ``consumed`` and ``committed`` change only under the owning table's lock.
    """

    stream: int
    start: int
    consumed: int
    committed: int


class OwnedPartitions:
    """The partitions owned now and the delivery generation. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._owned: dict[TopicPartition, OwnedPartition] = {}

    @property
    def generation(self) -> int:
        """The current generation; read without the lock (may be stale by one change)."""
        return self._generation

    def install(self, starts: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """Own exactly ``starts`` (partition -> (stream, start offset)), in a new generation.

        The table must be empty (a rebalance revokes before it installs).
        """
        with self._lock:
            if self._owned:
                raise RuntimeError(
                    f"install: expected no owned partitions, found {sorted(self._owned)}"
                )
            self._generation += 1
            self._owned = {
                tp: OwnedPartition(stream=stream, start=start, consumed=start, committed=start)
                for tp, (stream, start) in starts.items()
            }

    def revoke(self) -> dict[TopicPartition, tuple[OwnedPartition, int]]:
        """Own nothing, in a new generation; return what was owned with its consumed offset,
        snapshotted under the lock that delivery takes (so the snapshot covers every message
        handed out, and no message is handed out after it)."""
        with self._lock:
            self._generation += 1
            owned, self._owned = self._owned, {}
            return {tp: (o, o.consumed) for tp, o in owned.items()}

    def fetch_plan(self, applied: int) -> tuple[int, FetchPlan] | None:
        """The current generation and what to fetch in it, unless ``applied`` is current."""
        with self._lock:
            if self._generation == applied:
                return None
            plan = {tp: (o.stream, o.start) for tp, o in self._owned.items()}
            return self._generation, plan

    def accept(self, generation: int, tp: TopicPartition, offset: int) -> bool:
        """May the message at ``offset`` of ``tp``, fetched in ``generation``, be handed out?
        If so, it counts as consumed from now on."""
        with self._lock:
            owned = self._owned.get(tp)
            # A message fetched before the last change, or below what we handed out, is
            # stale: drop it (whoever owns the partition refetches it from the commit).
            if generation != self._generation or owned is None or offset < owned.consumed:
                return False
            owned.consumed = offset + 1
            return True

    def streams(self) -> dict[TopicPartition, int]:
        """Each owned partition with the index of its stream, in partition order."""
        with self._lock:
            return {tp: o.stream for tp, o in sorted(self._owned.items())}

    def consumed(self) -> dict[TopicPartition, tuple[OwnedPartition, int]]:
        """Each owned partition with its consumed offset now (what a commit writes)."""
        with self._lock:
            return {tp: (o, o.consumed) for tp, o in self._owned.items()}

    def mark_committed(self, commits: Iterable[tuple[OwnedPartition, int]]) -> None:
        """Record offsets that the offset registry now holds."""
        with self._lock:
            for owned, offset in commits:
                owned.committed = offset
