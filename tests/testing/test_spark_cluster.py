"""``sluice.testing.spark_cluster``: a real standalone cluster — master and workers as separate
JVMs — runs PySpark jobs on every worker, survives an executor killed with -9, loses and gains
workers, hides a private path from the driver, and leaves nothing behind.

One two-worker cluster serves the module (a JVM takes seconds to start); the private-path test
and the failed-start test make their own. Drivers run as their own processes
(``cluster_jobs.py`` says why). Without Java or pyspark the tests skip — under ``CI=true`` they
fail, as they do when ``unshare -m`` is not permitted (root is available in CI).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.ci import in_ci
from sluice.testing.net import wait_until
from sluice.testing.process import ProcessNotReadyError
from sluice.testing.spark_cluster import (
    SparkCluster,
    SparkWorker,
    WorkerSpec,
    private_mounts_missing,
    spark_cluster_missing,
)

pytestmark = pytest.mark.slow

JOBS = Path(__file__).with_name("cluster_jobs.py")
DRIVER_TIMEOUT = 180.0


def _require(missing: str | None) -> None:
    if missing is not None:
        message = f"a Spark standalone cluster cannot run here: {missing}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    _require(spark_cluster_missing())
    with SparkCluster(workers=2, root=tmp_path_factory.mktemp("spark-cluster")) as started:
        yield started


def start_driver(cluster: SparkCluster, log: Path, job: str, *args: str) -> subprocess.Popen[str]:
    """``cluster_jobs.py <job>`` against ``cluster`` in its own process group (so a timeout can
    take its JVM down too); Spark's log goes to ``log``."""
    conf = json.dumps(cluster.application_conf())
    with open(log, "w") as stderr:
        return subprocess.Popen(
            [sys.executable, str(JOBS), job, conf, *args],
            env=cluster.driver_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )


def finish_driver(driver: subprocess.Popen[str], log: Path) -> dict[str, Any]:
    """Wait for the driver (bounded) and return its JSON answer."""
    try:
        out, _ = driver.communicate(timeout=DRIVER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
        pytest.fail(f"the driver did not finish in {DRIVER_TIMEOUT}s:\n{_tail(log)}")
    assert driver.returncode == 0, f"the driver failed ({driver.returncode}):\n{_tail(log)}"
    answer: dict[str, Any] = json.loads(out.splitlines()[-1])
    return answer


def run_driver(cluster: SparkCluster, log: Path, job: str, *args: str) -> dict[str, Any]:
    return finish_driver(start_driver(cluster, log, job, *args), log)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _worker(cluster: SparkCluster, cwd: str) -> SparkWorker:
    worker = cluster.worker_for_path(cwd)
    assert worker is not None, f"{cwd} is under no worker's work dir"
    return worker


def _processes_under(root: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd")) if entry.isdigit() else None
        except OSError:
            continue
        if cwd is not None and cwd.is_relative_to(root.resolve()):
            found.append(int(entry))
    return found


def test_a_failed_start_leaves_no_process_and_no_folder(tmp_path: Path) -> None:
    _require(spark_cluster_missing())
    # No JVM is up within half a second: the master is killed and everything removed.
    with pytest.raises(ProcessNotReadyError, match="spark master"):
        SparkCluster(workers=1, root=tmp_path, start_timeout=0.5).start()
    assert list(tmp_path.iterdir()) == []
    assert _processes_under(tmp_path) == []


def test_a_private_path_is_invisible_across_the_worker_boundary(tmp_path: Path) -> None:
    _require(spark_cluster_missing())
    missing = private_mounts_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"a worker's private mount namespace is needed: {missing}", pytrace=False)
        pytest.skip(missing)
    warehouse, shared = tmp_path / "warehouse", tmp_path / "shared"
    warehouse.mkdir()
    shared.mkdir()
    (warehouse / "from-driver.txt").write_text("driver")
    spec = WorkerSpec(private_paths=(warehouse,))
    with SparkCluster([spec], root=tmp_path / "cluster") as private_cluster:
        answer = run_driver(
            private_cluster, tmp_path / "driver.log", "write", str(warehouse), str(shared)
        )
        # The only worker ran the task: its executor is the one in the private namespace.
        assert _worker(private_cluster, answer["cwd"]) is private_cluster.workers[0]
    assert answer["listed"] == [], "the executor saw the driver's files under the private path"
    assert answer["read_back"] == "private"
    assert not (warehouse / "from-executor.txt").exists()
    assert (warehouse / "from-driver.txt").read_text() == "driver"
    assert (shared / "from-executor.txt").read_text() == "shared"
    assert not (tmp_path / "cluster").exists() or list((tmp_path / "cluster").iterdir()) == []


def test_a_job_runs_tasks_on_both_workers(cluster: SparkCluster, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    answer = run_driver(cluster, tmp_path / "driver.log", "tasks", "4", "1", str(markers))
    results = answer["results"]
    assert sorted(r["partition"] for r in results) == [0, 1, 2, 3]
    assert {_worker(cluster, r["cwd"]).index for r in results} == {0, 1}
    # The application is gone with its driver: its executors exit.
    wait_until(lambda: not cluster.executors(answer["app_id"]), 60, "the executors to exit")


def test_a_job_completes_after_an_executor_is_killed_mid_job(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    log = tmp_path / "driver.log"
    driver = start_driver(cluster, log, "tasks", "6", "3", str(markers))
    try:

        def running_on_both() -> list[str] | None:
            cwds = [text for m in markers.iterdir() if (text := m.read_text())]
            workers = {worker.index for cwd in cwds if (worker := cluster.worker_for_path(cwd))}
            return cwds if workers == {0, 1} else None

        cwds = wait_until(running_on_both, DRIVER_TIMEOUT, "tasks running on both workers")
        app_id = Path(cwds[0]).parent.name  # <work dir>/<app id>/<executor id>
        [victim, _] = sorted(cluster.executors(app_id), key=lambda e: e.executor_id)
        victim.kill()  # SIGKILL, in the middle of a 3-second task
        wait_until(lambda: not victim.running(), 10, f"executor {victim.pid} to die")
        answer = finish_driver(driver, log)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.communicate()
    results = answer["results"]
    assert answer["app_id"] == app_id
    assert sorted(r["partition"] for r in results) == list(range(6))
    # The killed executor's task failed and ran again (attempt 1) somewhere else.
    assert any(r["attempt"] > 0 for r in results), results


def test_a_killed_worker_drops_out_and_a_new_one_joins(cluster: SparkCluster) -> None:
    first, second = cluster.workers[:2]
    assert first.kill_with_executors() == -signal.SIGKILL  # no application: no executors
    assert cluster.wait_for_alive_workers(1) == [second]
    third = cluster.add_worker()
    assert cluster.wait_for_alive_workers(2) == [second, third]
    assert second.stop() is not None  # SIGTERM: the JVM's shutdown hooks run
    assert cluster.wait_for_alive_workers(1) == [third]
    assert cluster.master_url.startswith("spark://127.0.0.1:")
