"""One exit-code contract for the client-side commands (issue 28): ``audit``, ``mirror``,
``table`` and the registry verbs exit 0 done, 1 failed, 2 usage or configuration, 3 a service
did not answer — in one line naming what was expected and what was found, within a bound.

Each case runs the real command line (``python -m sluice``) against real services on
127.0.0.1 or against a port where nothing listens ("down"). Dead services are given up on
within the bounds the commands document (10 s per cluster, 5 s for a Spark master, 10 s per
registry request); every such case asserts the command ends within 30 s.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from sluice.cli import build_parser
from sluice.cli.config_arguments import progress_printer
from sluice.cli.errors import ServiceUnreachableError, unreachable_cause
from sluice.schemas.errors import RegistryConnectionError
from sluice.testing.broker import BrokerProcess
from sluice.testing.net import free_port
from sluice.testing.registry import RegistryProcess

DEAD_SERVICE_BOUND_S = 30.0
"""The most a command may wait on a service that does not answer (the issue's bound)."""

# reST roles, literals and strong emphasis: none belongs in a terminal's --help.
MARKUP = re.compile(r"``|:(?:class|func|mod|meth|attr|data|exc|ref):`|\*\*")


def sluice(*args: str, timeout: float = 90) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``python -m sluice ARGS``; the process and its wall-clock seconds."""
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, time.monotonic() - began


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``sluice ...`` line on stderr (librdkafka's ``%`` lines aside)."""
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("%")]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sluice "), lines
    return lines[0]


def dead_address() -> str:
    return f"127.0.0.1:{free_port()}"


def properties(path: Path, **values: str) -> Path:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in values.items()))
    return path


# -- help and progress lines -----------------------------------------------------------------


