"""Retention on a running broker, and what consumers see once their offset is gone.

A private broker runs its retention pass every 200 ms (``log.retention.check.interval.ms``)
and closes deleted segments after 100 ms (``log.segment.delete.delay.ms``). Topics with tiny
segments then lose their oldest segments by size (``retention.bytes``) or by time
(``retention.ms``, against the records' CreateTime), whole segments only, and the log start
offset moves: fetching below it is OFFSET_OUT_OF_RANGE, which confluent-kafka surfaces as an
error event under ``auto.offset.reset=error`` and resolves to the new start under
``earliest``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, TopicPartition

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import Msg, consumer, poll_messages, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = [pytest.mark.broker, pytest.mark.slow]

RETENTION_BROKER = {
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "100",
}
COUNT = 60


def _fill(broker: BrokerProcess, topic: str, timestamp: int | None = None) -> None:
    """``COUNT`` messages of about 300 bytes, one batch each, so segments roll often."""
    msgs = [Msg(b"k%d" % i, b"%04d" % i + b"." * 250, (), timestamp) for i in range(COUNT)]
    produce(broker.bootstrap, topic, msgs, partition=0, linger_ms=0, batch_num_messages=1)


def _wait_log_start_moved(wire: WireClient, topic: str, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        earliest = wire.list_offset(topic, 0, -2)
        if earliest > 0:
            return earliest
        time.sleep(0.1)
    raise AssertionError(f"no retention pass moved the log start of {topic} in {timeout}s")


def test_retention_by_size_then_out_of_range(start_broker: StartBroker) -> None:
    broker = start_broker(RETENTION_BROKER)
    topic = unique("retain-bytes")
    create_topic(
        broker.bootstrap, topic, config={"segment.bytes": "2000", "retention.bytes": "4000"}
    )
    _fill(broker, topic)
    with WireClient(broker.port) as wire:
        earliest = _wait_log_start_moved(wire, topic)
        time.sleep(0.5)  # let the pass finish with every segment it will delete
        earliest = wire.list_offset(topic, 0, -2)
        assert wire.list_offset(topic, 0, -1) == COUNT
        # Whole segments go, oldest first, while what is left stays >= retention.bytes.
        assert 0 < earliest < COUNT
        assert (COUNT - earliest) * 300 >= 4000
        below = wire.fetch(topic, 0, 0)
        assert below.error_code == Errors.OFFSET_OUT_OF_RANGE
        assert below.log_start_offset == earliest
        assert wire.fetch(topic, 0, earliest).error_code == Errors.NONE
    assert not list((broker.log_dir / f"{topic}-0").glob("00000000000000000000.*"))

    strict = consumer(broker.bootstrap, auto_offset_reset="error")
    try:
        assert strict.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (
            earliest,
            COUNT,
        )
        strict.assign([TopicPartition(topic, 0, 0)])
        error = None
        deadline = time.monotonic() + 15
        while error is None and time.monotonic() < deadline:
            m = strict.poll(0.2)
            if m is not None:
                assert m.error() is not None, f"read offset {m.offset()} below the log start"
                error = m.error()
        assert error is not None, "no error event for a fetch below the log start"
        assert error.code() == KafkaError._AUTO_OFFSET_RESET
        assert "out of range" in error.str().lower()
    finally:
        strict.close()

    lenient = consumer(broker.bootstrap, auto_offset_reset="earliest")
    try:
        lenient.assign([TopicPartition(topic, 0, 0)])
        first = poll_messages(lenient, 1)[0]
        assert first.offset() == earliest
        assert first.value().startswith(b"%04d" % earliest)
    finally:
        lenient.close()


def test_retention_by_time_uses_record_timestamps(start_broker: StartBroker) -> None:
    broker = start_broker(RETENTION_BROKER)
    old, recent = unique("retain-old"), unique("retain-recent")
    config = {"segment.bytes": "2000", "retention.ms": "60000"}
    create_topic(broker.bootstrap, old, config=config)
    create_topic(broker.bootstrap, recent, config=config)
    _fill(broker, old, timestamp=int(time.time() * 1000) - 3_600_000)  # an hour old
    _fill(broker, recent)  # now
    with WireClient(broker.port) as wire:
        earliest = _wait_log_start_moved(wire, old)
        time.sleep(0.5)
        earliest = wire.list_offset(old, 0, -2)
        # Every segment but the active one is older than retention.ms.
        active = sorted((broker.log_dir / f"{old}-0").glob("*.log"))
        assert len(active) == 1
        assert earliest == int(active[0].name.split(".")[0])
        assert wire.list_offset(recent, 0, -2) == 0
