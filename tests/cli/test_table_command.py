"""``sluice table``: describe, compact, expire-snapshots, remove-orphans, and exit statuses,
against a real SQLite catalog (and a PostgreSQL URL nothing answers on)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog

from sluice.cli.table_command import main
from sluice.pipeline.table.iceberg_catalog import CONNECT_TIMEOUT_S, IcebergConfig
from sluice.pipeline.table.iceberg_commit import IcebergTable, snapshot_offsets
from sluice.pipeline.table.partition_spec import PartitionBy
from sluice.testing.net import free_port
from tests.pipeline.table.iceberg_rows import typed_rows

DAY = PartitionBy.parse("day(event_time)")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "load.properties"
    path.write_text(
        f"warehouse.path={tmp_path / 'warehouse'}\ntopics=clicks\n"
        "kafka.bootstrap.servers=127.0.0.1:9\niceberg.tables.default-namespace=web\n",
        encoding="utf-8",
    )
    return path


def loaded(tmp_path: Path, runs: int) -> Catalog:
    config = IcebergConfig.from_properties(
        {"iceberg.tables.default-namespace": "web"}, (tmp_path / "warehouse").as_uri()
    )
    catalog: Catalog = config.open_catalog()
    for run in range(runs):
        rows = typed_rows("clicks", 1, run * 20, 20)
        planned = IcebergTable(catalog, "web.clicks").plan(rows.schema, DAY)
        files = planned.writer.write(rows, f"run{run}")
        planned.commit(files, {"clicks": {0: run * 20 + 20}}, f"run{run}")
    return catalog


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["table", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_lists_the_snapshots_with_their_offsets(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path, 2)
    code, out, _ = run(capsys, "describe", "--config", str(config_file), "--topic", "clicks")
    assert code == 0
    assert "table web.clicks" in out and "spec event_time_day: day(event_time)" in out
    assert 'run1 {"clicks":{"0":40}}' in out and 'run0 {"clicks":{"0":20}}' in out
    code, out, _ = run(capsys, "describe", "--config", str(config_file), "--table", "web.clicks",
                       "--json")  # fmt: skip
    document = json.loads(out)
    assert [s["rows"] for s in document["snapshots"]] == [40, 20]
    assert document["snapshots"][0]["files"] == 6


def test_compact_then_expire_then_remove_orphans(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = loaded(tmp_path, 4)
    files_before = len(list(catalog.load_table("web.clicks").scan().plan_files()))
    offsets = snapshot_offsets(catalog.load_table("web.clicks"))[1]
    code, out, _ = run(capsys, "compact", "--config", str(config_file), "--topic", "clicks")
    assert code == 0 and f"rewrote {files_before} files of 3 partitions into 3" in out
    table = catalog.load_table("web.clicks")
    assert len(list(table.scan().plan_files())) == 3
    assert table.scan().to_arrow().num_rows == 80
    assert snapshot_offsets(table)[1] == offsets
    code, out, _ = run(capsys, "expire-snapshots", "--config", str(config_file),
                       "--topic", "clicks", "--older-than-hours", "0")  # fmt: skip
    assert code == 0 and "expired 4 snapshots" in out
    code, out, _ = run(capsys, "remove-orphans", "--config", str(config_file),
                       "--topic", "clicks", "--older-than-hours", "0")  # fmt: skip
    assert code == 0 and "removed" in out
    table = catalog.load_table("web.clicks")
    assert table.scan().to_arrow().num_rows == 80
    assert len(table.metadata.snapshots) == 1


def test_exit_statuses(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded(tmp_path, 1)
    code, _, err = run(capsys, "describe", "--config", str(config_file), "--table", "web.nope")
    assert code == 1 and "no table web.nope" in err
    code, _, err = run(capsys, "describe", "--config", str(config_file), "--topic", "clicks",
                       "--override", "iceberg.tables.default-partition-by=week(x)")  # fmt: skip
    assert code == 2 and "iceberg.tables.default-partition-by" in err
    code, _, err = run(capsys, "describe", "--topic", "clicks")
    assert code == 2 and "warehouse.path" in err
    code, _, err = run(capsys, "describe", "--config", str(tmp_path / "missing.properties"),
                       "--topic", "clicks")  # fmt: skip
    assert code == 2 and "does not exist" in err
    dead = f"postgresql+psycopg2://postgres@127.0.0.1:{free_port()}/catalog"
    code, _, err = run(capsys, "describe", "--config", str(config_file), "--topic", "clicks",
                       "--override", f"iceberg.catalog.uri={dead}")  # fmt: skip
    assert code == 3 and "did not answer" in err


def test_a_catalog_that_never_answers_exits_3_after_one_connect_timeout(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PostgreSQL catalog's port accepts and never answers (a hung or blackholed server):
    with the URI's default ``connect_timeout`` (``CONNECT_TIMEOUT_S``) the command gives up
    after one timeout — not the two pyiceberg's catalog set-up would take — and exits 3 in
    one line naming the catalog, the password hidden."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    silent = f"postgresql+psycopg2://sluice:secret@127.0.0.1:{port}/catalog"
    try:
        started = time.monotonic()
        code, _, err = run(capsys, "describe", "--config", str(config_file), "--topic",
                           "clicks", "--override", f"iceberg.catalog.uri={silent}")  # fmt: skip
        took = time.monotonic() - started
    finally:
        listener.close()
    assert code == 3, err
    assert err.strip() == (
        f"sluice table describe: catalog sluice (postgresql+psycopg2://sluice:***@127.0.0.1:"
        f"{port}/catalog?connect_timeout={CONNECT_TIMEOUT_S}) did not answer: OperationalError: "
        f'connection to server at "127.0.0.1", port {port} failed: timeout expired'
    )
    assert took < 2 * CONNECT_TIMEOUT_S, f"gave up after {took:.1f}s"
