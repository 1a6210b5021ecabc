"""The Iceberg catalog and table settings of a load, declared once, and the catalog they open.

Key names follow Iceberg's Kafka Connect sink (``iceberg.catalog.*``, ``iceberg.tables.*``,
``iceberg.table.<name>.*``); ``CONFIG_DEF`` declares them with ``sluice.common.config_def``, so
they are parsed, checked and documented from one declaration (the load adds them to its own).

Catalogs
========
* ``sql`` (the default): pyiceberg's ``SqlCatalog``. Without ``iceberg.catalog.uri`` it is a
  SQLite file **beside the warehouse**, ``<warehouse>/_iceberg_catalog.db`` — no server; the
  ``_`` keeps it out of readers' globs. A warehouse on an object store needs an explicit
  ``iceberg.catalog.uri``: SQLite needs a local file, and several machines need a server.
* PostgreSQL: the same ``sql`` catalog with ``iceberg.catalog.uri=postgresql+psycopg2://user:
  pw@host:5432/db`` (Debian's ``postgresql``; tested, ``sluice.testing.postgres``). The SQL
  catalog's commit is ``UPDATE iceberg_tables SET metadata_location = new WHERE ... AND
  metadata_location = old`` — a compare-and-swap on one row, atomic in both databases.
  **Connect timeout**: libpq waits for a connection without limit by default, so a catalog
  host that drops packets (or a port that accepts and never answers) would hang the load;
  ``open_catalog`` adds libpq's own ``connect_timeout=10`` (``CONNECT_TIMEOUT_S``) to a
  PostgreSQL URI that sets none. libpq applies it to each address the host name resolves to
  and to the whole handshake (TCP, TLS negotiation, start-up), so one connection gives up
  within 10 s per address; the URI's own ``?connect_timeout=N`` wins (libpq treats values
  under 2 as 2). Every connection the catalog opens later has the same bound; a query on a
  connection that was answering and then went silent has none (the kernel's TCP timeouts).
* ``rest``, ``hive``, ``glue``: passed to pyiceberg's ``load_catalog`` unchanged, with every
  ``iceberg.catalog.<property>``. **Untested** in Sluice (no such service on the test machine).

Every other ``iceberg.catalog.<property>`` is a pyiceberg catalog property, passed through
(``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region`` for a warehouse
on ``s3://``).

Tables
======
One table per topic, ``<iceberg.tables.default-namespace>.<topic>`` unless
``iceberg.table.<topic>.name`` names another (``db.page_views``); its error table is the
sibling ``<name>_errors``. ``iceberg.table.<topic>.partition-by`` overrides
``iceberg.tables.default-partition-by`` for one topic.

``IcebergConfig`` is immutable and thread-safe; ``open_catalog`` returns a new pyiceberg
catalog per call (pyiceberg's SQL catalog holds an SQLAlchemy engine: one per thread is safe).
A catalog that does not answer raises ``CatalogUnavailableError``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sluice.common.config_def import Check, ConfigDef, OneOf, Type
from sluice.pipeline.table.partition_spec import (
    DEFAULT_PARTITION_BY,
    InvalidPartitionByError,
    PartitionBy,
)

# pyiceberg's catalog only where one is opened: a Parquet load parses its configuration (which
# declares the iceberg.* keys) without paying its import (about 0.4 s at every start).
if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "CATALOG_FILE",
    "CONNECT_TIMEOUT_S",
    "CONFIG_DEF",
    "CatalogUnavailableError",
    "IcebergConfig",
    "IcebergConfigError",
    "is_unavailable",
    "one_line",
    "redacted",
    "with_connect_timeout",
]

CATALOG_FILE = "_iceberg_catalog.db"
"""The embedded SQLite catalog's file name inside the warehouse."""

CONNECT_TIMEOUT_S = 10
"""libpq's ``connect_timeout`` for a PostgreSQL catalog whose URI sets none (module doc)."""

ERRORS_SUFFIX = "_errors"
_TABLE_PREFIX = "iceberg.table."
_TABLE_KEYS = ("name", "partition-by")


class IcebergConfigError(ValueError):
    """A bad ``iceberg.*`` key: ``"<key>: expected ..., found ..."``."""


class CatalogUnavailableError(RuntimeError):
    """The catalog (its database or server) did not answer."""


def _partition_by(value: str) -> str | None:
    try:
        PartitionBy.parse(value)
    except InvalidPartitionByError as exc:
        return str(exc)
    return None


def _identifier(value: str) -> str | None:
    parts = value.split(".")
    if len(parts) < 2 or not all(parts):
        return f"expected <namespace>.<table>, found {value!r}"
    return None


