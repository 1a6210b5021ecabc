"""Tests for sluice.pipeline.source.split_reader: the executor-side reader alone (no Spark),
against a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import (
    ARROW_SCHEMA,
    DataLossError,
    SplitResult,
    consumer_config,
    read_split,
)
from tests.pipeline.broker_fixture import create_topic, produce, simple_records

pytestmark = pytest.mark.broker


def test_reader_bounds_a_range_inside_compressed_batches(
    kafka_broker: Any, topic_name: str
) -> None:
    """Big lz4 batches: a range that starts and ends mid-batch gets exactly its offsets;
    the records of the fetched batch past ``end`` are dropped."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(
        kafka_broker.bootstrap,
        simple_records(topic_name, 1, 500),
        compression="lz4",
        linger_ms=50,
        batch_size=1_000_000,
    )
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    for start, end in ((13, 27), (0, 1), (499, 500), (250, 500), (100, 100)):
        result = SplitResult()
        batches = list(
            read_split(OffsetRange(topic_name, 0, start, end), config, batch_rows=7, result=result)
        )
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        assert offsets == list(range(start, end))
        assert result.rows == end - start
        assert all(b.num_rows <= 7 and b.schema.equals(ARROW_SCHEMA) for b in batches)


def test_reader_detects_offsets_that_are_gone(kafka_broker: Any, topic_name: str) -> None:
    """A split planned past what the log holds (truncation/recreation) is data loss: the
    reader fails by default and stops at the log end otherwise."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 10))
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    split = OffsetRange(topic_name, 0, 5, 30)
    with pytest.raises(DataLossError, match=rf"{topic_name}-0: expected offsets \[10, 30\)"):
        list(read_split(split, config, poll_timeout_s=20))
    result = SplitResult()
    batches = list(
        read_split(split, config, fail_on_data_loss=False, poll_timeout_s=20, result=result)
    )
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(5, 10))
    assert result.lost == 20
