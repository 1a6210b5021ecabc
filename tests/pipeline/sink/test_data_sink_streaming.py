"""Tests for sluice.pipeline.sink.data_sink under Structured Streaming: a ``rate-micro-batch``
source into the sluice sink, one checkpoint across restarts.

``rate-micro-batch`` makes batch ``b`` the values ``[50 b, 50 b + 50)`` whenever it runs, so
the output a checkpoint should have produced is known from the batch ids alone. Each
``availableNow`` run of the query is one restart.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from sluice.pipeline.source.data_source import register
from sluice.testing.broker import create_topic
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

ROWS_PER_BATCH = 50


def _run(spark: Any, options: dict[str, str], checkpoint: Path) -> Any:
    register(spark)
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS_PER_BATCH)
        .option("numPartitions", 2)
        .load()
        .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")
        .writeStream.format("sluice")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(StreamingQueryException):  # a failed run: see query.exception()
        query.awaitTermination(180)
    assert not query.isActive, "the availableNow query did not finish"
    return query


def _values(bootstrap: str, topic: str) -> Counter[int]:
    return Counter(int(r.value) for r in read_all(bootstrap, topic) if r.value is not None)


def test_restarts_resume_from_the_checkpoint_and_a_failed_batch_is_rewritten(
    spark: Any, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic_name}
    checkpoint = tmp_path / "checkpoint"

    first = _run(spark, options, checkpoint)
    assert first.exception() is None, first.exception()
    assert first.lastProgress["batchId"] == 0
    assert _values(bootstrap, topic_name) == Counter(range(ROWS_PER_BATCH))

    # The next batch cannot be delivered (no such topic on this broker): its tasks fail, the
    # batch is not committed, and nothing of it is in the real topic.
    failing = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": f"{topic_name}-absent",
        "kafka.message.timeout.ms": "2000",
    }
    failed = _run(spark, failing, checkpoint)
    assert failed.exception() is not None
    assert "DeliveryFailedError" in str(failed.exception())

    # Restarted: batch 1 again (uncommitted), then on from the checkpoint, never from 0.
    second = _run(spark, options, checkpoint)
    assert second.exception() is None, second.exception()
    third = _run(spark, options, checkpoint)
    assert third.exception() is None, third.exception()
    last = third.lastProgress["batchId"]
    assert last > second.lastProgress["batchId"] >= 1
    got = _values(bootstrap, topic_name)
    assert set(got) == set(range(ROWS_PER_BATCH * (last + 1))), "a row of a batch is missing"
    # At-least-once; here without a partial batch nothing was written twice.
    assert max(got.values()) == 1
