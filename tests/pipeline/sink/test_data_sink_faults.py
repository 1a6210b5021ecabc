"""Tests for sluice.pipeline.sink.data_sink with a broker killed mid-write (SIGKILL): a
delivery failure fails the task, never drops a record, and the retry writes everything.

Each test has its own broker (``SluiceBroker``), not the session's. The write is slowed by a
UDF, and held back after each partition's first ``HELD_AFTER`` rows until the kill has
happened, so the kill always lands while the tasks are producing.

The session's Spark is ``local[2]``, which never retries a failed task (local mode sets
``spark.task.maxFailures`` to 1 unless the master says ``local[N,F]``), and one process has
one SparkContext. So Spark's own task retry is tested in a child process, this module run as
``python -m`` with a ``local[2,4]`` session of its own (``_retried_write_job``): the test kills
the broker mid-write, the task attempts fail on their delivery reports, and only once a retry
attempt has started (its UDF drops a file and waits) does the test restart the broker and let
the retry go on; the job must succeed with every row at least once. The session's Spark is
used for a broker back within ``message.timeout.ms`` (no task fails) and for a broker down
for good (the job fails with the delivery error; a rerun of the job writes everything).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.pipeline.source.data_source import register
from sluice.testing.broker import create_topic
from sluice.testing.cluster import QUIET
from tests.pipeline.broker_fixture import SluiceBroker
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


def _slow_frame(spark: Any, gate: Path | None = None, retry: Path | None = None) -> Any:
    """``ROWS`` rows in two partitions, 2 ms each; with ``gate``, every row after a
    partition's first ``HELD_AFTER`` also waits (up to 60 s) for the file ``gate`` to exist —
    so the kill always lands mid-write, however slowly the killer's thread gets to it. With
    ``retry`` (a directory), a retry attempt of a task (``attemptNumber`` > 0) first creates
    ``retry/retrying``, then waits (up to 120 s) for ``retry/restarted``."""
    from pyspark.sql.functions import udf

    half, pad = ROWS // 2, PAD
    gate_path = None if gate is None else str(gate)
    retry_dir = None if retry is None else str(retry)

    def wait_for(path: str, seconds: float) -> None:
        import os

        deadline = time.monotonic() + seconds
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)

    def slow(i: int) -> str:  # nested: pickled by value for the workers
        import os

        from pyspark import TaskContext

        time.sleep(0.002)
        context = TaskContext.get()
        if retry_dir is not None and context is not None and context.attemptNumber() > 0:
            restarted = os.path.join(retry_dir, "restarted")
            if not os.path.exists(restarted):
                open(os.path.join(retry_dir, "retrying"), "a").close()
                wait_for(restarted, 120)
        if gate_path is not None and i % half >= HELD_AFTER:
            wait_for(gate_path, 60)
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
    register(spark)
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
    register(spark)
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


# -- Spark's own task retry, in a child process with local[2,4] --------------------------------

REPO = Path(__file__).resolve().parents[3]
JOB_TIMEOUT_S = 240.0


def _retried_write_job(bootstrap: str, topic: str, gates: Path) -> None:
    """The child: a ``local[2,4]`` session (a failed task is tried up to 4 times) writes
    ``_slow_frame`` to ``topic``, held at ``gates/killed`` and, on a retry attempt, at
    ``gates/restarted``; a failed write raises (the child exits non-zero)."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("sluice-sink-task-retry")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")  # see small_batches
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")  # TaskSetManager's "Lost task" lines, for the test
    try:
        register(spark)
        options = {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "kafka.message.timeout.ms": "3000",  # a dead broker fails an attempt within 3 s
        }
        frame = _slow_frame(spark, gates / "killed", retry=gates)
        frame.write.format("sluice").options(**options).mode("append").save()
    finally:
        spark.stop()


def _wait(
    condition: Callable[[], bool], job: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    """Until ``condition()`` holds; fails the test if the job exits first or after 120 s."""
    deadline = time.monotonic() + 120
    while not condition():
        if job.poll() is not None:
            pytest.fail(f"the job exited ({job.returncode}) before {what}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within 120 s:\n{_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def _has_records(bootstrap: str, topic: str) -> bool:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink", **QUIET})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] > 0
    finally:
        consumer.close()


def test_spark_retries_the_failed_task_once_the_broker_is_back(
    broker: SluiceBroker, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    gates = tmp_path / "gates"
    gates.mkdir()
    log = tmp_path / "job.log"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [sys.executable, "-m", __name__, broker.bootstrap, topic_name, str(gates)]
    with log.open("wb") as out:
        job = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: _has_records(broker.bootstrap, topic_name), job, "a record arrived", log)
        broker.kill()
        (gates / "killed").touch()
        # A retry attempt exists only once an attempt failed: the broker comes back after that.
        _wait((gates / "retrying").exists, job, "retry attempt of a failed task", log)
        broker.start()
        (gates / "restarted").touch()
        code = job.wait(JOB_TIMEOUT_S)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(30)
    output = _tail(log)
    assert code == 0, f"the job failed although Spark could retry its tasks:\n{output}"
    full = log.read_text(errors="replace")
    assert "Lost task" in full, f"no task attempt failed:\n{output}"
    assert "DeliveryFailedError" in full or "UndeliveredRecordsError" in full, output
    got = _every_row_at_least_once(broker.bootstrap, topic_name)
    assert sum(got.values()) >= ROWS


if __name__ == "__main__":  # the child of the test above
    _retried_write_job(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
