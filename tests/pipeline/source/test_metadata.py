"""Tests for sluice.pipeline.source.metadata: the driver's log bounds against a real broker with
transactions — the log end is the last stable offset under read_committed (the default)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.options import Subscribe
from sluice.pipeline.source.ranges import LogBounds
from sluice.pipeline.source.split_reader import consumer_config
from tests.pipeline.source.transactional import write_mixed_log

pytestmark = pytest.mark.broker


def test_log_ends_are_the_lso_under_read_committed_and_the_high_watermark_otherwise(
    kafka_broker: Any, topic_name: str
) -> None:
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        assert log.lso < log.high_watermark  # o0's transaction is open
        tp = TopicPartition(topic_name, 0)
        options = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
        with KafkaMetadata(consumer_config(options)) as metadata:  # the load plans this way
            assert metadata.bounds([tp]) == {tp: LogBounds(0, log.lso)}
            assigned, bounds = metadata.assigned_bounds(Subscribe([topic_name]))
            assert assigned == [tp] and bounds == {tp: LogBounds(0, log.lso)}
        uncommitted = consumer_config({**options, "kafka.isolation.level": "read_uncommitted"})
        with KafkaMetadata(uncommitted) as metadata:
            assert metadata.bounds([tp]) == {tp: LogBounds(0, log.high_watermark)}
        log.commit_open()
        # Its marker (written a moment after the commit returns) moves the LSO past c4 too.
        deadline = time.monotonic() + 10
        with KafkaMetadata(consumer_config(options)) as metadata:
            while (end := metadata.bounds([tp])[tp].log_end) == log.lso:
                assert time.monotonic() < deadline, "the LSO did not move after the commit"
                time.sleep(0.1)
        assert end == log.high_watermark + 1
    finally:
        log.close()
