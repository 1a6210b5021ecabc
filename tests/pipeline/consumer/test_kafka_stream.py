"""Tests for sluice.pipeline.consumer.stream: a stream hands out only what the owned table lets
through, times out per consumer.timeout.ms and ends for good."""

from __future__ import annotations

import threading
import time

import pytest

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.owned import OwnedPartitions
from sluice.pipeline.consumer.stream import (
    ConsumerTimeoutError,
    ConsumerTimeoutException,
    KafkaStream,
    MessageAndMetadata,
)


def message(offset: int, partition: int = 0) -> MessageAndMetadata:
    return MessageAndMetadata("t", partition, offset, None, b"v%d" % offset, None, ())


def stream(owned: OwnedPartitions, timeout_ms: int = -1, capacity: int = 10) -> KafkaStream:
    return KafkaStream("t", 0, owned, consumer_id="c", capacity=capacity, timeout_ms=timeout_ms)


def test_next_skips_stale_messages_and_counts_what_it_returns_as_consumed() -> None:
    owned = OwnedPartitions()
    owned.install({TopicPartition("t", 0): (0, 5)})
    s = stream(owned, timeout_ms=200)
    generation = owned.generation
    assert s.put(generation - 1, message(5), 0.1)  # fetched before the last rebalance
    assert s.put(generation, message(4), 0.1)  # below the start
    assert s.put(generation, message(5), 0.1)
    assert s.put(generation, message(1, partition=1), 0.1)  # not owned
    assert next(s).offset == 5
    with pytest.raises(ConsumerTimeoutError, match=r"KafkaStream\('t', 0, 'c'\) within 200 ms"):
        next(s)
    assert ConsumerTimeoutException is ConsumerTimeoutError  # Kafka 0.8's name
    [(_, consumed)] = owned.consumed().values()
    assert consumed == 6


def test_a_full_queue_refuses_and_clear_empties_it() -> None:
    owned = OwnedPartitions()
    s = stream(owned, capacity=1)
    assert s.put(0, message(0), 0.01)
    assert not s.put(0, message(1), 0.01)
    s.clear()
    assert s.put(0, message(1), 0.01)


def test_end_wakes_a_blocked_reader_and_every_later_call_stops() -> None:
    s = stream(OwnedPartitions())
    results: list[list[MessageAndMetadata]] = []
    reader = threading.Thread(target=lambda: results.append(list(s)))
    reader.start()
    time.sleep(0.1)
    s.end()
    reader.join(5)
    assert results == [[]]
    s.end()  # idempotent
    assert list(s) == [] and list(s) == []
