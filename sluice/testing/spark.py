"""``spark_submit``: a PySpark application run the way it is deployed — ``spark-submit`` from
this interpreter's environment, ``--master local[2]`` — with its own output shown and Spark's
log noise left out.

The command line::

    <venv>/bin/spark-submit --master local[2] \
        --driver-java-options "-XX:+UseSerialGC -XX:TieredStopAtLevel=1" \
        --conf spark.ui.enabled=false --conf spark.log.level=ERROR \
        <script> --config <config>

Workers and the driver run this interpreter (``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON``), so
they see the venv's packages. A short-lived JVM: the C1 compiler alone warms up faster, serial
GC is lean. Lines that are Spark's own logging (``yy/MM/dd HH:mm:ss INFO|WARN …``, Python
warnings, the log4j banner) are dropped; every other line is printed with ``indent``.

Thread-safe (no shared state), though two Spark applications at once on 2 cores are slow.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SPARK_LOG_LINE = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN) ")
SPARK_NOISE = (
    "WARN ",
    "WARNING:",
    "Using Spark's default log4j",
    "Setting default log level",
    "To adjust logging level",
    "Setting Spark log level",
)


def spark_noise(line: str) -> bool:
    """Whether an output line is Spark's logging (or blank) rather than the application's."""
    return not line.strip() or line.startswith(SPARK_NOISE) or bool(SPARK_LOG_LINE.match(line))


def spark_submit(script: Path, config: Path, *, cwd: Path, indent: str = "    ") -> int:
    """``spark-submit <script> --config <config>`` in ``local[2]`` from ``cwd``, echoing the
    command (paths relative to ``cwd``) and the application's output; its exit status."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    args = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2]",
        "--driver-java-options", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.log.level=ERROR",
        str(script),
        "--config", str(config),
    ]  # fmt: skip
    print(f"{indent}$ spark-submit --master local[2] {_shown(script, cwd)} --config "
          f"{_shown(config, cwd)}", flush=True)  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            if not spark_noise(line):
                print(f"{indent}{line.rstrip()}", flush=True)
    return proc.wait()


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(cwd).resolve()))
    except ValueError:
        return str(path)
