"""One SparkSession (local[2]) for the whole pipeline test session.

Spark starts once (a JVM takes seconds) and stops at the end of the session. Under ``CI=true`` a
Spark that cannot start fails the tests that need it; elsewhere they are skipped with the
reason. Workers run this interpreter (``PYSPARK_PYTHON``), so they see the venv's packages.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.testing.ci import in_ci

# Session fixtures shared by every module here: defined once, so one broker and one registry
# serve the whole session (a fixture imported into several modules would start one each).
from tests.pipeline.audit_helpers import registry_url  # noqa: F401
from tests.pipeline.broker_fixture import kafka_broker, topic_name  # noqa: F401


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    try:
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("sluice-pipeline-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.memory", "512m")
            .config("spark.executor.memory", "512m")
            .config("spark.sql.session.timeZone", "UTC")
            # A short-lived test JVM: the C1 compiler alone warms up faster, serial GC is lean.
            .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
            .getOrCreate()
        )
    except Exception as exc:  # the JVM is missing, too old, or will not start
        message = f"Spark (local[2]) could not start: {type(exc).__name__}: {exc}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        # py4j closes leftover gateway connections from __del__ at interpreter exit, logging at
        # INFO after pytest has closed the streams ("--- Logging error ---"): not worth a line.
        logging.getLogger("py4j").setLevel(logging.WARNING)
