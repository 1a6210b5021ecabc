"""bench.peers.kafka's consumer settings against a real Sluice broker (the one the benchmark
starts): what librdkafka does with them, read from its own debug log."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.bench_broker import start_broker
from bench.peers import Sampler
from bench.peers.kafka import CONSUMER, QUEUE_BACKOFF_MS, KafkaDriver

BACKOFF = re.compile(r"Fetch backoff for (\d+)ms: Local: Queue full")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_full_prefetch_queue_postpones_the_next_fetch_by_the_benchmarks_backoff(
    tmp_path: Path,
) -> None:
    """The read's consumer, its prefetch queue full, waits ``QUEUE_BACKOFF_MS`` before fetching
    again — not librdkafka's default second, which left the benchmark's consumer idle (see the
    module docstring of ``bench.peers.kafka``)."""
    broker = start_broker(tmp_path)
    try:
        driver = KafkaDriver("sluice", broker.bootstrap)
        driver.produce("backoff", 3_000, "default batching", Sampler())
        logger = logging.getLogger(f"{__name__}.librdkafka")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        lines = _Lines()
        logger.addHandler(lines)
        # The benchmark's settings, with a queue threshold a 3,000-message topic exceeds.
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": "backoff", **CONSUMER,
            "queued.min.messages": 1_000, "debug": "fetch", "logger": logger,
        })  # fmt: skip
        try:
            consumer.assign([TopicPartition("backoff", 0, 0)])
            # One message at a time (consume also serves the log): the queue stays full.
            deadline = time.monotonic() + 30
            while not any(BACKOFF.search(line) for line in lines.lines):
                assert time.monotonic() < deadline, "the prefetch queue never filled in 30 s"
                consumer.consume(1, timeout=0.1)
        finally:
            consumer.close()
            logger.removeHandler(lines)
        waits = {int(m.group(1)) for line in lines.lines if (m := BACKOFF.search(line))}
        assert waits == {QUEUE_BACKOFF_MS}, f"expected {QUEUE_BACKOFF_MS} ms, found {waits}"
        assert QUEUE_BACKOFF_MS <= 10  # well under the ~0.2 s the queue takes to drain
    finally:
        broker.stop()
