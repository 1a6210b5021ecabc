"""What the audit checks before Spark starts (``sluice.pipeline.audit.preflight``): the
schema registry within its bound, the warehouse (the Iceberg catalog answers; a Parquet table
is a readable directory), ``report.dir`` writable — each failure one message naming the key,
what was expected and what was found, and a silent service recognised as exit 3.

Real services only: the session's schema registry, a listening socket that never answers (a
registry that hangs), closed ports (services that are down), SQLite files and directories on
disk. The command-line side (exit statuses, Spark never started) is in
``tests/cli/test_exit_contract.py``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.cli.errors import unreachable_cause
from sluice.pipeline.audit.config import AuditConfig
from sluice.pipeline.audit.preflight import (
    REGISTRY_TIMEOUT_S,
    AuditPreflightError,
    check_catalog,
    check_registry,
    check_report_dir,
    check_table_dir,
    preflight,
)
from sluice.pipeline.audit.run import AuditError, run_audit
from sluice.pipeline.table.iceberg_catalog import CatalogUnavailableError
from sluice.schemas.errors import RegistryConnectionError
from sluice.testing.net import free_port


def _config(tmp_path: Path, registry: str, **extra: str) -> AuditConfig:
    return AuditConfig.from_properties(
        {
            "live.clusters": "live",
            "live.bootstrap.servers": f"127.0.0.1:{free_port()}",
            "schema.registry.url": registry,
            "report.dir": str(tmp_path / "report"),
            **{k.replace("_", "."): v for k, v in extra.items()},
        }
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


def test_a_registry_that_answers_passes(registry_url: str) -> None:
    check_registry(registry_url)


def test_a_registry_that_is_down_is_unreachable_at_once() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(AuditPreflightError) as caught:
        check_registry(url)
    assert time.monotonic() - began < REGISTRY_TIMEOUT_S
    assert isinstance(unreachable_cause(caught.value), RegistryConnectionError)
    assert str(caught.value).startswith(
        f"schema.registry.url: expected the schema registry at {url} to answer within 5s, found "
    )
    assert "refused" in str(caught.value).lower()


def test_a_registry_that_hangs_is_given_up_on_within_its_bound(silent_port: int) -> None:
    url = f"http://127.0.0.1:{silent_port}"
    began = time.monotonic()
    with pytest.raises(
        AuditPreflightError, match=r"schema.registry.url: .* within 5s, found "
    ) as c:
        check_registry(url)
    assert isinstance(unreachable_cause(c.value), RegistryConnectionError)
    took = time.monotonic() - began
    assert REGISTRY_TIMEOUT_S - 0.5 <= took < REGISTRY_TIMEOUT_S + 5, took


def test_the_embedded_iceberg_catalog_answers(registry_url: str, tmp_path: Path) -> None:
    config = _config(
        tmp_path, registry_url, warehouse_format="iceberg", warehouse_path=str(tmp_path / "w")
    )
    check_catalog(config)
    assert (tmp_path / "w" / "_iceberg_catalog.db").is_file()


def test_a_catalog_database_that_is_down_is_unreachable_naming_its_uri(
    registry_url: str, tmp_path: Path
) -> None:
    port = free_port()
    config = _config(
        tmp_path,
        registry_url,
        warehouse_format="iceberg",
        warehouse_path=str(tmp_path / "w"),
        iceberg_catalog_uri=f"postgresql+psycopg2://sluice:secret@127.0.0.1:{port}/iceberg",
    )
    with pytest.raises(AuditPreflightError) as caught:
        check_catalog(config)
    assert isinstance(unreachable_cause(caught.value), CatalogUnavailableError)
    message = str(caught.value)
    assert message.startswith("iceberg.catalog.uri: expected the Iceberg catalog to answer, ")
    assert f"postgresql+psycopg2://sluice:***@127.0.0.1:{port}/iceberg" in message
    assert "secret" not in message


def test_a_parquet_table_must_be_a_directory_if_it_is_there(tmp_path: Path) -> None:
    check_table_dir(str(tmp_path / "not-loaded-yet"))  # no load yet: the audit says so later
    check_table_dir(f"file://{tmp_path}")
    check_table_dir("hdfs://namenode:8020/warehouse/events")  # left to Spark
    (tmp_path / "events").write_text("not a table")
    with pytest.raises(AuditPreflightError) as caught:
        check_table_dir(str(tmp_path / "events"))
    assert str(caught.value) == (
        "warehouse.table: expected a directory the driver can read, found "
        f"{tmp_path / 'events'} not a directory"
    )


def test_the_report_dir_is_created_and_must_be_writable(tmp_path: Path) -> None:
    report = tmp_path / "a" / "report"
    check_report_dir(f"file://{report}")
    assert report.is_dir() and list(report.iterdir()) == []  # the probe is gone
    (tmp_path / "file").write_text("x")
    with pytest.raises(AuditPreflightError) as caught:
        check_report_dir(str(tmp_path / "file" / "report"))
    assert str(caught.value).startswith(
        f"report.dir: expected a directory the driver can write, found {tmp_path / 'file'}"
        "/report refusing it: "
    )


def test_the_registry_is_checked_first(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    url = f"http://127.0.0.1:{free_port()}"
    config = _config(tmp_path, url, report_dir=str(tmp_path / "file" / "report"))
    with pytest.raises(AuditPreflightError, match="schema.registry.url"):
        preflight(config)


def test_run_audit_fails_on_a_silent_registry_as_a_silent_service(tmp_path: Path) -> None:
    """Before its SparkSession: the AuditError's chain keeps the registry's connection error,
    which the CLI turns into exit 3 (``unreachable_cause``)."""
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AuditError) as caught:
        run_audit(_config(tmp_path, url), progress=lambda _: None, print_report=False)
    assert str(caught.value).startswith(
        f"schema.registry.url: expected the schema registry at {url}"
    )
    assert isinstance(unreachable_cause(caught.value), RegistryConnectionError)
    assert not (tmp_path / "report").exists()  # failed before the report dir was even probed


def test_run_audit_fails_on_an_unwritable_report_dir_as_a_failure(
    registry_url: str, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    config = _config(tmp_path, registry_url, report_dir=str(tmp_path / "file" / "report"))
    with pytest.raises(
        AuditError, match="report.dir: expected a directory the driver can write"
    ) as caught:
        run_audit(config, progress=lambda _: None, print_report=False)
    assert unreachable_cause(caught.value) is None  # exit 1: nothing was silent
