"""``Rebalancer``: the paper's Algorithm 1 on the ZooKeeper registries, and the offset commits.

One per joined connector; it owns every ZooKeeper write of the consumer (registration,
ownership, offsets) and reads the registries a rebalance depends on. The znodes are those of
``sluice.pipeline.consumer.registry`` (consumers) and ``sluice.broker.cluster.zk_data``
(brokers and topics).

**One attempt** (:meth:`Rebalancer.synced_rebalance` makes up to ``rebalance.max.retries``):

1. Stop delivering (:meth:`OwnedPartitions.revoke
   <sluice.pipeline.consumer.owned.OwnedPartitions.revoke>`: queued messages become stale),
   commit the consumed offsets of the owned partitions (if ``auto.commit.enable``), delete our
   ownership znodes.
2. Read the consumer registry (re-arming the children watch) and each topic's partition count
   (``/brokers/topics/<t>`` when it exists, re-arming an exists-watch, else broker Metadata).
3. Compute the assignment; our share is what our threads got. Every consumer reads the same
   registries, sorts the same ids and runs the same pure assignor, so all compute the same
   assignment without talking to each other.
4. Create all our ownership znodes in one ZooKeeper multi (all or none). If one exists —
   another consumer has not released it yet, the notifications reach consumers at slightly
   different times — we own nothing, back off (randomised, growing) and go back to step 1.
   A round that fails every attempt raises :class:`ConsumerRebalanceFailedError`; the
   connector retries the round after a backoff (Kafka 0.8 gave up and logged; an idle consumer
   beside orphaned partitions helps nobody).
5. Read each partition's offset from the offset registry; a partition without one (a new
   group) starts at the log start or end per ``auto.offset.reset`` and that offset is written
   at once, so a restart resumes where the group started and not at the new end.
6. Install exactly the owned partitions, at those offsets, for the fetcher.

**Sticky.** The sticky assignor needs every member's previous partitions, and every consumer
must see the same ones. Reading the owners znodes would not do: consumers release at different
moments, so each would see a different subset. Instead a consumer writes what it acquired into
its own ids znode (``"owned"``) after each successful rebalance, and everyone reads "previous"
from the consumer registry it reads anyway. A consumer that failed to acquire keeps its last
``owned``, so the group's view of "previous" only changes when someone succeeds. Consumers that
rebalanced at slightly different moments may have read different "previous" lists and so
computed different assignments — a conflict no retry of the newcomer could resolve, since the
others would never look again. So with the sticky assignors the other members' ``owned`` lists
are part of the view and their ids znodes carry data watches: a consumer that publishes a new
``owned`` makes the others recompute from the same lists. That ends: the sticky placement of a
balanced "previous" is that "previous", and a consumer whose share did not change publishes
nothing.

**Commits** are a multi conditional on our ownership znodes existing, and are refused once our
ZooKeeper session has changed (the znodes were then someone else's or no one's): a consumer
that lost its session cannot move a partition's offset under its new owner.

**ZooKeeper unreachable.** A release that cannot reach ZooKeeper raises, and keeps what is left
to commit and to delete for the next attempt: forgetting it would orphan our ownership znodes,
which nobody else may delete, and lose the offsets. A write whose reply was lost may or may not
have been applied; the next release then deletes the ownership znodes of our session that we
do not know of.

Thread-safety: the public methods serialise on one re-entrant lock (ZooKeeper writes never
interleave); :attr:`Rebalancer.register_needed` may be set from any thread. Watches are left
with the ``watch`` callback given at construction, which runs on kazoo's thread.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent

from sluice.broker.cluster.zk_data import BrokerIdsZNode, TopicZNode, ZkDataError
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.assignors import STICKY_ASSIGNORS, get_assignor
from sluice.pipeline.consumer.config import ConsumerConfig
from sluice.pipeline.consumer.fetcher import Fetcher
from sluice.pipeline.consumer.owned import OwnedPartition, OwnedPartitions
from sluice.pipeline.consumer.registry import (
    ConsumerIdsZNode,
    ConsumerIdZNode,
    ConsumerRegistration,
    OffsetZNode,
    OwnersTopicZNode,
    OwnerZNode,
    thread_id,
)

__all__ = [
    "RETRIABLE",
    "ConsumerRebalanceFailedError",
    "ConsumerStats",
    "Rebalancer",
    "backoff",
]

log = logging.getLogger(__name__)

RETRIABLE = (KazooException, KazooTimeoutError, KafkaException)
"""Failures of one attempt that a later attempt may not see: ZooKeeper or the broker
unreachable, a session being re-established."""


class ConsumerRebalanceFailedError(Exception):
    """Every attempt of a rebalance round ran into ownership conflicts or errors."""


@dataclass
class ConsumerStats:
    """Counters for monitoring and tests (written by the rebalance and kazoo threads)."""

    rebalances: int = 0  # successful rebalances
    rebalance_attempts: int = 0
    ownership_conflicts: int = 0  # attempts that found a partition still owned by another
    failed_rounds: int = 0  # rounds that used up rebalance.max.retries
    commits: int = 0  # offset-registry writes that succeeded (one per multi)
    sessions_lost: int = 0  # ZooKeeper sessions that expired under us


def backoff(base_ms: int, attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1`` (``attempt`` counts from 0)."""
    # Randomised so that two consumers that collided do not collide again in lockstep;
    # growing (capped at 8x) so that a slow releaser gets more time on each retry.
    return float(base_ms / 1000 * min(2**attempt, 8) * random.uniform(0.5, 1.5))


