"""PySpark drivers for ``test_spark_cluster``, each run as its own process:
``python cluster_jobs.py <job> <conf-json> <args…>`` prints one JSON line to stdout.

Why a process of its own and not the test process: a Python process holds at most one
SparkContext, and ``SparkSession.builder.getOrCreate()`` quietly returns any session already
running there — in a whole-suite run, the pipeline tests' ``local[2]`` session — so a job meant
for the cluster would run in local mode. The jobs' functions are defined here, in ``__main__``,
so cloudpickle ships them by value: executors need nothing of the repository.

Jobs:

* ``tasks <partitions> <seconds> <markers>``: one task per partition; each writes a marker file
  ``<markers>/<partition>-<attempt>`` holding its working directory (the executor's folder
  under its worker's work dir), sleeps, and returns partition, attempt and directory.
* ``write <private> <shared>``: one task lists ``<private>``, writes ``from-executor.txt`` into
  both folders, reads its private file back, and returns what it saw.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _session(conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("sluice-spark-cluster-test")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def tasks(conf: dict[str, str], partitions: int, seconds: float, markers: str) -> dict[str, Any]:
    def task(partition: int) -> dict[str, Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else -1
        marker = Path(markers) / f"{partition}-{attempt}"
        marker.write_text(os.getcwd())
        time.sleep(seconds)
        return {"partition": partition, "attempt": attempt, "cwd": os.getcwd()}

    session = _session(conf)
    try:
        context = session.sparkContext
        results = context.parallelize(range(partitions), partitions).map(task).collect()
        return {"app_id": context.applicationId, "results": results}
    finally:
        session.stop()


def write(conf: dict[str, str], private: str, shared: str) -> dict[str, Any]:
    def task(_: int) -> dict[str, Any]:
        before = sorted(os.listdir(private))
        Path(private, "from-executor.txt").write_text("private")
        Path(shared, "from-executor.txt").write_text("shared")
        return {
            "cwd": os.getcwd(),
            "listed": before,
            "read_back": Path(private, "from-executor.txt").read_text(),
        }

    session = _session(conf)
    try:
        context = session.sparkContext
        [result] = context.parallelize([0], 1).map(task).collect()
        return {"app_id": context.applicationId, **result}
    finally:
        session.stop()


def main(argv: list[str]) -> None:
    job, conf, *args = argv
    settings: dict[str, str] = json.loads(conf)
    if job == "tasks":
        answer = tasks(settings, int(args[0]), float(args[1]), args[2])
    elif job == "write":
        answer = write(settings, args[0], args[1])
    else:
        raise SystemExit(f"unknown job {job!r}: expected 'tasks' or 'write'")
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
