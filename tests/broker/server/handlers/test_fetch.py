"""Long polling (the fetch purgatory): a waiting fetch answers as soon as data arrives, and
an idle one after about its ``max_wait``, not earlier and not much later."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_END, Producer, TopicPartition

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, consumer, poll_messages, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = pytest.mark.broker

MAX_WAIT_MS = 5000


def test_waiting_consumer_gets_a_new_message_at_once(broker: BrokerProcess) -> None:
    topic = unique("longpoll")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.list_topics(topic, timeout=10)  # connected, metadata known: only Produce is left
    c = consumer(broker.bootstrap, fetch_wait_max_ms=MAX_WAIT_MS, fetch_min_bytes=1)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        # Let the consumer resolve its position and park a fetch in the purgatory.
        assert c.poll(1.5) is None
        produced_at = time.monotonic()
        producer.produce(topic, b"wake up", partition=0)
        producer.poll(0)
        message = poll_messages(c, 1, timeout=MAX_WAIT_MS / 1000 + 5)[0]
        received_at = time.monotonic()
        assert producer.flush(10) == 0
    finally:
        c.close()
        producer.close()
    assert message.value() == b"wake up"
    # Without the purgatory's wake-up the message would wait for the pending fetch's 5 s.
    assert received_at - produced_at < 1.0


@pytest.mark.parametrize("max_wait_ms", [300, 1500])
def test_idle_fetch_returns_after_about_max_wait(broker: BrokerProcess, max_wait_ms: int) -> None:
    topic = unique("idle")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        started = time.monotonic()
        answer = wire.fetch(topic, 0, 0, max_wait_ms=max_wait_ms, min_bytes=1)
        elapsed = time.monotonic() - started
    assert answer.error_code == Errors.NONE
    assert answer.records in (b"", None)
    assert max_wait_ms / 1000 * 0.95 <= elapsed < max_wait_ms / 1000 + 0.5


def test_fetch_with_data_does_not_wait(broker: BrokerProcess) -> None:
    topic = unique("ready")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"here")], partition=0)
    with WireClient(broker.port) as wire:
        started = time.monotonic()
        answer = wire.fetch(topic, 0, 0, max_wait_ms=MAX_WAIT_MS, min_bytes=1)
        elapsed = time.monotonic() - started
    assert answer.high_watermark == 1 and answer.records
    assert elapsed < 0.5


def test_min_bytes_waits_for_enough_data(broker: BrokerProcess) -> None:
    """A fetch wanting 2 kB is not answered by the first 100 bytes, only once 2 kB are there
    (each append wakes it; it reads again and goes back to sleep)."""
    topic = unique("minbytes")
    create_topic(broker.bootstrap, topic)
    result: list[tuple[float, object]] = []

    def fetch() -> None:
        with WireClient(broker.port) as wire:
            answer = wire.fetch(topic, 0, 0, max_wait_ms=MAX_WAIT_MS, min_bytes=2048)
            result.append((time.monotonic(), answer))

    thread = threading.Thread(target=fetch)
    thread.start()
    time.sleep(0.3)
    produce(broker.bootstrap, topic, [Msg(None, b"s" * 100)], partition=0, linger_ms=0)
    time.sleep(0.5)
    assert not result, "answered with less than min_bytes before max_wait"
    produce(broker.bootstrap, topic, [Msg(None, b"b" * 3000)], partition=0, linger_ms=0)
    done = time.monotonic()
    thread.join(timeout=MAX_WAIT_MS / 1000 + 5)
    answered_at, answer = result[0]
    assert answered_at - done < 1.0
    assert answer.high_watermark == 2  # type: ignore[attr-defined]
