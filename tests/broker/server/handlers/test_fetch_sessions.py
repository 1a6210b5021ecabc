"""Fetch sessions (KIP-227) over the wire: a full fetch with epoch 0 opens a session, later
fetches in it name only what changed and are answered with only the partitions that have
something new; a wrong epoch or an unknown session is refused; forgotten partitions leave;
epoch -1 closes it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def fetch(
    wire: WireClient,
    session_id: int,
    epoch: int,
    partitions: dict[tuple[str, int], int],
    *,
    forgotten: dict[str, list[int]] | None = None,
    max_wait_ms: int = 0,
) -> Any:
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, p), offset in partitions.items():
        topics.setdefault(topic, []).append(
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        )  # fmt: skip
    body = request(
        ApiKey.FETCH,
        11,
        {"max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
         "session_id": session_id, "session_epoch": epoch,
         "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
         "forgotten_topics_data": [
             {"topic": t, "partitions": ps} for t, ps in (forgotten or {}).items()
         ]},
    )  # fmt: skip
    return wire.call(body)


def answered(response: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def test_a_session_answers_only_what_changed(broker: BrokerProcess) -> None:
    topic = unique("session")
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, [Msg(None, b"first")], partition=0)
    everything = {(topic, p): 0 for p in range(3)}
    with WireClient(broker.port) as wire:
        full = fetch(wire, 0, 0, everything)
        assert full.error_code == Errors.NONE and full.session_id != 0
        session = full.session_id
        first = answered(full)
        assert set(first) == set(everything) and first[(topic, 0)].records
        assert first[(topic, 0)].high_watermark == 1

        # Consumed p0: its new offset is the only change; nothing new to answer.
        quiet = fetch(wire, session, 1, {(topic, 0): 1})
        assert quiet.error_code == Errors.NONE and quiet.session_id == session
        assert answered(quiet) == {}

        # A produce to p2 wakes the waiting incremental fetch, which answers p2 alone.
        def later() -> None:
            time.sleep(0.3)
            produce(broker.bootstrap, topic, [Msg(None, b"p2")], partition=2, linger_ms=0)

        producer = threading.Thread(target=later)
        producer.start()
        started = time.monotonic()
        woken = fetch(wire, session, 2, {}, max_wait_ms=5000)
        producer.join()
        assert time.monotonic() - started < 3
        only = answered(woken)
        assert set(only) == {(topic, 2)}
        assert only[(topic, 2)].high_watermark == 1 and only[(topic, 2)].records

        # Epoch 2 again: refused, and no partitions.
        stale = fetch(wire, session, 2, {})
        assert stale.error_code == Errors.INVALID_FETCH_SESSION_EPOCH
        assert stale.session_id == 0 and answered(stale) == {}
        unknown = fetch(wire, session ^ 0x5A5A, 1, {})
        assert unknown.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND

        # Forget p2: a produce to it no longer answers in this session.
        gone = fetch(wire, session, 3, {(topic, 2): 1}, forgotten={topic: [2]})
        assert gone.error_code == Errors.NONE and answered(gone) == {}
        produce(broker.bootstrap, topic, [Msg(None, b"unseen")], partition=2)
        assert answered(fetch(wire, session, 4, {}, max_wait_ms=300)) == {}
        # ... but one to p1 does, with its records.
        produce(broker.bootstrap, topic, [Msg(None, b"p1")], partition=1)
        assert set(answered(fetch(wire, session, 5, {}))) == {(topic, 1)}

        # Epoch -1 closes it: a full answer without a session, then the id is unknown.
        closing = fetch(wire, session, -1, {(topic, 0): 0})
        assert closing.session_id == 0 and set(answered(closing)) == {(topic, 0)}
        assert fetch(wire, session, 6, {}).error_code == Errors.FETCH_SESSION_ID_NOT_FOUND


def test_an_error_is_answered_until_it_goes_away(broker: BrokerProcess) -> None:
    topic = unique("session-error")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        full = fetch(wire, 0, 0, {(topic, 0): 0, (topic, 7): 0})
        assert answered(full)[(topic, 7)].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        again = answered(fetch(wire, full.session_id, 1, {}))
        assert set(again) == {(topic, 7)}  # an error is answered every time, Kafka's rule


def test_the_session_cache_keys_bound_the_sessions(tmp_path: Any) -> None:
    """``max.incremental.fetch.session.cache.slots`` and
    ``min.incremental.fetch.session.eviction.ms`` from the broker's file: one slot, held by a
    session younger than the eviction time, leaves a second client sessionless (id 0, a plain
    full fetch, as Kafka answers); zero slots open none."""
    for slots, expected_second in ((1, False), (0, False)):
        broker = BrokerProcess(
            tmp_path / str(slots),
            {"max.incremental.fetch.session.cache.slots": str(slots),
             "min.incremental.fetch.session.eviction.ms": "600000"},
            log_level="warning",
        ).start()  # fmt: skip
        try:
            topic = unique("slots")
            create_topic(broker.bootstrap, topic, partitions=1)
            with WireClient(broker.port) as first, WireClient(broker.port) as second:
                opened = fetch(first, 0, 0, {(topic, 0): 0})
                assert opened.error_code == Errors.NONE
                assert (opened.session_id != 0) is (slots > 0)
                other = fetch(second, 0, 0, {(topic, 0): 0})
                assert other.error_code == Errors.NONE
                assert (other.session_id != 0) is expected_second
                assert set(answered(other)) == {(topic, 0)}
        finally:
            broker.stop()
