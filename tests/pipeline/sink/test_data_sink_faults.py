"""Tests for sluice.pipeline.sink.data_sink with a broker killed mid-write (SIGKILL): a
delivery failure fails the task, never drops a record, and a rerun writes everything.

Each test has its own broker (``SluiceBroker``), not the session's. The write is slowed by a
UDF, and held back after each partition's first ``HELD_AFTER`` rows until the kill has
happened, so the kill always lands while the tasks are producing. The session's Spark is
``local[2]``, which does not retry a failed task (``spark.task.maxFailures`` is 1 in local
mode), so "the retry" here is the rerun of the job: every task runs again, as a task retry
would.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.testing.broker import create_topic
from sluice.testing.cluster import QUIET
from tests.pipeline.broker_fixture import SluiceBroker
from tests.pipeline.sink.sink_format import register_sink
from tests.pipeline.topic_reader import read_all

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROWS = 3000
# Rows of each partition written before the rest waits for the kill: enough to pass Spark's
# Python-UDF and Arrow buffering, so that the first records do reach the broker.
HELD_AFTER = 1000
# Each value is padded so that the UDF worker's 64 KiB output buffer fills (and is flushed to
# the sink) well before a partition's held-back rows: "v<i>:xxx…".
PAD = "x" * 200


@pytest.fixture
def small_batches(spark: Any) -> Iterator[None]:
    """Arrow batches of 100 rows into the writer (Spark's default, 10,000, would hand a task
    its whole partition at once, after the slow UDF ran on all of it)."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "100")
    try:
        yield
    finally:
        spark.conf.set(key, before)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SluiceBroker]:
    process = SluiceBroker(tmp_path / "broker", {"num.partitions": "1"})
    process.start()
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def _slow_frame(spark: Any, gate: Path | None = None) -> Any:
    """``ROWS`` rows in two partitions, 2 ms each; with ``gate``, every row after a
    partition's first ``HELD_AFTER`` also waits (up to 60 s) for the file ``gate`` to exist —
    so the kill always lands mid-write, however slowly the killer's thread gets to it."""
    from pyspark.sql.functions import udf

    half, pad = ROWS // 2, PAD
    gate_path = None if gate is None else str(gate)

    def slow(i: int) -> str:  # nested: pickled by value for the workers
        import os

        time.sleep(0.002)
        if gate_path is not None and i % half >= HELD_AFTER:
            deadline = time.monotonic() + 60
            while not os.path.exists(gate_path) and time.monotonic() < deadline:
                time.sleep(0.01)
        return f"v{i}:{pad}"

    return spark.range(0, ROWS, numPartitions=2).select(
        udf(slow, "string", useArrow=False)("id").alias("value")
    )


def _kill_when_records_arrive(
    broker: SluiceBroker, topic: str, gate: Path, *, restart: bool
) -> tuple[threading.Thread, list[str]]:
    """A thread that SIGKILLs ``broker`` once ``topic`` has a record (and with ``restart``
    starts it again), then opens ``gate`` for the held-back rows; its list says what it did,
    or why it did not."""
    done: list[str] = []

    def kill() -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sink", **QUIET})
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
                if high > 0:
                    break
                time.sleep(0.05)
            else:
                done.append("no record arrived within 60 s")
                gate.touch()
                return
        finally:
            consumer.close()
        try:
            broker.kill()
            done.append(f"killed after {high} records")
            if restart:
                broker.start()
                done.append("restarted")
        finally:
            gate.touch()

    # The write stays on the test's thread: a data source registered in the session is
    # found from the thread that registered it.
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread, done


def _every_row_at_least_once(bootstrap: str, topic: str) -> Counter[bytes]:
    got = Counter(r.value for r in read_all(bootstrap, topic) if r.value is not None)
    missing = {f"v{i}:{PAD}".encode() for i in range(ROWS)} - set(got)
    assert not missing, f"{len(missing)} rows lost, e.g. {sorted(missing)[:5]}"
    return got


def test_a_broker_back_within_the_timeout_loses_nothing(
    spark: Any, small_batches: None, broker: SluiceBroker, topic_name: str, tmp_path: Path
) -> None:
    register_sink(spark)
    create_topic(broker.bootstrap, topic_name, 1)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic_name}
    gate = tmp_path / "killed"
    killer, done = _kill_when_records_arrive(broker, topic_name, gate, restart=True)
    _slow_frame(spark, gate).write.format("sluice").options(**options).mode("append").save()
    killer.join(60)
    assert done[-1] == "restarted", done
    assert int(done[0].split()[2]) < ROWS, f"the kill came after the write: {done}"
    _every_row_at_least_once(broker.bootstrap, topic_name)


def test_a_broker_down_too_long_fails_the_task_and_the_rerun_writes_everything(
    spark: Any, small_batches: None, broker: SluiceBroker, topic_name: str, tmp_path: Path
) -> None:
    register_sink(spark)
    create_topic(broker.bootstrap, topic_name, 1)
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": topic_name,
        "kafka.message.timeout.ms": "3000",
    }
    gate = tmp_path / "killed"
    killer, done = _kill_when_records_arrive(broker, topic_name, gate, restart=False)
    with pytest.raises(Exception, match="DeliveryFailedError|UndeliveredRecordsError"):
        _slow_frame(spark, gate).write.format("sluice").options(**options).mode("append").save()
    killer.join(60)
    assert done and done[0].startswith("killed"), done

    broker.start()
    _slow_frame(spark).write.format("sluice").options(**options).mode("append").save()
    got = _every_row_at_least_once(broker.bootstrap, topic_name)
    assert sum(got.values()) >= ROWS
