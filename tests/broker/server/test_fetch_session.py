"""``FetchSessionCache`` against a model: each session a dict of partition → fetch offset as
the client last sent it, the epoch it must send next, and the partitions marked changed.

Random sequences of full fetches (opening sessions), incremental fetches with right and
wrong epochs, closes, partition changes and the clock moving; after each step the cache's
sessions, their partitions, epochs and dirty sets must be the model's, the cache must hold at
most its slots, sessions unused past the eviction time go when one opens, and no session may
evict a follower's.
``CachedPartition.must_respond`` is checked against Kafka's rule separately.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sluice.broker.protocol.errors import Errors
from sluice.broker.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    ContextKind,
    FetchSessionCache,
    next_epoch,
)
from sluice.common.topic_partition import TopicPartition

TPS = [TopicPartition(t, p) for t in ("a", "b") for p in range(3)]
SLOTS = 3
EVICTION_MS = 1000

partition_sets = st.dictionaries(st.sampled_from(TPS), st.integers(0, 50), min_size=1)


class Model:
    def __init__(self, privileged: bool, parts: dict[TopicPartition, int], now: float) -> None:
        self.privileged = privileged
        self.parts = dict(parts)
        self.epoch = 1
        self.dirty: set[TopicPartition] = set()
        self.last_used = now


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.cache = FetchSessionCache(
            SLOTS, EVICTION_MS, clock=lambda: self.now, rng=random.Random(7)
        )
        self.model: dict[int, Model] = {}
        self._opening = 0  # the size of the session being opened

    def _requested(self, parts: dict[TopicPartition, int]) -> list[CachedPartition]:
        return [CachedPartition(tp, offset, 1 << 20) for tp, offset in parts.items()]

    def _evicted(self, privileged: bool, before: dict[int, Model]) -> None:
        gone = set(before) - set(self.cache.sessions)
        assert len(gone) <= 1
        for session_id in gone:
            lost = before.pop(session_id)
            stale = self.now - lost.last_used > EVICTION_MS
            # Only a consumer's session worth no more than the new one (stale ones are gone).
            assert not stale
            assert not lost.privileged, "a follower's session was evicted"
            assert privileged or len(lost.parts) <= self._opening

    @rule(privileged=st.booleans(), parts=partition_sets)
    def open_session(self, privileged: bool, parts: dict[TopicPartition, int]) -> None:
        requested = self._requested(parts)
        context = self.cache.context(0, INITIAL_EPOCH, requested, [], privileged=privileged)
        assert context.kind is ContextKind.FULL
        assert context.named == list(parts)
        # Opening a session removes those unused for longer than the eviction time.
        for gone in [i for i, m in self.model.items() if self.now - m.last_used > EVICTION_MS]:
            del self.model[gone]
        full = len(self.model) >= SLOTS
        self._opening = len(parts)
        session = self.cache.create(privileged, requested)
        self._evicted(privileged, self.model)
        if session is None:
            assert full
            return
        assert session.id not in self.model and session.id != 0
        assert session.epoch == next_epoch(INITIAL_EPOCH) == 1
        self.model[session.id] = Model(privileged, parts, self.now)

    @precondition(lambda self: self.model)
    @rule(
        data=st.data(),
        changes=st.dictionaries(st.sampled_from(TPS), st.integers(0, 50)),
        forget=st.sets(st.sampled_from(TPS)),
        wrong_epoch=st.booleans(),
    )
    def incremental(
        self,
        data: st.DataObject,
        changes: dict[TopicPartition, int],
        forget: set[TopicPartition],
        wrong_epoch: bool,
    ) -> None:
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        m = self.model[session_id]
        epoch = m.epoch + 1 if wrong_epoch else m.epoch
        forget -= set(changes)
        context = self.cache.context(
            session_id, epoch, self._requested(changes), sorted(forget), privileged=m.privileged
        )
        if wrong_epoch:
            assert context.kind is ContextKind.ERROR
            assert context.error == Errors.INVALID_FETCH_SESSION_EPOCH
            return
        m.parts.update(changes)
        for tp in forget:
            m.parts.pop(tp, None)
            m.dirty.discard(tp)
        assert context.named == list(changes)
        if not m.parts:
            assert context.kind is ContextKind.SESSIONLESS
            del self.model[session_id]
            return
        assert context.kind is ContextKind.INCREMENTAL and context.session is not None
        m.epoch = next_epoch(m.epoch)
        m.last_used = self.now

    @rule(session_id=st.integers(1, 10))
    def unknown_session(self, session_id: int) -> None:
        if session_id in self.model:
            return
        context = self.cache.context(session_id, 1, [], [], privileged=False)
        assert context.kind is ContextKind.ERROR
        assert context.error == Errors.FETCH_SESSION_ID_NOT_FOUND

    @precondition(lambda self: self.model)
    @rule(data=st.data(), reopen=st.booleans())
    def close(self, data: st.DataObject, reopen: bool) -> None:
        """A full fetch naming a session closes it (epoch -1), or replaces it (epoch 0)."""
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        epoch = INITIAL_EPOCH if reopen else FINAL_EPOCH
        context = self.cache.context(session_id, epoch, [], [], privileged=False)
        assert context.kind is (ContextKind.FULL if reopen else ContextKind.SESSIONLESS)
        del self.model[session_id]

    @rule(tp=st.sampled_from(TPS))
    def changed(self, tp: TopicPartition) -> None:
        for session in self.cache.sessions.values():
            session.wake.clear()
        self.cache.changed(tp)
        for session_id, m in self.model.items():
            woken = self.cache.sessions[session_id].wake.is_set()
            assert woken == (tp in m.parts)
            if tp in m.parts:
                m.dirty.add(tp)

    @rule(ms=st.sampled_from([10, 600, 1500]))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @invariant()
    def matches_the_model(self) -> None:
        assert len(self.cache) <= SLOTS
        assert set(self.cache.sessions) == set(self.model)
        for session_id, m in self.model.items():
            session = self.cache.sessions[session_id]
            assert {tp: cp.fetch_offset for tp, cp in session.partitions.items()} == m.parts
            assert session.epoch == m.epoch
            assert session.dirty == m.dirty
            assert session.privileged == m.privileged
        # The partition index holds exactly the sessions' partitions.
        for tp in TPS:
            holders = {s.id for s in self.cache._holders.get(tp, ())}
            assert holders == {i for i, m in self.model.items() if tp in m.parts}


SessionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
TestFetchSessionCache = SessionMachine.TestCase


answers = st.tuples(
    st.booleans(),  # records
    st.sampled_from([Errors.NONE, Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER]),
    st.integers(0, 3),  # high watermark
    st.integers(0, 3),  # last stable offset
    st.integers(0, 2),  # log start
)


@given(st.lists(answers, min_size=1, max_size=30))
def test_an_incremental_answer_includes_only_what_changed(
    seq: list[tuple[bool, Errors, int, int, int]],
) -> None:
    cp = CachedPartition(TopicPartition("t", 0), 0, 100)
    last: tuple[int, int, int] | None = None  # what the client last saw
    for records, error, hw, lso, log_start in seq:
        expected = records or error != Errors.NONE or last != (hw, lso, log_start)
        got = cp.must_respond(has_records=records, error=error, hw=hw, lso=lso, log_start=log_start)
        assert got == expected
        # After an error the client must be told the offsets again once it is gone.
        last = None if error != Errors.NONE else (hw, lso, log_start) if got else last


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch((1 << 31) - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_follower_evicts_a_consumer_but_a_consumer_never_a_follower() -> None:
    now = [0.0]
    cache = FetchSessionCache(1, EVICTION_MS, clock=lambda: now[0])
    part = [CachedPartition(TPS[0], 0, 1)]
    consumer = cache.create(False, part * 1)
    assert consumer is not None
    follower = cache.create(True, part)
    assert follower is not None and consumer.id not in cache.sessions
    big = [CachedPartition(tp, 0, 1) for tp in TPS]
    assert cache.create(False, big) is None  # a bigger consumer session does not evict it
    now[0] += EVICTION_MS + 1
    assert cache.create(False, big) is not None  # a stale one goes
    assert follower.id not in cache.sessions
