"""Tests for sluice.pipeline.load.session (and the load's use of it): Spark's conventions pick
the master, object stores are refused, and a table filesystem the driver or the executors
cannot open fails the load before anything is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.cli.load_command import main as cli_main
from sluice.pipeline.load.errors import FilesystemUnavailableError, LoadConfigError
from sluice.pipeline.load.run import LoadConfig, run_load
from sluice.pipeline.load.session import check_filesystem, probe_filesystem

REPO = Path(__file__).resolve().parents[3]
HDFS = "hdfs://127.0.0.1:1/warehouse"  # no libhdfs on this machine, and no namenode


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
