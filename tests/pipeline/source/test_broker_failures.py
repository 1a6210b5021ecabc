"""Tests for sluice.pipeline.source.broker_failures: librdkafka's connection failures are
counted per broker, nothing reaches stderr, and one line names the brokers."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.pipeline.source.broker_failures import BrokerFailures
from sluice.testing.net import free_port


def test_a_dead_broker_is_counted_not_streamed(capfd: pytest.CaptureFixture[str]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    failures = BrokerFailures()
    consumer = Consumer(failures.settings({"bootstrap.servers": dead, "group.id": "g"}))
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        deadline = time.monotonic() + 10
        while failures.total < 3 and time.monotonic() < deadline:
            assert consumer.consume(10, timeout=0.2) == []  # no error events either
    finally:
        consumer.close()
    err = capfd.readouterr().err
    assert "Connect to" not in err and "FAIL" not in err
    assert failures.total >= 3 and set(failures.by_broker) == {dead}
    assert failures.summary() == (
        f"{dead} ({failures.by_broker[dead]} connection failures: Connection refused)"
    )


def test_lines_are_parsed_by_broker() -> None:
    failures = BrokerFailures()
    failures.note(
        "FAIL [rdkafka#consumer-1] [thrd:h:9092/1]: h:9092/1: Connect to ipv4#10.0.0.1:9092 "
        "failed: Connection timed out (after 3001ms in state CONNECT)",
        logging.ERROR,
    )
    failures.note("ERROR [rdkafka#consumer-1] [thrd:app]: 2/2 brokers are down", logging.ERROR)
    failures.note("WARN [rdkafka#consumer-1] [thrd:main]: something else", logging.WARNING)
    assert failures.by_broker == {"h:9092": 1}
    assert failures.summary() == "h:9092 (1 connection failures: Connection timed out)"
    assert failures.other == ["something else"]
