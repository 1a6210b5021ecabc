"""Tests for sluice.pipeline.load.session (and the load's use of it): Spark's conventions pick
the master — checked on the master the load's own SparkContext reports, with the load run as a
user runs it (``python -m sluice.jobs.nightly_load``, ``spark-submit jobs/nightly_load.py``) —
object stores are refused, and a table filesystem the driver or the executors cannot open fails
the load before anything is read."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.cli.load_command import main as cli_main
from sluice.pipeline.load.errors import FilesystemUnavailableError, LoadConfigError
from sluice.pipeline.load.run import LoadConfig, run_load
from sluice.pipeline.load.session import check_filesystem, probe_filesystem
from sluice.testing.broker import create_topic
from sluice.testing.spark_cluster import spark_home

REPO = Path(__file__).resolve().parents[3]
HDFS = "hdfs://127.0.0.1:1/warehouse"  # no libhdfs on this machine, and no namenode
LOAD_TIMEOUT = 240.0  # one driver JVM on a loaded 2-core box
# What the load's environment must not inherit from the test process: another master or conf
# dir, or a gateway to pytest's own JVM (a child given PYSPARK_GATEWAY_PORT would use it).
_INHERITED = (
    "MASTER", "SPARK_CONF_DIR", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
)  # fmt: skip


def _props(**extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:1", "topics": "t", **extra}


def test_no_master_unless_the_config_names_one() -> None:
    assert LoadConfig.from_properties(_props(**{"warehouse.path": "/w"})).spark_master is None
    named = LoadConfig.from_properties(_props(**{"warehouse.path": "/w", "spark.master": "x"}))
    assert named.spark_master == "x" and "spark.master" not in named.spark


def test_spark_conventions_choose_the_master_and_local_mode_says_its_python(
    tmp_path: Path,
) -> None:
    """``MASTER`` (as spark-defaults.conf and spark-submit --master) decides when the config is
    silent; in local mode the executors run the driver's interpreter, and the load says so."""
    code = (
        "from sluice.pipeline.load.run import LoadConfig, build_spark\n"
        "c = LoadConfig.from_properties({'kafka.bootstrap.servers': 'h:1', 'topics': 't', "
        f"'warehouse.path': {str(tmp_path)!r}, 'spark.ui.enabled': 'false'}})\n"
        "s = build_spark(c, print)\n"
        "print('MASTER=' + s.sparkContext.master)\n"
        "s.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_CONF_DIR")}
    env["MASTER"] = "local[1]"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MASTER=local[1]" in done.stdout
    assert f"executors run Python {sys.executable} (local mode" in done.stdout