CONFIG_DEF = (
    ConfigDef(error=IcebergConfigError, what="iceberg config")
    .define(
        "iceberg.catalog", Type.STRING, "sluice",
        doc="The catalog's name (pyiceberg's catalog name; the SQL catalog's `catalog_name`).",
    )
    .define(
        "iceberg.catalog.type", Type.STRING, "sql", OneOf("sql", "rest", "hive", "glue"),
        doc="sql: pyiceberg's SQL catalog (SQLite or PostgreSQL, tested). rest, hive, glue: "
        "passed to pyiceberg as they are, untested here.",
    )
    .define(
        "iceberg.catalog.uri", Type.STRING, None,
        default_doc="sqlite:///<warehouse.path>/_iceberg_catalog.db",
        doc="The catalog's URI: an SQLAlchemy URL for sql (`postgresql+psycopg2://user:pw@host/db` "
        "for PostgreSQL), the server's for rest/hive. Required when the warehouse is not local.",
    )
    .define(
        "iceberg.catalog.warehouse", Type.STRING, None, default_doc="warehouse.path",
        doc="Where new tables' data and metadata go (`file://`, a path or `s3://bucket/prefix`).",
    )
    .define(
        "iceberg.tables.default-namespace", Type.STRING, "sluice",
        doc="The namespace of each topic's table, `<namespace>.<topic>`; created if missing.",
    )
    .define(
        "iceberg.tables.default-partition-by", Type.STRING, DEFAULT_PARTITION_BY,
        Check("Iceberg transforms, comma-separated", _partition_by),
        doc="The partition spec of new tables: `day(f)`, `hour(f)`, `month(f)`, `year(f)`, "
        "`identity(f)`, `bucket(N, f)`, `truncate(W, f)` over top-level fields, "
        "comma-separated. The default is the day of the Kafka timestamp; `day(event_time)` "
        "partitions by event time.",
    )
    .define(
        "iceberg.tables.auto-create-enabled", Type.BOOLEAN, True,
        doc="Create a topic's table (and namespace) on its first load; false fails the run "
        "instead.",
    )
    .define(
        "iceberg.tables.evolve-schema-enabled", Type.BOOLEAN, True,
        doc="A compatible new schema adds optional columns and widens types in the data's own "
        "commit; false fails the run on any schema change. Incompatible changes always fail.",
    )
    .family(
        "iceberg.catalog.<property>",
        "Any other pyiceberg catalog property, passed through (`s3.endpoint`, `s3.region`, ...).",
        prefix="iceberg.catalog.",
    )
    .family(
        "iceberg.table.<topic>.name / .partition-by",
        "Per topic: the table's `<namespace>.<table>` name, and its partition spec.",
        prefix=_TABLE_PREFIX,
    )
)  # fmt: skip
"""Every ``iceberg.*`` key, declared once."""


