"""Tests for sluice.pipeline.sink.write_task: one task's records against a real broker, without
Spark — every delivery report checked, a failed delivery fails the task."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sluice.pipeline.sink.columns import SinkColumns
from sluice.pipeline.sink.options import SinkOptions
from sluice.pipeline.sink.write_task import (
    DeliveryFailedError,
    KafkaWriteTask,
    NullHeaderKeyError,
    NullTopicError,
)
from sluice.testing.broker import create_topic
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _task(bootstrap: str, columns: SinkColumns, **options: str) -> KafkaWriteTask:
    parsed = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, **options})
    return KafkaWriteTask(parsed, columns)


def test_strings_topic_column_headers_and_timestamps(kafka_broker: Any, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": [topic_name] * 3,
            "key": ["a", None, "c"],
            "value": ["x", "y", None],
            "partition": pa.array([1, 0, 1], pa.int32()),
            "headers": pa.array([[{"key": "h", "value": b"1"}], None, []], HEADERS),
            "timestamp": pa.array([1_700_000_000_123_456, None, 5_000], pa.timestamp("us", "UTC")),
        }
    )
    columns = SinkColumns("string", "string", True, True, True, "timestamp")
    message = _task(kafka_broker.bootstrap, columns).run([batch])
    assert message.records == 3
    assert message.offsets == {f"{topic_name}-0": (0, 0), f"{topic_name}-1": (0, 1)}
    got = [(r.partition, r.offset, r.key, r.value, r.headers) for r in read_all(
        kafka_broker.bootstrap, topic_name)]  # fmt: skip
    assert got == [
        (0, 0, None, b"y", ()),
        (1, 0, b"a", b"x", (("h", b"1"),)),
        (1, 1, b"c", None, ()),
    ]
    stamps = {r.value: r.timestamp for r in read_all(kafka_broker.bootstrap, topic_name)}
    assert stamps[b"x"] == 1_700_000_000_123 and stamps[None] == 5


def test_a_partition_the_topic_lacks_fails_the_task(kafka_broker: Any, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    batch = pa.RecordBatch.from_pydict(
        {"value": [b"ok", b"lost"], "partition": pa.array([0, 5], pa.int32())}
    )
    task = _task(
        kafka_broker.bootstrap,
        SinkColumns("binary", None, False, True, False, None),
        topic=topic_name,
        **{"kafka.message.timeout.ms": "3000"},
    )
    with pytest.raises(DeliveryFailedError, match=f"{topic_name} partition 5: expected the broker"):
        task.run([batch])


def test_a_topic_the_broker_lacks_fails_the_task(kafka_broker: Any, topic_name: str) -> None:
    """The session broker does not create topics on demand: nothing acknowledges the record."""
    batch = pa.RecordBatch.from_pydict({"value": [b"v"]})
    task = _task(
        kafka_broker.bootstrap,
        SinkColumns("binary", None, False, False, False, None),
        topic=f"{topic_name}-absent",
        **{"kafka.message.timeout.ms": "2000"},
    )
    with pytest.raises(DeliveryFailedError, match="expected the broker to acknowledge"):
        task.run([batch])


def test_null_topic_and_null_header_key(kafka_broker: Any, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    columns = SinkColumns("binary", None, True, False, True, None)
    nulls = pa.RecordBatch.from_pydict(
        {
            "value": [b"v"],
            "topic": pa.array([None], pa.string()),
            "headers": pa.array([None], HEADERS),
        }
    )
    with pytest.raises(NullTopicError, match="null topic present in the data"):
        _task(kafka_broker.bootstrap, columns).run([nulls])
    bad_header = pa.RecordBatch.from_pydict(
        {
            "value": [b"v"],
            "topic": [topic_name],
            "headers": pa.array([[{"key": None, "value": b"x"}]], HEADERS),
        }
    )
    with pytest.raises(NullHeaderKeyError, match="expected every header to have a string key"):
        _task(kafka_broker.bootstrap, columns).run([bad_header])
    assert read_all(kafka_broker.bootstrap, topic_name) == []