def _parsers(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    yield path, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def test_no_help_text_of_any_command_carries_rest_markup() -> None:
    helps = dict(_parsers(build_parser(), "sluice"))
    assert {"sluice audit", "sluice mirror lag", "sluice table compact", "sluice load"} <= set(
        helps
    )
    marked = {path: MARKUP.findall(text) for path, text in helps.items() if MARKUP.search(text)}
    assert marked == {}


def test_help_of_the_client_commands_states_the_exit_statuses() -> None:
    helps = dict(_parsers(build_parser(), "sluice"))
    for command in ("audit", "mirror", "table", "registry", "load"):
        text = " ".join(helps[f"sluice {command}"].split())
        assert "Exit status: 0" in text and "3 " in text, command


def test_progress_lines_carry_the_date_and_the_zone() -> None:
    out = io.StringIO()
    with redirect_stderr(out):
        progress_printer("audit")("counted live")
    line = out.getvalue()
    assert re.fullmatch(r"\[sluice audit \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] counted live\n", line)


# -- the chain of a wrapped failure ----------------------------------------------------------


def test_a_silent_service_is_found_behind_from_none() -> None:
    """The audit wraps failures ``from None``; the registry's silence still shows (3)."""
    try:
        try:
            try:
                raise RegistryConnectionError("cannot reach registry at http://127.0.0.1:1")
            except RegistryConnectionError:
                raise RuntimeError("audit topic: expected its schema") from None
        except RuntimeError as exc:
            raise ValueError(f"AuditError: {exc}") from None
    except ValueError as wrapped:
        assert isinstance(unreachable_cause(wrapped), RegistryConnectionError)
    assert unreachable_cause(ValueError("a window differs")) is None
    assert unreachable_cause(ServiceUnreachableError("x")) is not None


# -- audit -----------------------------------------------------------------------------------


def audit_config(tmp_path: Path, live: str, **extra: str) -> Path:
    values = {
        "live.clusters": "live",
        "live.bootstrap.servers": live,
        "schema.registry.url": f"http://{dead_address()}",
        "tiers": "live",
        "report.dir": str(tmp_path / "report"),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }
    path = tmp_path / "audit.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def test_audit_with_the_brokers_down_exits_3_naming_the_servers(tmp_path: Path) -> None:
    dead = dead_address()
    proc, took = sluice("audit", "--config", str(audit_config(tmp_path, dead)))
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert f"live.bootstrap.servers: expected a broker of {dead} to answer within 10s" in line
    assert took < DEAD_SERVICE_BOUND_S


def test_audit_with_the_spark_master_down_exits_3_naming_it(tmp_path: Path) -> None:
    master = f"spark://{dead_address()}"
    config = audit_config(tmp_path, dead_address(), spark_master=master)
    proc, took = sluice("audit", "--config", str(config))
    assert proc.returncode == 3, proc.stderr
    assert f"expected the Spark master at {master} to accept a connection" in one_line_error(proc)
    assert took < DEAD_SERVICE_BOUND_S


def test_audit_debug_adds_the_traceback(tmp_path: Path) -> None:
    config = audit_config(tmp_path, dead_address(), spark_master=f"spark://{dead_address()}")
    proc, _ = sluice("--debug", "audit", "--config", str(config))
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr


def test_audit_with_a_misspelt_key_exits_2_with_did_you_mean(tmp_path: Path) -> None:
    config = audit_config(tmp_path, dead_address())
    proc, _ = sluice("audit", "--config", str(config), "--override", "report.dri=x")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "bad configuration: report.dri" in line and "did you mean 'report.dir'" in line
    bad_until, _ = sluice("audit", "--config", str(config), "--until", "yesterday")
    assert bad_until.returncode == 2
    assert one_line_error(bad_until).startswith("sluice audit: --until:")


# What the audit run checks before its SparkSession (sluice.pipeline.audit.preflight), with
# the brokers up. spark.local.dir is a directory of the test's: a SparkContext that started
# would have made its block manager's directory there.


def _spark_started(local_dir: Path) -> bool:
    return local_dir.exists() and any(local_dir.iterdir())


@pytest.mark.broker
def test_audit_with_the_registry_down_exits_3_before_spark_starts(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    url = f"http://{dead_address()}"
    local = tmp_path / "spark-local"
    config = audit_config(tmp_path, broker.bootstrap, schema_registry_url=url,
                          spark_local_dir=str(local))  # fmt: skip
    proc, took = sluice("audit", "--config", str(config))
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert f"schema.registry.url: expected the schema registry at {url} to answer within 5s" in line
    assert took < DEAD_SERVICE_BOUND_S
    assert not _spark_started(local)


@pytest.mark.broker
def test_audit_with_the_iceberg_catalog_down_exits_3_naming_it(
    broker: BrokerProcess, registry: str, tmp_path: Path
) -> None:
    port = free_port()
    local = tmp_path / "spark-local"
    config = audit_config(
        tmp_path, broker.bootstrap, schema_registry_url=registry, tiers="live,warehouse",
        warehouse_format="iceberg", warehouse_path=str(tmp_path / "warehouse"),
        iceberg_catalog_uri=f"postgresql+psycopg2://sluice:secret@127.0.0.1:{port}/iceberg",
        spark_local_dir=str(local),
    )  # fmt: skip
    proc, took = sluice("audit", "--config", str(config))
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert "iceberg.catalog.uri: expected the Iceberg catalog to answer" in line
    assert f"sluice:***@127.0.0.1:{port}/iceberg" in line and "secret" not in line
    assert took < DEAD_SERVICE_BOUND_S
    assert not _spark_started(local)


@pytest.mark.broker
def test_audit_with_an_unwritable_report_dir_exits_1_before_spark_starts(
    broker: BrokerProcess, registry: str, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a directory")
    local = tmp_path / "spark-local"
    config = audit_config(tmp_path, broker.bootstrap, schema_registry_url=registry,
                          report_dir=str(tmp_path / "file" / "report"),
                          spark_local_dir=str(local))  # fmt: skip
    proc, _ = sluice("audit", "--config", str(config))
    assert proc.returncode == 1, proc.stderr
    line = one_line_error(proc)
    assert f"report.dir: expected a directory the driver can write, found {tmp_path}" in line
    assert not _spark_started(local)


# Differing counts (exit 1) need Spark and produced data: tests/pipeline/audit/test_audit.py
# runs the audit command over a scenario whose warehouse lost rows and asserts 1.


# -- mirror ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("contract-broker")) as process:  # started
        yield process


def mirror_config(tmp_path: Path, source: str, target: str) -> Path:
    return properties(
        tmp_path / "mirror.properties",
        clusters="live",
        live_bootstrap_servers=source,
        target_alias="offline",
        target_bootstrap_servers=target,
    )


@pytest.mark.parametrize("action", ["run", "lag"])
def test_mirror_with_the_source_cluster_down_exits_3_naming_it(action: str, tmp_path: Path) -> None:
    dead = dead_address()
    proc, took = sluice("mirror", action, "--config", str(mirror_config(tmp_path, dead, dead)))
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert line.startswith(f"sluice mirror {action}: FAILED: live.bootstrap.servers:")
    assert f"expected a broker of {dead} to answer within 10s" in line
    assert took < DEAD_SERVICE_BOUND_S


@pytest.mark.broker
def test_mirror_run_with_the_target_down_exits_3_naming_it(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    dead = dead_address()
    proc, took = sluice("mirror", "run", "--config",
                        str(mirror_config(tmp_path, broker.bootstrap, dead)))  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert f"target.bootstrap.servers: expected a broker of {dead} to answer" in line
    assert took < DEAD_SERVICE_BOUND_S


@pytest.mark.broker
def test_mirror_lag_of_a_cluster_that_answers_exits_0(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    proc, _ = sluice("mirror", "lag", "--config",
                     str(mirror_config(tmp_path, broker.bootstrap, dead_address())))  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_mirror_with_a_misspelt_key_exits_2_with_did_you_mean(tmp_path: Path) -> None:
    config = mirror_config(tmp_path, dead_address(), dead_address())
    proc, _ = sluice("mirror", "lag", "--config", str(config), "--override", "group.di=x")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "bad configuration: group.di" in line and "did you mean 'group.id'" in line


# -- registry verbs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("contract-registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    assert process.stop() == 0, process.log()


def record(*fields: tuple[str, str]) -> str:
    return json.dumps(
        {"type": "record", "name": "V", "fields": [{"name": n, "type": t} for n, t in fields]}
    )


@pytest.mark.parametrize(
    "verb", [["register", "--subject", "s"], ["list"], ["mode"], ["mode", "--set", "READONLY"]]
)
def test_a_registry_verb_against_a_closed_port_exits_3_naming_the_url(
    verb: list[str], tmp_path: Path
) -> None:
    url = f"http://{dead_address()}"
    schema = tmp_path / "v.avsc"
    schema.write_text(record(("a", "int")))
    files = [str(schema)] if verb[0] == "register" else []
    proc, took = sluice("registry", verb[0], "--url", url, *verb[1:], *files)
    assert proc.returncode == 3, proc.stderr
    assert f"cannot reach registry at {url}" in one_line_error(proc)
    assert took < DEAD_SERVICE_BOUND_S


def test_registering_an_incompatible_schema_exits_1_with_the_registry_s_message(
    registry: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "v1.avsc", tmp_path / "v2.avsc"
    first.write_text(record(("a", "int")))
    second.write_text(record(("a", "int"), ("b", "string")))  # no default: not BACKWARD
    done, _ = sluice("registry", "register", "--url", registry, "--subject", "c-value", str(first))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().isdigit()
    refused, _ = sluice(
        "registry", "register", "--url", registry, "--subject", "c-value", str(second)
    )
    assert refused.returncode == 1, refused.stderr
    assert "incompatible" in one_line_error(refused).lower()


def test_registering_bad_input_exits_2(registry: str, tmp_path: Path) -> None:
    missing, _ = sluice("registry", "register", "--url", registry, "--subject", "s",
                        str(tmp_path / "nope.avsc"))  # fmt: skip
    assert missing.returncode == 2
    assert "nope.avsc" in one_line_error(missing)
    bad_reference, _ = sluice("registry", "register", "--url", registry, "--subject", "s",
                              "--reference", "broken", str(tmp_path / "nope.avsc"))  # fmt: skip
    assert bad_reference.returncode == 2
    assert "expected NAME=SUBJECT:VERSION" in bad_reference.stderr
