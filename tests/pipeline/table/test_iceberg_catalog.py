"""The ``iceberg.*`` keys: defaults, per-topic tables, pass-through, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.pipeline.table.iceberg_catalog import (
    CATALOG_FILE,
    CONFIG_DEF,
    CONNECT_TIMEOUT_S,
    CatalogUnavailableError,
    IcebergConfig,
    IcebergConfigError,
    with_connect_timeout,
)
from sluice.testing.net import free_port


def test_defaults_are_the_embedded_sqlite_catalog_beside_the_warehouse(tmp_path: Path) -> None:
    warehouse = (tmp_path / "wh").as_uri()
    config = IcebergConfig.from_properties({"topics": "ignored"}, warehouse)
    assert config.catalog_properties == {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'wh' / CATALOG_FILE}",
        "warehouse": warehouse,
    }
    assert config.identifier("page_views") == "sluice.page_views"
    assert config.errors_identifier("page_views") == "sluice.page_views_errors"
    assert str(config.partition_by("page_views")) == "day(timestamp)"
    assert config.auto_create and config.evolve_schema
    config.open_catalog().create_namespace_if_not_exists("sluice")
    assert (tmp_path / "wh" / CATALOG_FILE).is_file()


def test_per_topic_names_partitioning_and_pass_through(tmp_path: Path) -> None:
    config = IcebergConfig.from_properties(
        {
            "iceberg.table.page_views.name": "web.views",
            "iceberg.table.page_views.partition-by": "hour(event_time), bucket(8, user_id)",
            "iceberg.tables.default-partition-by": "day(event_time)",
            "iceberg.catalog.s3.endpoint": "http://127.0.0.1:9000",
            "iceberg.tables.evolve-schema-enabled": "false",
        },
        str(tmp_path),
    )
    assert config.identifier("page_views") == "web.views"
    assert config.identifier("clicks") == "sluice.clicks"
    assert str(config.partition_by("page_views")) == "hour(event_time), bucket(8, user_id)"
    assert str(config.partition_by("clicks")) == "day(event_time)"
    assert config.catalog_properties["s3.endpoint"] == "http://127.0.0.1:9000"
    assert not config.evolve_schema


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"iceberg.catalog.type": "nessie"}, "iceberg.catalog.type: expected"),
        ({"iceberg.tables.default-partition-by": "week(ts)"}, "week(ts)"),
        ({"iceberg.table.t.name": "plain"}, "expected <namespace>.<table>, found 'plain'"),
        ({"iceberg.table.t.partition": "day(ts)"}, "expected iceberg.table.<topic>.name"),
        ({"iceberg.tabels.default-namespace": "x"}, "iceberg.tabels.default-namespace"),
        ({"iceberg.catalog.type": "rest"}, "iceberg.catalog.uri: expected a value for a rest"),
    ],
)
def test_refusals_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(IcebergConfigError, match=_literal(message)):
        IcebergConfig.from_properties(props, "/tmp/wh")


def test_a_warehouse_on_an_object_store_needs_a_catalog_uri() -> None:
    with pytest.raises(IcebergConfigError, match="the embedded SQLite catalog needs a local file"):
        IcebergConfig.from_properties({}, "s3://bucket/wh")


def test_an_unreachable_postgres_is_unavailable_and_hides_the_password() -> None:
    uri = f"postgresql+psycopg2://u:secret@127.0.0.1:{free_port()}/db"
    config = IcebergConfig.from_properties({"iceberg.catalog.uri": uri}, "/tmp/wh")
    with pytest.raises(CatalogUnavailableError, match="did not answer") as caught:
        config.open_catalog()
    assert "secret" not in str(caught.value) and "u:***@" in str(caught.value)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("postgresql+psycopg2://u@h:5432/db", f"postgresql+psycopg2://u@h:5432/db?connect_timeout={CONNECT_TIMEOUT_S}"),
        ("postgresql://h/db?sslmode=require", f"postgresql://h/db?sslmode=require&connect_timeout={CONNECT_TIMEOUT_S}"),
        ("postgres://h/db?connect_timeout=3", "postgres://h/db?connect_timeout=3"),
        ("sqlite:////tmp/wh/_iceberg_catalog.db", "sqlite:////tmp/wh/_iceberg_catalog.db"),
    ],
)  # fmt: skip
def test_a_postgresql_uri_gets_libpq_s_connect_timeout_unless_it_sets_one(
    uri: str, expected: str
) -> None:
    assert with_connect_timeout(uri) == expected


def test_every_key_is_documented() -> None:
    table = CONFIG_DEF.to_markdown()
    for key in CONFIG_DEF.keys:
        assert f"`{key}`" in table


def _literal(text: str) -> str:
    import re

    return re.escape(text)
