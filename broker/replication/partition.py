"""``Partition``: one partition's replication state on this broker (Kafka's Partition.scala).

As **leader** it tracks every follower's log end offset (LEO) from the offsets they fetch
at, and moves the high watermark to the smallest LEO in the in-sync replica set::

    HW = min(LEO of r for r in ISR)        (the leader's own LEO included)

Consumers read only below the HW; a message is committed when every ISR member has it. A
follower is *caught up* when it fetched from the leader's LEO; one that has not caught up for
``replica.lag.time.max.ms`` leaves the ISR, and one whose LEO reaches the HW (and the start of
the current leader epoch) comes back when it fetches — only the follower that fetched, never
one judged on the LEO of an older fetch. The ISR changes are decided here and written by the
replica manager to ZooKeeper, conditionally on the state's znode version.

As **follower** it only records its leader and epoch; the replica fetcher does the work.

Not thread-safe: the replica manager calls it on the broker's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from sluice.broker.log.log import Log
from sluice.common.topic_partition import TopicPartition


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"


@dataclass
class FollowerState:
    leo: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    leader_leo_at_last_fetch: int = -1


def _now_ms() -> float:
    return time.monotonic() * 1000


class Partition:
    def __init__(
        self, tp: TopicPartition, log: Log, broker_id: int, clock: Callable[[], float] = _now_ms
    ) -> None:
        self.tp = tp
        self.log = log
        self.broker_id = broker_id
        self._clock = clock
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.zk_version = -1
        self.epoch_start_offset = 0
        self.followers: dict[int, FollowerState] = {}
        log.set_replicated(True)

    # -- role changes ----------------------------------------------------------------------

    def become_leader(
        self, leader_epoch: int, replicas: Sequence[int], isr: Sequence[int], zk_version: int
    ) -> None:
        now = self._clock()
        if self.role is not Role.LEADER or leader_epoch != self.leader_epoch:
            # Every follower starts "caught up now", so none is dropped from the ISR before
            # it had a chance to fetch (Kafka does the same).
            self.followers = {
                r: FollowerState(last_caught_up_ms=now, last_fetch_ms=now)
                for r in replicas
                if r != self.broker_id
            }
            self.epoch_start_offset = self.log.log_end_offset
        self.role = Role.LEADER
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.zk_version = zk_version
        for r in replicas:
            if r != self.broker_id:
                self.followers.setdefault(r, FollowerState(last_caught_up_ms=now))
        self.maybe_advance_hw()

    def become_follower(
        self, leader_id: int, leader_epoch: int, replicas: Sequence[int], isr: Sequence[int],
        zk_version: int,
    ) -> bool:  # fmt: skip
        """Record the new leader; True if it changed (the fetcher must truncate and move)."""
        changed = (
            self.role is not Role.FOLLOWER
            or leader_id != self.leader_id
            or leader_epoch != self.leader_epoch
        )
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.zk_version = zk_version
        self.followers = {}
        return changed

    def update_state(
        self, isr: Sequence[int], zk_version: int, replicas: Sequence[int] | None = None
    ) -> None:
        """A newer version of the same leadership (e.g. our own ISR write came back), and the
        replicas as now assigned (None: unchanged). As leader, a new replica gets a follower
        record (out of sync until it catches up); a removed one loses its record."""
        self.isr = tuple(isr)
        self.zk_version = zk_version
        if replicas is not None and tuple(replicas) != self.replicas:
            self.replicas = tuple(replicas)
            if self.role is Role.LEADER:
                now = self._clock()
                self.followers = {
                    r: self.followers.get(r) or FollowerState(last_caught_up_ms=now)
                    for r in self.replicas
                    if r != self.broker_id
                }
        if self.role is Role.LEADER:
            self.maybe_advance_hw()

    # -- the leader's bookkeeping ----------------------------------------------------------

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched at ``fetch_offset`` (= its LEO). True if the HW moved."""
        follower = self.followers.get(replica_id)
        if follower is None or self.role is not Role.LEADER:
            return False
        now = self._clock()
        leader_leo = self.log.log_end_offset
        # Kafka's rule: caught up if it asked for the leader's LEO now, or for what was the
        # leader's LEO at its previous fetch (so a steady stream does not look like lag).
        if fetch_offset >= leader_leo:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_leo_at_last_fetch >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.leo = fetch_offset
        follower.last_fetch_ms = now
        follower.leader_leo_at_last_fetch = leader_leo
        return self.maybe_advance_hw()

    def maybe_advance_hw(self) -> bool:
        if self.role is not Role.LEADER:
            return False
        leos = [self.log.log_end_offset]
        for r in self.isr:
            if r != self.broker_id:
                follower = self.followers.get(r)
                leos.append(follower.leo if follower is not None else -1)
        new_hw = min(leos)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    def isr_to_shrink(self, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers that lagged longer than ``max_lag_ms``; None if none."""
        if self.role is not Role.LEADER:
            return None
        now = self._clock()
        # (a follower without a record counts as last caught up at 0, FollowerState's default;
        # no record is made for the lookup: this runs over every partition led, every pass)
        lagging = set()
        for r in self.isr:
            if r != self.broker_id:
                follower = self.followers.get(r)
                caught_up = follower.last_caught_up_ms if follower is not None else 0.0
                if now - caught_up > max_lag_ms:
                    lagging.add(r)
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with ``replica_id`` added if that follower, which has just fetched, has
        caught up; None if it is already in the ISR or has not caught up (Kafka's
        ``Partition.maybeExpandIsr``).

        Only the follower that fetched may join: another follower's LEO is what it had at its
        own last fetch, and a broker that died since still shows one equal to the high
        watermark once nothing is written. Judging every follower on each fetch re-added a
        killed broker every time the expiry pass dropped it, until its ZooKeeper session
        ended. (Whether ``replica_id`` is still registered is the replica manager's check.)
        """
        if self.role is not Role.LEADER or replica_id in self.isr:
            return None
        follower = self.followers.get(replica_id)
        if follower is None or replica_id not in self.replicas:
            return None
        if follower.leo < self.log.high_watermark or follower.leo < self.epoch_start_offset:
            return None
        return tuple(self.isr) + (replica_id,)

    def committed(self, offset: int) -> bool:
        """Whether every message before ``offset`` is replicated to the whole ISR."""
        return self.log.high_watermark >= offset
