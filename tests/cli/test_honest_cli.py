"""The ``sluice`` command never reports success it did not have (issue 17, "Honest CLI").

Every case runs the real command line (``python -m sluice``) as a user would, against a real
standalone broker on 127.0.0.1 or against a port where nothing listens: the exit status is the
documented one (1 failure, 2 usage or configuration, 3 unreachable service), the error is one
line on stderr, and a traceback appears only with ``--debug``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.broker import BrokerProcess
from sluice.testing.net import free_port

pytestmark = pytest.mark.broker


def sluice(*args: str, stdin: str = "", timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("%")]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sluice "), lines
    return lines[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("cli-broker")) as process:  # started
        yield process


@pytest.fixture
def dead() -> str:
    """A bootstrap address where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def test_produce_to_an_unreachable_cluster_exits_3_and_counts_the_undelivered(dead: str) -> None:
    proc = sluice("produce", "--bootstrap-server", dead, "--topic", "t", "--timeout-ms", "1500",
                  stdin="a\nb\n")  # fmt: skip
    assert proc.returncode == 3
    line = one_line_error(proc)
    assert "2 of 2 messages to t were not delivered" in line
    assert "Produced" not in proc.stderr


def test_produce_that_is_delivered_exits_0(broker: BrokerProcess) -> None:
    proc = sluice("produce", "--bootstrap-server", broker.bootstrap, "--topic", "honest",
                  stdin="a\nb\nc\n")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Produced 3 messages to honest." in proc.stderr


def test_describe_of_a_missing_topic_fails_and_creates_nothing(broker: BrokerProcess) -> None:
    proc = sluice("topics", "describe", "--topic", "typo", "--bootstrap-server", broker.bootstrap)
    assert proc.returncode == 1
    assert "topic 'typo' does not exist" in one_line_error(proc)
    listing = sluice("topics", "list", "--bootstrap-server", broker.bootstrap)
    assert listing.returncode == 0, listing.stderr
    assert "typo" not in listing.stdout.split()


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list"],
        ["topics", "describe", "--topic", "x"],
        ["topics", "create", "--topic", "x"],
        ["topics", "delete", "--topic", "x"],
        ["consume", "--topic", "x", "--from-beginning"],
    ],
)
def test_an_unreachable_cluster_is_exit_3_in_one_line(argv: list[str], dead: str) -> None:
    proc = sluice(*argv, "--bootstrap-server", dead)
    assert proc.returncode == 3, proc.stderr
    assert dead in one_line_error(proc)


def test_an_unreachable_registry_is_exit_3_in_one_line() -> None:
    proc = sluice("registry", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 3
    assert "cannot reach registry" in one_line_error(proc)


def test_debug_shows_the_traceback_too() -> None:
    proc = sluice("--debug", "registry", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr


def test_a_config_without_equals_is_a_usage_error(broker: BrokerProcess) -> None:
    proc = sluice("topics", "create", "--topic", "cfg", "--config", "retention.ms",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert proc.returncode == 2
    assert "expected KEY=VALUE, found 'retention.ms'" in one_line_error(proc)


def test_kafka_flag_order_is_accepted(broker: BrokerProcess) -> None:
    created = sluice("topics", "--bootstrap-server", broker.bootstrap, "--create",
                     "--topic", "kafka-style", "--partitions", "2")  # fmt: skip
    assert created.returncode == 0, created.stderr
    described = sluice("topics", "--describe", "--topic", "kafka-style",
                       "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 2" in described.stdout
    assert described.stdout.count("Partition: ") == 2


def test_version_and_help() -> None:
    version = sluice("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("sluice ")
    top = sluice("--help")
    assert "``" not in top.stdout  # no raw reStructuredText
    assert "exit status" in top.stdout
    topics = sluice("topics", "--help")
    assert "{alter,create,delete,describe,list}" in topics.stdout
    create = sluice("topics", "create", "--help")
    assert "default: -1" in create.stdout


def test_a_missing_avsc_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = sluice("registry", "register", "--subject", "s", str(tmp_path / "missing.avsc"))
    assert proc.returncode == 2
    assert "missing.avsc" in one_line_error(proc)