@dataclass(frozen=True)
class IcebergConfig:
    """The parsed ``iceberg.*`` settings; each key's meaning is its ``CONFIG_DEF`` doc.

    ``catalog_properties`` are the properties handed to pyiceberg's ``load_catalog`` (``type``,
    ``uri``, ``warehouse`` and the passed-through ones)."""

    catalog_name: str
    catalog_properties: dict[str, str]
    namespace: str = "sluice"
    default_partition_by: PartitionBy = field(
        default_factory=lambda: PartitionBy.parse(DEFAULT_PARTITION_BY)
    )
    auto_create: bool = True
    evolve_schema: bool = True
    table_names: dict[str, str] = field(default_factory=dict)  # topic -> namespace.table
    partition_by_topic: dict[str, PartitionBy] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], warehouse: str) -> IcebergConfig:
        """Parse the ``iceberg.*`` keys of ``props`` (other keys are ignored: the caller checks
        them against its own declaration); ``warehouse`` is the load's warehouse URI or path.
        Raises ``IcebergConfigError``."""
        ours = {k: v for k, v in props.items() if k.startswith("iceberg.")}
        CONFIG_DEF.check_known(ours)

        def get(key: str) -> Any:
            return CONFIG_DEF.parse_key(ours, key)

        kind = get("iceberg.catalog.type")
        where = get("iceberg.catalog.warehouse") or warehouse
        uri = get("iceberg.catalog.uri")
        if uri is None:
            if kind != "sql":
                raise IcebergConfigError(
                    f"iceberg.catalog.uri: expected a value for a {kind} catalog, found none"
                )
            local = where[len("file://") :] if where.startswith("file://") else where
            if "://" in local:
                raise IcebergConfigError(
                    "iceberg.catalog.uri: expected a value when the warehouse is not local "
                    f"(the embedded SQLite catalog needs a local file), found none for {where}"
                )
            uri = "sqlite:///" + posixpath.join(local, CATALOG_FILE)
        declared = set(CONFIG_DEF.keys)
        passed = {
            k[len("iceberg.catalog.") :]: v.strip()
            for k, v in ours.items()
            if k.startswith("iceberg.catalog.") and k not in declared
        }
        names, partitioning = _per_table(ours)
        return cls(
            catalog_name=get("iceberg.catalog"),
            catalog_properties={**passed, "type": kind, "uri": uri, "warehouse": where},
            namespace=get("iceberg.tables.default-namespace"),
            default_partition_by=PartitionBy.parse(get("iceberg.tables.default-partition-by")),
            auto_create=get("iceberg.tables.auto-create-enabled"),
            evolve_schema=get("iceberg.tables.evolve-schema-enabled"),
            table_names=names,
            partition_by_topic=partitioning,
        )

    def identifier(self, topic: str) -> str:
        """The table of ``topic``: ``iceberg.table.<topic>.name`` or ``<namespace>.<topic>``."""
        return self.table_names.get(topic, f"{self.namespace}.{topic}")

    def errors_identifier(self, topic: str) -> str:
        """The error table of ``topic``: its table's name plus ``_errors``."""
        return self.identifier(topic) + ERRORS_SUFFIX

    def partition_by(self, topic: str) -> PartitionBy:
        return self.partition_by_topic.get(topic, self.default_partition_by)

    def open_catalog(self) -> Catalog:
        """A new pyiceberg catalog of these settings. Raises ``CatalogUnavailableError`` when
        its database or server does not answer."""
        from pyiceberg.catalog import load_catalog

        properties = dict(self.catalog_properties)
        if properties["type"] == "sql":
            properties.setdefault("init_catalog_tables", "true")
            uri = properties["uri"] = with_connect_timeout(properties["uri"])
            if uri.startswith("sqlite:///"):  # the directory of the file must exist
                import os

                os.makedirs(os.path.dirname(uri[len("sqlite:///") :]) or ".", exist_ok=True)
        try:
            if properties["type"] == "sql" and _is_postgres(properties["uri"]):
                _probe(properties["uri"])
            return load_catalog(self.catalog_name, **properties)
        except Exception as exc:  # SQLAlchemy's OperationalError, requests' ConnectionError...
            if is_unavailable(exc):
                raise CatalogUnavailableError(
                    f"catalog {self.catalog_name} ({redacted(properties['uri'])}) did not "
                    f"answer: {one_line(exc)}"
                ) from exc
            raise


def with_connect_timeout(uri: str) -> str:
    """``uri`` with ``connect_timeout=CONNECT_TIMEOUT_S`` when it is a PostgreSQL URI that
    sets none (module doc); any other URI as it is."""
    if not _is_postgres(uri):
        return uri
    from urllib.parse import parse_qsl, urlsplit

    if any(k == "connect_timeout" for k, _ in parse_qsl(urlsplit(uri).query)):
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}connect_timeout={CONNECT_TIMEOUT_S}"


def _is_postgres(uri: str) -> bool:
    return uri.partition("://")[0].split("+")[0].lower() in ("postgresql", "postgres")


def _probe(uri: str) -> None:
    """Connect once and close: pyiceberg's ``SqlCatalog`` takes a failed first query for
    "no catalog tables yet" and connects again to create them, which would double the
    connect timeout; one probe first bounds a silent server to one timeout."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    engine = create_engine(uri, poolclass=NullPool)
    try:
        engine.connect().close()
    finally:
        engine.dispose()


def _per_table(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, PartitionBy]]:
    names: dict[str, str] = {}
    partitioning: dict[str, PartitionBy] = {}
    for key, value in props.items():
        if not key.startswith(_TABLE_PREFIX):
            continue
        topic, _, what = key[len(_TABLE_PREFIX) :].rpartition(".")
        if not topic or what not in _TABLE_KEYS:
            raise IcebergConfigError(
                f"{key}: expected iceberg.table.<topic>.name or .partition-by, found {key!r}"
            )
        value = value.strip()
        if what == "name":
            if (problem := _identifier(value)) is not None:
                raise IcebergConfigError(f"{key}: {problem}")
            names[topic] = value
        else:
            try:
                partitioning[topic] = PartitionBy.parse(value)
            except InvalidPartitionByError as exc:
                raise IcebergConfigError(f"{key}: {exc}") from None
    return names, partitioning


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means "no answer" (connection refused, timeout, database down)."""
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(
        names
        & {
            "OperationalError",
            "ConnectionError",
            "ConnectionRefusedError",
            "TimeoutError",
            "InterfaceError",
            "ConnectTimeout",
            "ReadTimeout",
        }  # fmt: skip
    )


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its type and the driver's own message (SQLAlchemy's wrapper adds
    the statement and a link on further lines; libpq's hints are joined with ``; ``)."""
    cause = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return f"{type(cause).__name__}: {'; '.join(lines) or 'no message'}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def redacted(uri: str) -> str:
    """``uri`` without a password (``user:***@host``)."""
    scheme, sep, rest = uri.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return uri
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
