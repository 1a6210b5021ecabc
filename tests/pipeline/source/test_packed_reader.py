"""Tests for sluice.pipeline.source.packed_reader: many small splits of many topics read at
once by one consumer against a real broker — every record of every split once, in its split,
in offset order; two pieces of one partition in one task read in turn."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.pipeline.source.packed_reader import _runs, read_splits
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult, consumer_config, read_split
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


@pytest.mark.parametrize("batch_rows", [10, 1000])
def test_small_splits_are_built_together_with_each_split_s_figures(
    kafka_broker: Any, topic_name: str, batch_rows: int
) -> None:
    """Tails of several splits (of one topic with 10 rows a batch; of both topics with 1000)
    come out of one batch (a slice each): the same rows, columns and bytes as ``read_split``
    gives each split alone — null keys and headers on some records included."""
    topics = [f"{topic_name}_{i}" for i in range(2)]
    for topic in topics:
        create_topic(kafka_broker.bootstrap, topic, 4)
        records = simple_records(topic, 4, 80)
        for i, record in enumerate(records):
            if i % 3 == 0:
                record["key"] = None
            if i % 5 == 0:
                record["headers"] = [("h", f"v{i}".encode()), ("empty", None)]
        produce(kafka_broker.bootstrap, records)
    splits = [OffsetRange(t, p, 2, 19) for t in topics for p in range(4)]
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    results = [SplitResult(s) for s in splits]
    packed: dict[int, list[Any]] = {}
    for index, batch in read_splits(
        splits, config, results, batch_rows=batch_rows, poll_timeout_s=30
    ):
        packed.setdefault(index, []).append(batch)
    for index, split in enumerate(splits):
        alone = SplitResult(split)
        batches = list(
            read_split(split, config, batch_rows=batch_rows, poll_timeout_s=30, result=alone)
        )
        assert [b.to_pylist() for b in packed[index]] == [b.to_pylist() for b in batches], split
        assert (results[index].rows, results[index].bytes) == (alone.rows, alone.bytes), split
        assert alone.rows == 17 and alone.bytes > 0


class _Message:
    """What ``_runs`` reads of a confluent-kafka ``Message``: topic, partition, error."""

    def __init__(self, topic: str | None, partition: int | None, error: object = None) -> None:
        self._topic, self._partition, self._error = topic, partition, error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def error(self) -> object:
        return self._error


def _model_runs(messages: list[_Message]) -> list[tuple[int, int, bool]]:
    """The runs as one key per message grouped by a plain loop."""
    runs: list[tuple[int, int, bool]] = []
    previous = None
    for index, m in enumerate(messages):
        key = (m.topic(), m.partition(), m.error() is None)
        if key != previous:
            runs.append((index, index + 1, key[2]))
        else:
            start, _, clean = runs[-1]
            runs[-1] = (start, index + 1, clean)
        previous = key
    return runs


@pytest.mark.parametrize("seed", range(20))
def test_runs_cut_where_the_topic_partition_or_kind_changes(seed: int) -> None:
    import random

    rng = random.Random(seed)
    eof = object()
    messages = []
    for _ in range(rng.randrange(0, 60)):
        topic = rng.choice(["a", "b", None])
        partition = rng.choice([0, 1, None])
        for _ in range(rng.randrange(1, 4)):
            messages.append(_Message(topic, partition, eof if rng.random() < 0.2 else None))
    runs = list(_runs(messages))
    assert runs == _model_runs(messages)
    assert [i for start, stop, _ in runs for i in range(start, stop)] == list(range(len(messages)))