# What an assignment depends on: members and their subscriptions, partition counts, and the
# live brokers (None when /brokers/ids does not exist: standalone brokers).
_Members = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
# The other members' published "owned" lists (sticky assignors only; empty otherwise).
_Owned = tuple[tuple[str, tuple[TopicPartition, ...]], ...]
_View = tuple[_Members, tuple[tuple[str, int], ...], tuple[str, ...] | None, _Owned]
# Offsets to commit: partition -> (its table entry, the consumed offset to write).
_Commits = Mapping[TopicPartition, tuple[OwnedPartition, int]]


class Rebalancer:
    """Runs Algorithm 1 and commits offsets for one consumer (see the module docstring)."""

    def __init__(
        self,
        zk: KazooClient,
        config: ConsumerConfig,
        subscription: Mapping[str, int],
        owned: OwnedPartitions,
        fetcher: Fetcher,
        metadata: Consumer,
        stats: ConsumerStats,
        *,
        stopping: threading.Event,
        watch: Callable[[WatchedEvent], None],
    ) -> None:
        self.config = config
        self.consumer_id = config.consumer_id
        self.group = config.group_id
        self.stats = stats
        self._zk = zk
        self._subscription = dict(subscription)
        self._assignor = get_assignor(config.partition_assignment_strategy)
        # Whether the assignment depends on the members' previous partitions (see "Sticky").
        self._sticky = config.partition_assignment_strategy in STICKY_ASSIGNORS
        self._owned = owned
        self._fetcher = fetcher
        # A librdkafka handle of our own (Metadata, ListOffsets): the fetcher's handle would
        # not answer while the fetcher loops in consume() (confluent-kafka 2.16: each consume
        # call starves callers on other threads).
        self._metadata = metadata
        self._stopping = stopping  # wakes backoff sleeps
        self._watch = watch
        self._lock = threading.RLock()

        # Set when our ids znode may be gone (a lost session): the next attempt registers.
        self.register_needed = False
        self._owner_session: int | None = None  # the session our ownership znodes belong to
        # The ownership znodes we created (in _owner_session), whether or not the attempt that
        # created them got as far as fetching: release() deletes exactly these.
        self._claimed: set[TopicPartition] = set()
        # Released partitions whose offsets are not committed yet (ZooKeeper was unreachable).
        self._unreleased: dict[TopicPartition, tuple[OwnedPartition, int]] = {}
        # Set while an ownership write may or may not have been applied (its reply was lost):
        # the next release then looks for znodes of our session that we do not know about.
        self._ownership_uncertain = False
        self._published_owned: dict[str, list[TopicPartition]] = {}
        self._last_view: _View | None = None  # what the last successful attempt saw

    # ---------------------------------------------------------------- called by the connector

    def register(self) -> None:
        """Create our ephemeral ids znode; wait out one left by a dead session of the same id."""
        with self._lock:
            path = ConsumerIdZNode.path(self.group, self.consumer_id)
            deadline = time.monotonic() + 2 * self.config.zookeeper_session_timeout_ms / 1000
            while True:
                data = ConsumerIdZNode.encode(self.consumer_id, self._registration())
                try:
                    self._zk.create(path, data, ephemeral=True, makepath=True)
                    break
                except NodeExistsError:
                    try:
                        _, stat = self._zk.get(path)
                    except NoNodeError:
                        continue
                    if stat.ephemeralOwner == self._session_id():
                        self._zk.set(path, data)
                        break
                    if time.monotonic() > deadline:
                        raise
                    self._stopping.wait(0.2)
            self.register_needed = False

    def synced_rebalance(self) -> None:
        """Up to ``rebalance.max.retries`` attempts, with backoff between; returns after one
        succeeds or when stopping, raises :class:`ConsumerRebalanceFailedError` if all fail."""
        retries = self.config.rebalance_max_retries
        for attempt in range(retries):
            if self._stopping.is_set():
                return
            self.stats.rebalance_attempts += 1
            try:
                with self._lock:
                    done = self._rebalance()
            except RETRIABLE as e:
                log.warning("%s: rebalance attempt %d failed: %r", self.consumer_id, attempt, e)
                done = False
            except Exception:  # e.g. a corrupt registration: retrying may not help, but may
                log.exception("%s: rebalance attempt %d failed", self.consumer_id, attempt)
                done = False
            if done:
                self.stats.rebalances += 1
                return
            if attempt + 1 < retries:
                self._stopping.wait(backoff(self.config.rebalance_backoff_ms, attempt))
        self.stats.failed_rounds += 1
        log.warning("%s: rebalance failed %d times; retrying later", self.consumer_id, retries)
        raise ConsumerRebalanceFailedError(
            f"{self.consumer_id} could not rebalance after {retries} attempts"
        )

    def view_changed(self) -> bool:
        """Re-read the registries (re-arming the watches); did anything change since the last
        successful rebalance?"""
        with self._lock:
            return self._read_view()[2] != self._last_view

    def commit_owned(self) -> None:
        """Write the consumed offsets of the owned partitions to the offset registry."""
        with self._lock:
            self._commit(self._owned.consumed())

    def leave(self) -> None:
        """Release everything (committing if ``auto.commit.enable``), delete our ids znode."""
        with self._lock:
            self.release("shutdown")
            with contextlib.suppress(NoNodeError):
                self._zk.delete(ConsumerIdZNode.path(self.group, self.consumer_id))

    def release(self, why: str) -> None:
        """Stop delivering, commit the consumed offsets, delete our ownership znodes.

        Raises a kazoo error if ZooKeeper cannot be reached: what is left to commit and to
        delete is kept for the next attempt.
        """
        with self._lock:
            self._unreleased.update(self._owned.revoke())
            self._fetcher.wake()
            self._fetcher.discard_queued()  # everything queued is stale now
            session = self._session_id()
            if session is None:
                raise ConnectionLoss(f"cannot release while disconnected ({why})")
            if session != self._owner_session:
                # Our ownership znodes, and with them the right to commit, went with the old
                # session; whoever owns the partitions now resumes from the last commit.
                self._unreleased, self._claimed, self._ownership_uncertain = {}, set(), False
                return
            if self._unreleased and self.config.auto_commit_enable:
                self._commit(self._unreleased)
            self._unreleased = {}
            if self._ownership_uncertain:
                self._delete_orphans()
            if not self._claimed:
                return
            paths = [OwnerZNode.path(self.group, tp) for tp in sorted(self._claimed)]
            self._ownership_uncertain = True  # until the reply arrives
            txn = self._zk.transaction()
            for path in paths:
                txn.delete(path)
            if any(isinstance(r, Exception) for r in txn.commit()):
                for path in paths:  # one was gone already; delete the others one by one
                    with contextlib.suppress(NoNodeError):
                        self._zk.delete(path)
            self._ownership_uncertain = False
            log.debug("%s: released %d partitions (%s)", self.consumer_id, len(paths), why)
            self._claimed = set()

    # ---------------------------------------------------------------- Algorithm 1

    def _rebalance(self) -> bool:
        """One attempt; True when we own our share (possibly nothing) and fetch it."""
        if self.register_needed:
            self.register()
        # 1. Release everything we own (committing first).
        self.release("rebalance")
        # 2. Read the consumer registry and the partition counts, re-arming the watches.
        registrations, counts, view = self._read_view()
        if self.consumer_id not in registrations:
            # Our ephemeral znode is gone (session expired and not yet noticed): re-register.
            self.register_needed = True
            return False
        # 3. Everyone computes the same assignment from the same sorted inputs.
        members: dict[str, list[str]] = {}
        previous: dict[str, list[TopicPartition]] = {}
        for cid, registration in registrations.items():
            for topic, n in registration.subscription.items():
                for i in range(n):
                    members.setdefault(thread_id(cid, i), []).append(topic)
            previous.update(registration.owned)
        assignment = self._assignor(members, counts, previous)
        mine = {
            tp: i
            for i in range(max(self._subscription.values()))
            for tp in assignment.get(thread_id(self.consumer_id, i), [])
        }
        # 4. Claim all of it at once, or nothing.
        if mine and not self._claim(mine):
            return False
        # 5. Where to start each partition.
        starts = self._starting_offsets(sorted(mine))
        # 6. Fetch.
        self._owned.install({tp: (mine[tp], start) for tp, start in starts.items()})
        self._fetcher.wake()
        self._last_view = view
        self._publish_owned(mine)
        log.info(
            "%s: owns %s", self.consumer_id, [f"{t}-{p}" for t, p in sorted(mine)] or "nothing"
        )
        return True

    def _delete_orphans(self) -> None:
        """Delete ownership znodes of our session that we do not hold (a lost reply)."""
        session = self._session_id()
        for topic in sorted(self._subscription):
            parent = OwnersTopicZNode.path(self.group, topic)
            try:
                children = self._zk.get_children(parent)
            except NoNodeError:
                continue
            for child in children:
                with contextlib.suppress(NoNodeError):
                    _, stat = self._zk.get(f"{parent}/{child}")
                    if stat.ephemeralOwner == session:
                        log.info("%s: deleting orphan %s/%s", self.consumer_id, topic, child)
                        self._zk.delete(f"{parent}/{child}")
        self._ownership_uncertain = False

    def _claim(self, mine: Mapping[TopicPartition, int]) -> bool:
        session = self._session_id()
        for topic in sorted({tp.topic for tp in mine}):
            self._zk.ensure_path(OwnersTopicZNode.path(self.group, topic))
        order = sorted(mine)
        txn = self._zk.transaction()
        for tp in order:
            owner = OwnerZNode.encode(thread_id(self.consumer_id, mine[tp]))
            txn.create(OwnerZNode.path(self.group, tp), owner, ephemeral=True)
        self._ownership_uncertain = True  # until the reply arrives
        results = txn.commit()
        self._ownership_uncertain = False
        failures = [
            (tp, r)
            for tp, r in zip(order, results, strict=True)
            if isinstance(r, Exception)
            # The ops a failed multi did not run: they report these, not their own outcome.
            and not isinstance(r, RolledBackError | RuntimeInconsistency)
        ]
        if not failures:
            self._owner_session, self._claimed = session, set(mine)
            return True
        for tp, error in failures:
            if not isinstance(error, NodeExistsError):
                raise error
            self.stats.ownership_conflicts += 1
            log.info("%s: %s-%d is still owned by another consumer", self.consumer_id, *tp)
        return False

    def _starting_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's offset in the offset registry, written first where missing."""
        result: dict[TopicPartition, int] = {}
        for tp in partitions:
            path = OffsetZNode.path(self.group, tp)
            try:
                data, _ = self._zk.get(path)
                result[tp] = OffsetZNode.decode(self.group, tp, data)
                continue
            except NoNodeError:
                pass
            low, high = self._metadata.get_watermark_offsets(
                KafkaTopicPartition(tp.topic, tp.partition), timeout=10.0
            )
            offset = int(low if self.config.offset_reset == "earliest" else high)
            try:
                self._zk.create(path, OffsetZNode.encode(offset), makepath=True)
            except NodeExistsError:  # a previous owner committed after all; trust it
                data, _ = self._zk.get(path)
                offset = OffsetZNode.decode(self.group, tp, data)
            result[tp] = offset
        return result

    def _commit(self, snapshot: _Commits) -> None:
        """Write changed offsets, each conditional on our ownership znode still existing."""
        changed = {tp: (o, c) for tp, (o, c) in snapshot.items() if c != o.committed}
        if not changed:
            return
        session = self._session_id()
        if session is None:
            raise ConnectionLoss("cannot commit offsets while disconnected from ZooKeeper")
        if session != self._owner_session:
            log.warning(
                "%s: session changed; not committing %d offsets", self.consumer_id, len(changed)
            )
            return
        txn = self._zk.transaction()
        for tp, (_, consumed) in sorted(changed.items()):
            txn.check(OwnerZNode.path(self.group, tp), 0)
            txn.set_data(OffsetZNode.path(self.group, tp), OffsetZNode.encode(consumed))
        if any(isinstance(r, Exception) for r in txn.commit()):
            # Some ownership znode is gone; commit the rest one by one.
            for tp, (owned, consumed) in sorted(changed.items()):
                txn = self._zk.transaction()
                txn.check(OwnerZNode.path(self.group, tp), 0)
                txn.set_data(OffsetZNode.path(self.group, tp), OffsetZNode.encode(consumed))
                if not any(isinstance(r, Exception) for r in txn.commit()):
                    self._owned.mark_committed([(owned, consumed)])
                    self.stats.commits += 1
            return
        self._owned.mark_committed(changed.values())
        self.stats.commits += 1

    # ---------------------------------------------------------------- registry reads/writes

    def _session_id(self) -> int | None:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else None

    def _registration(self) -> ConsumerRegistration:
        return ConsumerRegistration(
            subscription=dict(self._subscription),
            timestamp_ms=int(time.time() * 1000),
            owned=dict(self._published_owned),
        )

    def _publish_owned(self, mine: Mapping[TopicPartition, int]) -> None:
        owned: dict[str, list[TopicPartition]] = {}
        for tp, stream in sorted(mine.items()):
            owned.setdefault(thread_id(self.consumer_id, stream), []).append(tp)
        if owned == self._published_owned:
            return
        self._published_owned = owned
        path = ConsumerIdZNode.path(self.group, self.consumer_id)
        try:
            self._zk.set(path, ConsumerIdZNode.encode(self.consumer_id, self._registration()))
        except NoNodeError:  # our session expired meanwhile; the next rebalance re-registers
            self.register_needed = True

    def _read_view(self) -> tuple[dict[str, ConsumerRegistration], dict[str, int], _View]:
        """The registries' content that the assignment depends on, watches re-armed."""
        registrations = self._read_consumers()
        brokers = self._watch_brokers()
        topics = sorted({t for r in registrations.values() for t in r.subscription})
        counts = self._partition_counts(topics)
        members = tuple(
            (c, tuple(sorted(r.subscription.items()))) for c, r in registrations.items()
        )
        owned: _Owned = ()
        if self._sticky:
            owned = tuple(
                (thread, tuple(sorted(partitions)))
                for cid, r in registrations.items()
                if cid != self.consumer_id  # our own list changes only when we rebalance
                for thread, partitions in sorted(r.owned.items())
            )
        return registrations, counts, (members, tuple(sorted(counts.items())), brokers, owned)

    def _read_consumers(self) -> dict[str, ConsumerRegistration]:
        ids_path = ConsumerIdsZNode.path(self.group)
        registrations: dict[str, ConsumerRegistration] = {}
        for cid in sorted(self._zk.get_children(ids_path, watch=self._watch)):
            try:
                # Sticky: a data watch too, for the other members' "owned" lists.
                watch = self._watch if self._sticky and cid != self.consumer_id else None
                data, _ = self._zk.get(f"{ids_path}/{cid}", watch=watch)
                registrations[cid] = ConsumerIdZNode.decode(self.group, cid, data)
            except NoNodeError:
                continue  # left meanwhile; the watch we just set fires for it
            except ZkDataError as e:
                # Every consumer reads the same bytes and skips the same member, so the
                # assignment stays the same everywhere; that member gets nothing.
                log.warning("%s: skipping a consumer: %s", self.consumer_id, e)
        return registrations

    def _watch_brokers(self) -> tuple[str, ...] | None:
        # The paper rebalances when brokers come or go. /brokers/ids exists in cluster mode
        # only; the exists-watch fires when it is created, the children watch on changes.
        # Only the ids matter here, not the registrations' payloads.
        path = BrokerIdsZNode.path()
        if self._zk.exists(path, watch=self._watch) is None:
            return None
        try:
            return tuple(sorted(self._zk.get_children(path, watch=self._watch)))
        except NoNodeError:
            return None

    def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        """Each topic's partition count: ``/brokers/topics/<t>`` if present, else Metadata.

        An exists-watch is left on every topic znode: it fires when the znode is created,
        changed (partitions added) or deleted, so cluster mode's topic registry triggers a
        rebalance with no change here. The znode may be Kafka 0.8's version 1 or the version 2
        of Sluice's cluster mode (and Kafka 2.x): ``TopicZNode`` reads both.
        """
        counts: dict[str, int] = {}
        from_metadata: list[str] = []
        for topic in topics:
            path = TopicZNode.path(topic)
            if self._zk.exists(path, watch=self._watch) is None:
                from_metadata.append(topic)
                continue
            try:
                data, _ = self._zk.get(path)
            except NoNodeError:
                from_metadata.append(topic)
                continue
            counts[topic] = len(TopicZNode.decode(topic, data).partitions)
        if from_metadata:
            metadata = self._metadata.list_topics(timeout=10.0)
            for topic in from_metadata:
                found = metadata.topics.get(topic)
                ok = found is not None and found.error is None
                counts[topic] = len(found.partitions) if ok else 0
        return counts
