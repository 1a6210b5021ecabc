"""``FetchSessionCache``: the leader's side of incremental fetch sessions (KIP-227, Kafka's
``FetchSession.scala``), so a fetch costs what changed rather than what is followed.

**Request metadata** (Fetch v7+): ``session_id`` and ``session_epoch``.

================  ==============  ===================================================
``session_id``    ``epoch``       meaning
================  ==============  ===================================================
0                 -1 (FINAL)      a full fetch without a session (v4–6 always are)
any               0 (INITIAL)     a full fetch that opens a session (closing the one
                                  named, if any); answered with the new id, or 0 if
                                  the cache has no slot for it
id                -1 (FINAL)      close session ``id``; a full fetch without a session
id                n > 0           an incremental fetch in session ``id``: the request
                                  names only partitions added or changed (fetch offset,
                                  log start, max bytes, leader epoch), and
                                  ``forgotten_topics_data`` those to drop
================  ==============  ===================================================

An unknown ``id`` is FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's next one
INVALID_FETCH_SESSION_EPOCH (top-level errors, session id 0, no partitions): the client then
starts over with a full fetch. The epoch after 0 is 1, and after 2^31 - 1 it wraps to 1.

**Responses.** A full fetch answers every partition. An incremental one answers only the
partitions that must be (Kafka's ``CachedPartition.maybeUpdateResponseData``): records to
return, an error, or a high watermark, last stable offset or log start offset other than the
last one answered. A partition with an error has its answered high watermark reset to -1, so
it is answered again once the error goes away.

**What changed** (Sluice's addition; Kafka re-reads every session partition on each fetch,
cheap on the JVM, 1,500 log reads per fetch in Python). Each session keeps ``dirty``: its
partitions that may have something to answer. :meth:`FetchSessionCache.changed` — called for
every append, high-watermark move and role change (the fetch purgatory's ``notify``) — marks
the partition dirty in every session that holds it and wakes the session's waiting fetch. A
read takes a partition out of ``dirty`` only when it is *at rest*: no error and the fetch
offset at the end of what the fetch may read (log end for a follower, high watermark or last
stable offset for a consumer). So an incremental fetch reads the partitions its request names
plus the dirty ones, and no others: a partition neither named nor dirty was at rest when last
read and nothing has happened to it since.

**Eviction** (``max.incremental.fetch.session.cache.slots``, Kafka's default 1000): opening a
session first removes every session unused for ``eviction_ms`` (Kafka's
``min.incremental.fetch.session.eviction.ms``, 120 s; Kafka removes one only when it needs the
slot, but here a forgotten session would go on being marked on every change to its
partitions). The new session then takes a free slot, else evicts the least valuable session
if the new one is worth at least as much — sessions ordered by followers' ("privileged")
above consumers', then by size, then by id. A follower's session evicts only consumers'
sessions (any of them); a consumer's never evicts a follower's.

Not thread-safe: the fetch handler and the notifications run on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from sluice.broker.protocol.errors import Errors
from sluice.common.topic_partition import TopicPartition

#: ``session_id`` of no session; epochs that make a fetch full.
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's defaults for max.incremental.fetch.session.cache.slots and
#: min.incremental.fetch.session.eviction.ms.
DEFAULT_SLOTS = 1000
DEFAULT_EVICTION_MS = 120_000
_MAX_EPOCH = (1 << 31) - 1


def next_epoch(epoch: int) -> int:
    """The epoch that follows ``epoch`` (KIP-227: 0 → 1, wraps past 2^31 - 1 to 1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """A session partition: what the client asked last (``fetch_offset`` … ``max_bytes``)
    and what was answered last (``high_watermark`` … ``log_start``; -1 before the first
    answer, so the first answer always includes it)."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1  # v12+ (KIP-320): the epoch of the last record fetched
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start: int = -1

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.log_start_offset = other.log_start_offset
        self.last_fetched_epoch = other.last_fetched_epoch

    def must_respond(
        self, *, has_records: bool, error: int, hw: int, lso: int, log_start: int
    ) -> bool:
        """Whether an incremental answer includes this partition, recording what it answers
        (see the module docstring)."""
        respond = has_records
        if hw != self.high_watermark or lso != self.last_stable_offset:
            respond = True
            self.high_watermark, self.last_stable_offset = hw, lso
        if log_start != self.log_start:
            respond = True
            self.log_start = log_start
        if error != Errors.NONE:
            self.high_watermark = -1
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    """One session: its partitions in the order they joined, the epoch its next request must
    carry, and the dirty set (module docstring). ``wake`` is set whenever a partition is
    marked dirty; a fetch waiting for data waits on it."""

    id: int
    privileged: bool
    epoch: int
    partitions: dict[TopicPartition, CachedPartition]
    last_used_ms: float
    dirty: set[TopicPartition] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: When a follower's session last renewed its idle partitions' caught-up time.
    touched_ms: float = 0.0

    def update(
        self, requested: Iterable[CachedPartition], forgotten: Iterable[TopicPartition]
    ) -> list[TopicPartition]:
        """Apply an incremental request; returns the partitions it names (added or changed),
        which the fetch reads whether dirty or not. Forgotten partitions leave the session."""
        named = []
        for cp in requested:
            cached = self.partitions.get(cp.tp)
            if cached is None:
                self.partitions[cp.tp] = cp
            else:
                cached.update_request(cp)
            named.append(cp.tp)
        for tp in forgotten:
            self.partitions.pop(tp, None)
            self.dirty.discard(tp)
        return named

    def key(self) -> tuple[bool, int, int]:
        """How valuable the session is to keep (Kafka's EvictableKey): lower is evicted first."""
        return (self.privileged, len(self.partitions), self.id)


class ContextKind(Enum):
    SESSIONLESS = "sessionless"  # a full fetch, no session answered
    FULL = "full"  # a full fetch that opens a session after it is read
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass
class FetchContext:
    """What a Fetch request is, resolved against the cache (Kafka's FetchContext)."""

    kind: ContextKind
    session: FetchSession | None = None
    error: Errors = Errors.NONE
    #: The partitions the request names, in its order (for an incremental one, the changes).
    named: list[TopicPartition] = field(default_factory=list)


def _now_ms() -> float:
    return time.monotonic() * 1000


class FetchSessionCache:
    """The broker's fetch sessions (see the module docstring)."""

    def __init__(
        self,
        max_slots: int = DEFAULT_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        clock: Callable[[], float] = _now_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        # Which sessions hold each partition, for changed().
        self._holders: dict[TopicPartition, set[FetchSession]] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    # -- resolving a request ---------------------------------------------------------------

    def context(
        self,
        session_id: int,
        epoch: int,
        requested: list[CachedPartition],
        forgotten: list[TopicPartition],
        *,
        privileged: bool,
    ) -> FetchContext:
        """Resolve a request's session metadata (Kafka's ``FetchManager.newContext``); an
        incremental request's partitions are applied to its session here."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch closes the session it names
            named = [cp.tp for cp in requested]
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(kind, named=named)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, error=Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error=Errors.INVALID_FETCH_SESSION_EPOCH)
        # Only the partitions the request names can join or leave the session: the index is
        # updated for those alone, not rebuilt from the whole session (a follower's session
        # holds every partition it follows; its fetches name a few).
        touched = {cp.tp for cp in requested}
        touched.update(forgotten)
        before = {tp for tp in touched if tp in session.partitions}
        named = session.update(requested, forgotten)
        self._reindex(session, before, touched)
        if not session.partitions:
            self.remove(session.id)  # Kafka: an emptied session ends; answered sessionless
            return FetchContext(ContextKind.SESSIONLESS, named=named)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = self._clock()
        return FetchContext(ContextKind.INCREMENTAL, session, named=named)

    def create(self, privileged: bool, partitions: list[CachedPartition]) -> FetchSession | None:
        """Open a session over ``partitions`` (a full fetch's, with their answered values), or
        None if there is no slot and none may be evicted for it."""
        now = self._clock()
        # Sessions unused past the eviction time go now rather than when a slot is needed (as
        # Kafka): each holds a place in the partitions' index that every change walks.
        for stale in [s for s in self.sessions.values() if now - s.last_used_ms > self.eviction_ms]:
            self.remove(stale.id)
        if len(self.sessions) >= self.max_slots and not self._evict_for(
            (privileged, len(partitions), 0)
        ):
            return None
        session_id = self._rng.randint(1, _MAX_EPOCH)
        while session_id in self.sessions:
            session_id = self._rng.randint(1, _MAX_EPOCH)
        session = FetchSession(
            session_id, privileged, next_epoch(INITIAL_EPOCH),
            {cp.tp: cp for cp in partitions}, now,
        )  # fmt: skip
        self.sessions[session_id] = session
        self._reindex(session, set())
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            for tp in session.partitions:
                self._unhold(tp, session)
            session.wake.set()  # a fetch still waiting in it answers now
        return session

    def _evict_for(self, key: tuple[bool, int, int]) -> bool:
        """Kafka's ``FetchSessionCache.tryEvict`` once the stale sessions are gone: evict the
        least valuable session the new one (``key``) may evict, if it is worth no more."""
        # A follower's session may evict any consumer's; a consumer's only a smaller one of
        # a consumer (its key sorts below every follower's).
        candidates = [s for s in self.sessions.values() if not (key[0] and s.privileged)]
        if not candidates:
            return False
        least = min(candidates, key=FetchSession.key)
        if key < least.key():
            return False
        self.remove(least.id)
        return True

    # -- what changed ----------------------------------------------------------------------

    def changed(self, tp: TopicPartition) -> None:
        """Something a fetch of ``tp`` answers may have changed: mark it in every session
        holding it and wake their fetches."""
        for session in self._holders.get(tp, ()):
            session.dirty.add(tp)
            session.wake.set()

    def _reindex(
        self,
        session: FetchSession,
        before: set[TopicPartition],
        touched: set[TopicPartition] | None = None,
    ) -> None:
        """Bring ``_holders`` in line with ``session``'s partitions, which were ``before``
        among ``touched`` (None: among all of them)."""
        if touched is None:
            now = set(session.partitions)
        else:
            now = {tp for tp in touched if tp in session.partitions}
        for tp in before - now:
            self._unhold(tp, session)
        for tp in now - before:
            self._holders.setdefault(tp, set()).add(session)

    def _unhold(self, tp: TopicPartition, session: FetchSession) -> None:
        holders = self._holders.get(tp)
        if holders is not None:
            holders.discard(session)
            if not holders:
                del self._holders[tp]
