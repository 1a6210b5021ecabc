"""Tests for sluice.pipeline.load.preflight through ``sluice load``: what can fail without Spark
fails before Spark starts, in seconds, with the exit status of the contract (0 done, 1 failed,
2 configuration, 3 a service did not answer) and one line naming what was expected and found."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sluice.cli.load_command import main as cli_main
from sluice.pipeline.load.preflight import nearest_topics
from sluice.testing.broker import create_topic
from sluice.testing.net import free_port

pytestmark = pytest.mark.broker


def _props(tmp_path: Path, bootstrap: str, topics: str, *extra: str) -> Path:
    props = tmp_path / "load.properties"
    lines = [
        f"kafka.bootstrap.servers={bootstrap}",
        f"topics={topics}",
        f"warehouse.path={tmp_path / 'warehouse'}",
        *extra,
    ]
    props.write_text("\n".join(lines) + "\n")
    return props


def _spark_started(err: str) -> bool:
    """Whether the load got as far as Spark: it says the master it runs on once it has one
    (a session of other tests may be active in this process, so that is no witness)."""
    return "Spark master" in err


def test_a_broker_down_at_the_start_exits_3_naming_the_servers(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    code = cli_main(["load", "--config", str(_props(tmp_path, dead, "t"))])
    took = time.monotonic() - began
    err = capfd.readouterr().err
    assert code == 3, err
    assert took < 30, took
    failed = [line for line in err.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and dead in failed[0], err
    assert "expected a broker of" in failed[0]
    assert "%3|" not in err and "Connect to" not in err.replace(failed[0], "")  # counted
    assert len(err.splitlines()) < 10, err


def test_a_misspelt_topic_exits_2_naming_the_nearest(
    kafka_broker: Any, topic_name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    misspelt = topic_name[:-1] + ("x" if topic_name[-1] != "x" else "y")
    code = cli_main(["load", "--config", str(_props(tmp_path, kafka_broker.bootstrap, misspelt))])
    err = capfd.readouterr().err
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("sluice load: bad configuration: topics: expected topics that exist")
    assert f"no {misspelt!r} (did you mean {topic_name!r}" in line
    assert "allowMissingTopics=true" in line
    assert not _spark_started(err)


def test_nearest_topics() -> None:
    assert nearest_topics("paymentz", ["payments", "page_views", "orders"]) == ["payments"]
    assert nearest_topics("zzz", ["payments"]) == []


def test_a_registry_down_at_the_start_exits_3(
    kafka_broker: Any, topic_name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    registry = f"http://127.0.0.1:{free_port()}"
    props = _props(
        tmp_path, kafka_broker.bootstrap, topic_name, "valueFormat=avro",
        f"schema.registry.url={registry}",
    )  # fmt: skip
    code = cli_main(["load", "--config", str(props)])
    err = capfd.readouterr().err
    assert code == 3, err
    line = err.strip().splitlines()[-1]
    assert f"schema.registry.url: expected the schema registry at {registry}" in line, err
    assert not _spark_started(err)


def test_an_unwritable_warehouse_fails_before_spark(
    kafka_broker: Any, topic_name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A warehouse under a plain file: no directory can be made there, even by root."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    (tmp_path / "a-file").write_text("not a directory")
    props = _props(
        tmp_path, kafka_broker.bootstrap, topic_name,
        f"warehouse.path={tmp_path / 'a-file' / 'warehouse'}",
    )  # fmt: skip
    began = time.monotonic()
    code = cli_main(["load", "--config", str(props)])
    err = capfd.readouterr().err
    assert code == 1, err
    assert "warehouse.path: expected a directory the driver can write" in err
    assert time.monotonic() - began < 10
    assert not _spark_started(err)


def test_a_misspelt_key_still_exits_2(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    props = _props(tmp_path, "127.0.0.1:1", "t", "stallTimeoutMillis=5")
    assert cli_main(["load", "--config", str(props)]) == 2
    assert "stallTimeoutMs" in capfd.readouterr().err


def test_help_has_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["load", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":class:" not in out and "Exit status" in out
