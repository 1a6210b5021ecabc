"""Tests for sluice.pipeline.sink.data_sink with a broker killed mid-write (SIGKILL): a
delivery failure fails the task, never drops a record, and a rerun writes everything.

Each test has its own broker (``SluiceBroker``), not the session's. The write is slowed by a
UDF so the kill lands while the tasks are producing. The session's Spark is ``local[2]``,
which does not retry a failed task (``spark.task.maxFailures`` is 1 in local mode), so "the
retry" here is the rerun of the job: every task runs again, as a task retry would.
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


def _slow_frame(spark: Any) -> Any:
    from pyspark.sql.functions import udf

    def slow(i: int) -> str:  # nested: pickled by value for the workers
        time.sleep(0.002)
        return f"v{i}"

    return spark.range(0, ROWS, numPartitions=2).select(
        udf(slow, "string", useArrow=False)("id").alias("value")
    )


def _kill_when_records_arrive(
    broker: SluiceBroker, topic: str, *, restart: bool
) -> tuple[threading.Thread, list[str]]:
    """A thread that SIGKILLs ``broker`` once ``topic`` has a record (and with ``restart``
    starts it again); its list says what it did, or why it did not."""
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
                return
        finally:
            consumer.close()
        broker.kill()
        done.append(f"killed after {high} records")
        if restart:
            broker.start()
            done.append("restarted")

    # The write stays on the test's thread: a data source registered in the session is
    # found from the thread that registered it.
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread, done


def _every_row_at_least_once(bootstrap: str, topic: str) -> Counter[bytes]:
    got = Counter(r.value for r in read_all(bootstrap, topic) if r.value is not None)
    missing = {f"v{i}".encode() for i in range(ROWS)} - set(got)
    assert not missing, f"{len(missing)} rows lost, e.g. {sorted(missing)[:5]}"
    return got


def test_a_broker_back_within_the_timeout_loses_nothing(
    spark: Any, small_batches: None, broker: SluiceBroker, topic_name: str
) -> None:
    register_sink(spark)
    create_topic(broker.bootstrap, topic_name, 1)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic_name}
    killer, done = _kill_when_records_arrive(broker, topic_name, restart=True)
    _slow_frame(spark).write.format("sluice").options(**options).mode("append").save()
    killer.join(60)
    assert done[-1] == "restarted", done
    assert int(done[0].split()[2]) < ROWS, f"the kill came after the write: {done}"
    _every_row_at_least_once(broker.bootstrap, topic_name)


def test_a_broker_down_too_long_fails_the_task_and_the_rerun_writes_everything(
    spark: Any, small_batches: None, broker: SluiceBroker, topic_name: str
) -> None:
    register_sink(spark)
    create_topic(broker.bootstrap, topic_name, 1)
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": topic_name,
        "kafka.message.timeout.ms": "3000",
    }
    killer, done = _kill_when_records_arrive(broker, topic_name, restart=False)
    with pytest.raises(Exception, match="DeliveryFailedError|UndeliveredRecordsError"):
        _slow_frame(spark).write.format("sluice").options(**options).mode("append").save()
    killer.join(60)
    assert done and done[0].startswith("killed"), done

    broker.start()
    _slow_frame(spark).write.format("sluice").options(**options).mode("append").save()
    got = _every_row_at_least_once(broker.bootstrap, topic_name)
    assert sum(got.values()) >= ROWS
