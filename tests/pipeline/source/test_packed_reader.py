"""Tests for sluice.pipeline.source.packed_reader: many small splits of many topics read at
once by one consumer against a real broker — every record of every split once, in its split,
in offset order; two pieces of one partition in one task read in turn."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.pipeline.source.packed_reader import read_splits
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult, consumer_config
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import produce, simple_records

pytestmark = pytest.mark.broker


def test_many_splits_at_once_each_record_in_its_split(kafka_broker: Any, topic_name: str) -> None:
    topics = [f"{topic_name}_{i}" for i in range(3)]
    produced = []
    for topic in topics:
        create_topic(kafka_broker.bootstrap, topic, 3)
        produced += produce(kafka_broker.bootstrap, simple_records(topic, 3, 90))
    # 30 records per partition; partition 0 of the first topic in two pieces, the rest whole
    # but for their last 5 offsets (a range that ends below the log end).
    splits = [OffsetRange(topics[0], 0, 0, 12), OffsetRange(topics[0], 0, 12, 30)]
    splits += [
        OffsetRange(t, p, 0, 25) for t in topics for p in range(3) if (t, p) != (topics[0], 0)
    ]
    results = [SplitResult(s) for s in splits]
    seen: dict[int, list[int]] = {}
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    for index, batch in read_splits(splits, config, results, batch_rows=7, poll_timeout_s=30):
        split = splits[index]
        assert set(batch.column("topic").to_pylist()) == {split.topic}
        assert set(batch.column("partition").to_pylist()) == {split.partition}
        seen.setdefault(index, []).extend(batch.column("offset").to_pylist())
    for index, split in enumerate(splits):
        assert seen[index] == list(range(split.start, split.end)), split
        assert results[index].rows == split.count
    assert len(produced) == 270
