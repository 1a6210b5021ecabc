"""The nightly load into Iceberg tables with the other catalog and the other store: the
catalog in PostgreSQL (Debian's, started here), the table's data on ``s3://`` (moto's server on
127.0.0.1, the stand-in: no S3 server is packaged for this machine), and a PostgreSQL catalog
that never answers — the load gives up within libpq's connect timeout and exits 3 naming it.

The same invariants as ``test_iceberg_load.py`` (every offset once, the snapshot's offsets the
broker's ends, one file set per event day), through the same load; fewer records, since the
20,000-record load there proves the count."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from sluice.cli.load_command import load_main
from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.run import run_load
from sluice.pipeline.table.iceberg_catalog import CATALOG_FILE
from sluice.testing.broker import create_topic
from sluice.testing.s3 import S3Server
from tests.pipeline.load.test_iceberg_load import (
    _assert_by_event_day,
    _assert_exactly_once,
    _produce,
    _props,
    _table,
)
from tests.pipeline.table.iceberg_services import postgres, postgres_url, s3_server

pytestmark = pytest.mark.broker

__all__ = ["postgres", "postgres_url", "s3_server"]

RECORDS = 3_000
SILENT_TIMEOUT_S = 3  # the URI's connect_timeout in the silent-catalog test
DEAD_SERVICE_BOUND_S = 30.0  # the exit contract's bound (tests/cli/test_exit_contract.py)


def test_load_with_the_catalog_in_postgresql(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811 — the fixture
) -> None:
    """Two loads with ``iceberg.catalog.uri`` a PostgreSQL database: the table and its
    snapshots are there (no SQLite file beside the warehouse), every offset once, each day's
    rows in its partition; the second load one more snapshot."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 3)
    _produce(bootstrap, registry_url, topic_name, 0, RECORDS)
    warehouse = tmp_path / "wh"
    props = {**_props(bootstrap, registry_url, topic_name, warehouse),
             "iceberg.catalog.uri": postgres_url}  # fmt: skip

    first = run_load(LoadConfig.from_properties(props), spark)
    assert (first.status, first.total_rows, first.total_errors) == ("published", RECORDS, 0)
    _assert_exactly_once(props, topic_name, bootstrap, 3)
    table = _table(props, topic_name)
    _assert_by_event_day(table, range(RECORDS))
    assert not (warehouse / CATALOG_FILE).exists()
    assert table.location().startswith(warehouse.as_uri())
    iceberg = LoadConfig.from_properties(props).iceberg
    assert iceberg is not None
    errors = iceberg.open_catalog().load_table(iceberg.errors_identifier(topic_name))
    assert _catalog_rows(postgres_url) == {
        f"sluice.{topic_name}": table.metadata_location,
        f"sluice.{topic_name}_errors": errors.metadata_location,
    }

    _produce(bootstrap, registry_url, topic_name, RECORDS, 300)
    more = run_load(LoadConfig.from_properties(props), spark)
    assert (more.status, more.total_rows) == ("published", 300)
    table = _table(props, topic_name)
    assert len(table.metadata.snapshots) == 2
    _assert_exactly_once(props, topic_name, bootstrap, 3)
    _assert_by_event_day(table, range(RECORDS + 300))


def _catalog_rows(url: str) -> dict[str, str]:
    """``{namespace.table: metadata_location}`` of the SQL catalog's ``iceberg_tables``."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT table_namespace, table_name, metadata_location FROM iceberg_tables")
            ).all()
    finally:
        engine.dispose()
    return {f"{ns}.{name}": location for ns, name, location in rows}


def test_load_with_the_table_on_s3(
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    topic_name: str,
    tmp_path: Path,
    s3_server: S3Server,  # noqa: F811 — the fixture
) -> None:
    """``iceberg.catalog.warehouse=s3://...``: the executors and the driver write and check
    the data files on the S3 server (nothing of the table on the local disk but the catalog
    and the run report), every offset once, each day's rows in its partition."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic_name, 3)
    _produce(bootstrap, registry_url, topic_name, 0, RECORDS)
    bucket = s3_server.create_bucket(f"load-{topic_name[-6:]}")
    props = {
        **_props(bootstrap, registry_url, topic_name, tmp_path / "wh"),
        "iceberg.catalog.uri": "sqlite:///" + str(tmp_path / "catalog.db"),
        "iceberg.catalog.warehouse": f"{bucket}/tables",
        **{f"iceberg.catalog.{k}": v for k, v in s3_server.iceberg_properties().items()},
    }

    report = run_load(LoadConfig.from_properties(props), spark)
    assert (report.status, report.total_rows, report.total_errors) == ("published", RECORDS, 0)
    _assert_exactly_once(props, topic_name, bootstrap, 3)
    table = _table(props, topic_name)
    assert table.location().startswith(f"{bucket}/tables/")
    data = [t.file.file_path for t in table.scan().plan_files()]
    assert data and all(p.startswith(f"{table.location()}/data/") for p in data)
    _assert_by_event_day(table, range(RECORDS))
    listed = s3_server.filesystem().get_file_info(
        pafs.FileSelector(bucket.removeprefix("s3://"), recursive=True)
    )
    on_s3 = {f"s3://{i.path}" for i in listed if i.type == pafs.FileType.File}
    assert set(data) <= on_s3
    assert not list(tmp_path.rglob("*.parquet")), "a data file landed on the local disk"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts TCP connections (the kernel's backlog) and never
    answers a byte: a catalog host whose server hangs, as a blackholed one would."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_silent_postgresql_catalog_fails_the_load_with_exit_3_naming_it(
    spark: Any,
    kafka_broker: Any,
    topic_name: str,
    tmp_path: Path,
    silent_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The catalog's port accepts and never answers: the load gives up after the URI's
    ``connect_timeout`` (one connection: no second attempt doubles it), exits 3 in one line
    naming the catalog and its URI without the password, and creates nothing."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    uri = (f"postgresql+psycopg2://sluice:secret@127.0.0.1:{silent_port}/catalog"
           f"?connect_timeout={SILENT_TIMEOUT_S}")  # fmt: skip
    config = tmp_path / "load.properties"
    config.write_text(
        f"kafka.bootstrap.servers={kafka_broker.bootstrap}\ntopics={topic_name}\n"
        f"warehouse.path={tmp_path / 'wh'}\ntable.format=iceberg\niceberg.catalog.uri={uri}\n"
    )
    capsys.readouterr()
    started = time.monotonic()
    assert load_main(["--config", str(config)]) == 3
    took = time.monotonic() - started
    err = capsys.readouterr().err.strip().splitlines()
    failure = err[-1]
    # "planning" (the plan opens the catalog) or "before the load" (a preflight doing it)
    assert re.match(r"sluice load: FAILED: iceberg catalog, [a-z ]+: catalog sluice \(", failure)
    assert f"sluice:***@127.0.0.1:{silent_port}/catalog" in failure
    assert "timeout expired" in failure and "secret" not in "\n".join(err)
    assert took < DEAD_SERVICE_BOUND_S, f"gave up after {took:.1f}s"
    assert not list((tmp_path / "wh").rglob("*.parquet"))