def _load_master(
    tmp_path: Path,
    bootstrap: str,
    topic: str,
    *,
    submit_master: str | None = None,
    config_master: str | None = None,
    defaults_master: str | None = None,
    env_master: str | None = None,
) -> str:
    """Run the nightly load (``spark-submit --master submit_master jobs/nightly_load.py`` when
    given, else ``python -m sluice.jobs.nightly_load``) on an empty topic, with
    ``spark.master`` in its config, in ``$SPARK_CONF_DIR/spark-defaults.conf`` and in ``MASTER``
    as given; the master its SparkContext ran on, from the load's "Spark master ..." line."""
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    if defaults_master is not None:
        (conf_dir / "spark-defaults.conf").write_text(f"spark.master {defaults_master}\n")
    props = [
        f"kafka.bootstrap.servers={bootstrap}",
        f"topics={topic}",
        f"warehouse.path={tmp_path / 'warehouse'}",
        "spark.ui.enabled=false",
        *([f"spark.master={config_master}"] if config_master else []),
    ]
    config = tmp_path / "load.properties"
    config.write_text("\n".join(props) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
    env |= {
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf_dir),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        **({"MASTER": env_master} if env_master else {}),
    }
    if submit_master is None:
        command = [sys.executable, "-m", "sluice.jobs.nightly_load"]
    else:
        submit = str(Path(sys.executable).parent / "spark-submit")
        command = [submit, "--master", submit_master, str(REPO / "jobs" / "nightly_load.py")]
    load = subprocess.Popen(
        [*command, "--config", str(config)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = load.communicate(timeout=LOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(load.pid, signal.SIGKILL)
        output, _ = load.communicate()
        raise AssertionError(
            f"the load did not end in {LOAD_TIMEOUT}s:\n{output[-3000:]}"
        ) from None
    finally:
        with contextlib.suppress(ProcessLookupError):  # nothing it started outlives it
            os.killpg(load.pid, signal.SIGKILL)
    assert load.returncode == 0, output[-3000:]
    assert "no new data" in output, output[-3000:]
    masters = re.findall(r"\] Spark master (\S+);", output)
    assert len(masters) == 1, output[-3000:]
    return masters[0]


# Who chooses the master, each case through the load itself: (the master each source names,
# the one the SparkContext must run on).
MASTER_CASES = {
    # spark.master of $SPARK_CONF_DIR/spark-defaults.conf decides, before MASTER (Spark's order)
    "spark-defaults.conf": (dict(defaults_master="local[1]", env_master="local[3]"), "local[1]"),
    # spark-submit --master decides, before spark-defaults.conf and MASTER
    "spark-submit --master": (
        dict(submit_master="local[1]", defaults_master="local[2]", env_master="local[3]"),
        "local[1]",
    ),
    # the config's spark.master wins over spark-defaults.conf and MASTER
    "the config": (
        dict(config_master="local[2]", defaults_master="local[1]", env_master="local[3]"),
        "local[2]",
    ),
    # As conf/nightly_load.properties and jobs/nightly_load.py say: a job started by
    # spark-submit runs where spark-submit put it (its --master, as for any flag over a
    # properties file); the config's spark.master is for `sluice load` / `python -m`.
    "spark-submit over the config": (
        dict(submit_master="local[1]", config_master="local[2]"),
        "local[1]",
    ),
}


@pytest.mark.broker
@pytest.mark.parametrize("case", list(MASTER_CASES))
def test_who_chooses_the_master(
    case: str, kafka_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    sources, expected = MASTER_CASES[case]
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    assert _load_master(tmp_path, kafka_broker.bootstrap, topic_name, **sources) == expected


@pytest.mark.parametrize("warehouse", ["s3a://bucket/warehouse", "gs://bucket/w"])
def test_an_object_store_warehouse_is_refused(warehouse: str, tmp_path: Path) -> None:
    with pytest.raises(LoadConfigError, match="warehouse.path: .*atomic directory rename"):
        LoadConfig.from_properties(_props(**{"warehouse.path": warehouse}))
    props = tmp_path / "load.properties"
    props.write_text(f"kafka.bootstrap.servers=h:1\ntopics=t\nwarehouse.path={warehouse}\n")
    assert cli_main(["load", "--config", str(props)]) == 2


def test_an_hdfs_warehouse_without_libhdfs_fails_before_reading(spark: Any) -> None:
    config = LoadConfig.from_properties(_props(**{"warehouse.path": HDFS}))
    lines: list[str] = []
    with pytest.raises(FilesystemUnavailableError, match="the driver cannot open .*libhdfs"):
        run_load(config, spark, progress=lines.append)
    assert not any("offsets to read" in line or "read+write" in line for line in lines)


def test_executors_without_libhdfs_fail_the_check(spark: Any, monkeypatch: Any) -> None:
    """The driver's probe passes (pretended); the executors' own probe — a Spark job, run in
    its Python workers — finds no libhdfs and names what is missing."""
    from sluice.pipeline.load import session

    assert probe_filesystem(HDFS) is not None  # the real answer on this machine
    real = session.probe_filesystem
    calls: list[str] = []

    def driver_only(uri: str) -> str | None:
        calls.append(uri)
        return None if len(calls) == 1 else real(uri)

    monkeypatch.setattr(session, "probe_filesystem", driver_only)
    with pytest.raises(FilesystemUnavailableError, match="executors cannot open .*CLASSPATH"):
        check_filesystem(spark, HDFS, lambda message: None)


def test_a_local_warehouse_needs_no_probe(spark: Any, tmp_path: Path) -> None:
    check_filesystem(spark, f"file://{tmp_path}", pytest.fail)
    check_filesystem(spark, str(tmp_path), pytest.fail)
