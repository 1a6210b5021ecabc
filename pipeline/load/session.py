"""The load's Spark session and what it needs from the cluster it runs on.

Master
======
``build_spark`` sets a master only when the configuration names one (``spark.master``);
otherwise Spark's own conventions decide, in Spark's order: ``spark-submit --master``, the
``spark.master`` of ``$SPARK_CONF_DIR/spark-defaults.conf``, the ``MASTER`` environment
variable, and ``local[*]`` when none is set. Under ``spark-submit`` its ``--master`` wins over
the configuration's. Every other ``spark.*`` key of the configuration is passed through.

Python on the executors
=======================
Spark runs the executors' Python workers with ``spark.pyspark.python`` (or
``spark.pyspark.driver.python`` for the driver), else ``PYSPARK_PYTHON``, else ``python3`` from
the executor's ``PATH``. Only in **local mode** — executors in the driver's JVM, on the
driver's machine — does the load default them to the driver's own interpreter (and says so);
on a cluster it sets nothing and says which Python the executors will run. That Python needs
``pyarrow``, ``confluent-kafka`` (and ``fastavro`` for ``valueFormat=avro``, ``jsonschema``
for ``json-schema``, ``protobuf`` and ``grpcio-tools`` for ``protobuf``) installed; ``sluice``
itself can be shipped with the job:

* ``spark.submit.pyFiles`` / ``--py-files`` with a **zip** of the wheel (``pip wheel --no-deps
  .`` builds ``sluice-<v>-py3-none-any.whl``; the wheel *is* a zip, but PySpark puts only
  ``.zip``, ``.egg`` and ``.jar`` files on the executors' ``sys.path``, so copy it to
  ``sluice.zip``) — tested on a standalone cluster whose executors run a Python without sluice;
* or ``spark.archives`` with a packed virtualenv (``venv-pack``) and ``spark.pyspark.python``
  pointing into it.

``build_spark`` warns when a cluster's executors would read from a loopback broker address
(``127.0.0.1``, ``localhost``, ``::1``): each executor would connect to its own machine.

Filesystems
===========
The driver lists, reads and publishes the table with ``pyarrow.fs`` and the JVM's Hadoop
``FileContext`` (the rename); the executors write the data files and the error table with
pyarrow through ``pyarrow.fs`` (``sluice.pipeline.load.split_writer``). On ``hdfs://`` pyarrow
needs **libhdfs** on the driver and on every executor:
``libhdfs.so`` from a Hadoop distribution (``$HADOOP_HOME/lib/native``, or
``ARROW_LIBHDFS_DIR``), ``JAVA_HOME``, and the Hadoop jars on ``CLASSPATH``
(``CLASSPATH=$(hadoop classpath --glob)``; on executors through ``spark.executorEnv.*``).
``check_filesystem`` checks that at the start of the run — the driver, then one small Spark job
on the executors — and fails with ``FilesystemUnavailableError`` saying what is missing, before
any record is read. Local paths and ``file://`` need nothing (but one filesystem shared by the
driver and every worker at the same path: ``sluice.pipeline.load.verify``).

Functions only; call them from the thread that runs the load.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from sluice.pipeline.load.errors import FilesystemUnavailableError

__all__ = [
    "LOOPBACK_HOSTS",
    "build_spark",
    "check_driver_filesystem",
    "check_filesystem",
    "executor_python",
    "probe_filesystem",
]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")

_LIBHDFS_HINT = (
    "pyarrow on hdfs:// needs libhdfs: libhdfs.so ($HADOOP_HOME/lib/native or "
    "ARROW_LIBHDFS_DIR), JAVA_HOME, and CLASSPATH=$(hadoop classpath --glob); on executors set "
    "them with spark.executorEnv.<NAME>"
)


def build_spark(
    config: Any,
    say: Callable[[str], None] | None = None,
) -> Any:
    """A SparkSession for the load ``config`` (a ``LoadConfig``); see the module doc.

    A session already running in this process (a notebook's, a test's) is used as it is:
    none of its settings are changed."""
    say = say or (lambda message: None)
    running = SparkSession.getActiveSession()
    if running is not None:
        say(f"using the running Spark session (master {running.sparkContext.master})")
        return running
    builder = SparkSession.builder.appName(f"sluice-nightly-load-{config.table}")
    if config.spark_master and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = builder.master(config.spark_master)  # named by the config, not spark-submit
    settings = {
        "spark.ui.showConsoleProgress": "false",  # the load prints its own progress
        "spark.sql.session.timeZone": "UTC",
        **config.spark,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    context = spark.sparkContext
    master = str(context.master)
    python = executor_python(spark)
    if python is None and master.startswith("local"):
        # Local mode: the executors are this process's JVM on this machine, so this
        # interpreter (the one with sluice installed) is the right one. Never on a cluster.
        context.pythonExec = sys.executable
        python = f"{sys.executable} (local mode: the driver's interpreter)"
    say(
        f"Spark master {master}; executors run Python "
        + (python or "python3 from their PATH (set spark.pyspark.python to choose)")
    )
    if not master.startswith("local"):
        loopback = [s for s in config.bootstrap_servers.split(",") if _is_loopback(s)]
        if loopback:
            say(
                f"WARNING: kafka.bootstrap.servers={config.bootstrap_servers}: executors on "
                f"other machines reach {', '.join(loopback)} on their own machine; name the "
                "brokers by an address the workers can reach"
            )
    return spark


def executor_python(spark: Any) -> str | None:
    """The Python the executors were told to run (``spark.pyspark.python`` or
    ``PYSPARK_PYTHON``), or ``None`` when Spark falls back to ``python3`` on their PATH."""
    conf = spark.sparkContext.getConf()
    named = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    return str(named) if named else None


def _is_loopback(server: str) -> bool:
    host = server.strip().rsplit(":", 1)[0] if server.count(":") <= 1 else server.strip()
    return host.lower() in LOOPBACK_HOSTS or host.startswith("127.")


def _is_local(uri: str) -> bool:
    return urlsplit(uri).scheme in ("", "file")


def probe_filesystem(uri: str) -> str | None:
    """Why ``pyarrow.fs`` cannot open ``uri`` here (runs on executors too), or ``None``."""
    import pyarrow.fs as pafs

    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        fs.get_file_info(path)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return None


def _probe_task(uri: str) -> Callable[[Iterable[int]], Iterable[tuple[str, str | None]]]:
    def task(_: Iterable[int]) -> Iterable[tuple[str, str | None]]:
        yield socket.gethostname(), probe_filesystem(uri)

    return task


def check_driver_filesystem(uri: str) -> None:
    """Raise ``FilesystemUnavailableError`` unless the driver can open the filesystem of a
    non-local ``uri`` with ``pyarrow.fs`` (needs no Spark: the load's preflight runs it)."""
    if _is_local(uri):
        return
    reason = probe_filesystem(uri)
    if reason is not None:
        raise FilesystemUnavailableError(
            f"the driver cannot open {uri} with pyarrow ({reason}); {_LIBHDFS_HINT}"
        )


def check_filesystem(spark: Any, uri: str, say: Callable[[str], None]) -> None:
    """Raise ``FilesystemUnavailableError`` unless the driver and the executors can open the
    filesystem of ``uri`` with ``pyarrow.fs`` (module doc). Local paths and ``file://`` are
    not probed (nothing to install); others are, on the driver and in one Spark job of
    ``defaultParallelism`` tasks."""
    if _is_local(uri):
        return
    check_driver_filesystem(uri)
    context = spark.sparkContext
    tasks = max(int(context.defaultParallelism), 1)
    answers = context.parallelize(range(tasks), tasks).mapPartitions(_probe_task(uri)).collect()
    failed = sorted({f"{host}: {why}" for host, why in answers if why is not None})
    if failed:
        raise FilesystemUnavailableError(
            f"executors cannot open {uri} with pyarrow (they write the data files and the error "
            f"table there): {'; '.join(failed)}; {_LIBHDFS_HINT}"
        )
    say(f"{uri}: the driver and {tasks} executor tasks can open it")
