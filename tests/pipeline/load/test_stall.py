"""The load's deadline for progress (``stallTimeoutMs``): kill -9 of the broker mid-read.

A broker of its own (the session broker must live), a load as its own process, the broker
killed once the read+write phase has begun. The load must exit 3 within twice the deadline,
name the broker's address, publish nothing and print fewer than 20 lines; after the broker
returns, a rerun lands every record exactly once.

The deadline is 12 s here, not the 60 s of the issue's acceptance run: the mechanism is the
same (the driver sees no split finish for ``stallTimeoutMs``, asks the brokers, cancels the job
group), and a 60 s deadline would make this one test take three minutes on a shared 2-core
machine. ``kafkaConsumer.pollTimeoutMs`` stays at its default (120 s), so it is the load's
deadline, not a split's, that ends the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sluice.pipeline.table.commit import published_runs
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import SluiceBroker, produce, simple_records
from tests.pipeline.load.test_run import REPO, _assert_exactly_once

pytestmark = [pytest.mark.broker, pytest.mark.slow]

STALL_MS = 12_000


def _start_load(config: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("SLUICE_CRASH_AT", None)
    java = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    return subprocess.Popen(
        [sys.executable, "-m", "sluice.jobs.nightly_load", "--config", str(config),
         "--override", f"spark.driver.extraJavaOptions={java}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def test_a_broker_killed_mid_load_ends_it_within_the_deadline(tmp_path: Path) -> None:
    broker = SluiceBroker(tmp_path / "broker", {"num.partitions": "1"}).start()
    try:
        topic = "stalled"
        create_topic(broker.bootstrap, topic, 2)
        produced = produce(broker.bootstrap, simple_records(topic, 2, 6000))
        warehouse = tmp_path / "warehouse"
        config = tmp_path / "load.properties"
        config.write_text(
            f"kafka.bootstrap.servers={broker.bootstrap}\ntopics={topic}\n"
            f"warehouse.path={warehouse}\nmaxRecordsPerPartition=40\n"
            f"stallTimeoutMs={STALL_MS}\nspark.master=local[2]\n"
        )

        proc = _start_load(config)
        lines: list[str] = []
        killed_at: list[float] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if "read+write ..." in line and not killed_at:
                    time.sleep(1.0)  # a few splits done, most still to read
                    broker.kill()
                    killed_at.append(time.monotonic())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        ended = time.monotonic()
        reader.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
        output = "\n".join(lines)
        assert killed_at, f"the load never reached read+write:\n{output}"
        assert code == 3, output
        assert ended - killed_at[0] <= 2 * STALL_MS / 1000, (ended - killed_at[0], output)
        assert broker.bootstrap in lines[-1] and "stallTimeoutMs" in lines[-1], output
        assert "waiting splits: stalled-" in lines[-1], output
        assert len(lines) < 20, output
        assert published_runs(f"file://{warehouse}/events") == []

        broker.start()
        rerun = subprocess.run(
            [sys.executable, "-m", "sluice.jobs.nightly_load", "--config", str(config)],
            cwd=REPO, capture_output=True, text=True, timeout=240,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        _assert_exactly_once(warehouse, produced)
    finally:
        broker.stop()
