"""``AuditConfig``: the keys of ``conf/audit.properties``, and the ``--until`` time.

The keys are declared once, in :data:`CONFIG_DEF`; the "audit" section of
``docs/configuration.md`` is generated from it.

The warehouse tier is the nightly load's Parquet table(s) (``warehouse.table``), or with
``warehouse.format=iceberg`` its Iceberg tables: ``warehouse.path`` and the load's own
``iceberg.*`` keys name the catalog and each audited topic's table
(``sluice.pipeline.table.iceberg_catalog``), so the audit reads the tables the load wrote.
The ``iceberg.*`` keys are checked by that module's declaration when the configuration is
parsed, in the base install too: pyiceberg (the ``spark`` extra) is imported only when a
catalog is opened.

``conf/audit.properties`` explains each key at length. Aliases are ``[A-Za-z0-9._-]+`` (they
are the lineage header's, ``sluice.pipeline.lineage``), topic names too. Every malformed key
raises :class:`AuditConfigError` naming the key, what was expected and what was found (every
declared key parsed through ``CONFIG_DEF``); a blank value (``key=``) is the default.

A parsed :class:`AuditConfig` is immutable (its dicts are never changed after parsing);
thread-safe. This module imports neither Spark nor pyarrow: ``sluice audit`` checks its
configuration in the base install.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.common.config_def import POSITIVE, REQUIRED, ConfigDef, OneOf, Type
from sluice.common.options import required
from sluice.common.paths import to_uri
from sluice.pipeline.audit.producer import DEFAULT_AUDIT_TOPIC, DEFAULT_WINDOW_MS
from sluice.pipeline.lineage import LineageError, check_cluster_alias

__all__ = [
    "TIERS",
    "WAREHOUSE_CUTOFFS",
    "WAREHOUSE_FORMATS",
    "AuditConfig",
    "AuditConfigError",
    "KafkaCluster",
    "parse_time",
]

TIERS = ("live", "offline", "warehouse")
"""The tiers the audit can count, in data-path order (the producers' reports come first)."""

WAREHOUSE_CUTOFFS = ("load", "audit")
WAREHOUSE_FORMATS = ("parquet", "iceberg")
_ICEBERG_PREFIX = "iceberg."
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


class AuditConfigError(ValueError):
    """A configuration key is missing or malformed; the message names the key."""


CONFIG_DEF = (
    ConfigDef(error=AuditConfigError, what="audit config")
    .define(
        "live.clusters", Type.LIST, (), default_doc="(required)",
        doc="Live cluster aliases, comma-separated (the mirror's `clusters`); the producers' "
        "counts are read from each one's audit topic.",
    )
    .define(
        "offline.bootstrap.servers", Type.STRING, None, default_doc="(none: no offline tier)",
        doc="The cluster the mirror fills (its `target.bootstrap.servers`).",
    )
    .define(
        "offline.alias", Type.STRING, "offline",
        doc="The offline cluster's alias (the mirror's `target.alias`).",
    )
    .define(
        "warehouse.table", Type.LIST, (), default_doc="(none: no warehouse tier)",
        doc="The nightly load's table(s), paths or URIs, comma-separated.",
    )
    .define(
        "warehouse.format", Type.STRING, "parquet", OneOf(*WAREHOUSE_FORMATS),
        doc="The load's `table.format`: `parquet` counts the tables of `warehouse.table`; "
        "`iceberg` the current snapshot of each audited topic's Iceberg table, named and "
        "found by `warehouse.path` and the load's `iceberg.*` keys.",
    )
    .define(
        "warehouse.path", Type.STRING, None, default_doc="(none)",
        doc="With `warehouse.format=iceberg`: the load's `warehouse.path` (the embedded "
        "catalog's file and the run reports are under it); required then, refused otherwise.",
    )
    .define(
        "warehouse.cutoff", Type.STRING, "load", OneOf(*WAREHOUSE_CUTOFFS),
        doc="`load`: judge the warehouse up to its newest load's start; `audit`: at the cutoff.",
    )
    .define(
        "audit.topic", Type.STRING, DEFAULT_AUDIT_TOPIC,
        doc="Where the producers report, on each live cluster; never audited itself.",
    )
    .define(
        "window.ms", Type.INT, DEFAULT_WINDOW_MS, POSITIVE,
        doc="The audit window, a multiple of the producers' window.",
    )
    .define(
        "grace.ms", Type.INT, None, POSITIVE, default_doc="window.ms",
        doc="A window is judged once its end + `grace.ms` <= the cutoff.",
    )
    .define(
        "lookback.ms", Type.INT, None, POSITIVE, default_doc="(none: every window)",
        doc="Only windows starting this long before the cutoff.",
    )
    .define(
        "topics", Type.LIST, (), default_doc="(every reported topic)",
        doc="The audited topics, comma-separated.",
    )
    .define(
        "tiers", Type.LIST, (), default_doc="(every configured tier)",
        doc="Some of live, offline, warehouse.",
    )
    .define(
        "schema.registry.url", Type.STRING, REQUIRED,
        doc="The registry holding `<audit.topic>-value`.",
    )
    .define(
        "report.dir", Type.STRING, "./build/audit",
        doc="Where `audit.json`, `audit.txt` and `audit.png` go; a path or URI.",
    )
    .define("spark.master", Type.STRING, "local[2]", doc="Unless spark-submit chose one.")
    .family(
        "iceberg.<key>",
        "With `warehouse.format=iceberg`: the load's `iceberg.*` keys, as in its file (the "
        "catalog, the namespace, per-topic table names; see docs/iceberg.md).",
        prefix=_ICEBERG_PREFIX,
    )
    .family("<alias>.bootstrap.servers", "(required) One per live alias (and `offline.alias`).")
    .family("spark.<key>", "To the SparkSession builder.", prefix="spark.")
    .family("kafka.<key>", "To every consumer (the `sluice` source).", prefix="kafka.")
    .family(
        "schema.registry.<key>", "To the registry client.", prefix="schema.registry."
    )
    .family("basic.auth.<key>", "To the registry client.", prefix="basic.auth.")
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class KafkaCluster:
    """One cluster of a tier: its alias (as in lineage headers) and its bootstrap servers."""

    alias: str
    bootstrap_servers: str


def _alias(key: str, alias: str) -> str:
    try:
        return check_cluster_alias(alias)
    except LineageError as exc:
        raise AuditConfigError(f"{key}: {exc}") from None


@dataclass(frozen=True)
class AuditConfig:
    """A parsed ``audit.properties`` (the module doc lists the keys);
    :meth:`from_properties` builds it."""

    live: tuple[KafkaCluster, ...]
    registry_url: str
    offline: KafkaCluster | None = None
    warehouse_tables: tuple[str, ...] = ()  # URIs
    audit_topic: str = DEFAULT_AUDIT_TOPIC
    window_ms: int = DEFAULT_WINDOW_MS
    grace_ms: int = DEFAULT_WINDOW_MS
    lookback_ms: int | None = None
    topics: tuple[str, ...] = ()  # empty: every topic the producers reported
    tiers: tuple[str, ...] = TIERS  # the tiers counted
    warehouse_cutoff: str = "load"
    warehouse_format: str = "parquet"
    warehouse_path: str | None = None  # URI; warehouse.format=iceberg only
    iceberg: dict[str, str] = field(default_factory=dict)  # the iceberg.* keys
    report_dir: str = "./build/audit"
    spark_master: str = "local[2]"
    spark: dict[str, str] = field(default_factory=dict)  # other spark.* keys
    kafka: dict[str, str] = field(default_factory=dict)  # kafka.* keys for every consumer

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuditConfig:
        """The config of ``props``; a key nothing reads is an error naming the nearest one
        (``kafka.*`` and ``spark.*`` pass through; ``<alias>.bootstrap.servers`` per cluster)."""
        values = CONFIG_DEF.parse(props)
        live, offline = _clusters(props, values)
        tables = tuple(to_uri(t) for t in values["warehouse.table"])
        audit_topic, topics = values["audit.topic"], values["topics"]
        _check_topics(audit_topic, topics)
        iceberg = {k: v for k, v in props.items() if k.startswith(_ICEBERG_PREFIX)}
        path = _iceberg_warehouse(values, tables, iceberg)
        tiers = _tiers(values["tiers"], offline is not None, bool(tables) or path is not None)
        # after the values' own checks, which say more about a malformed alias
        aliases = (*values["live.clusters"], values["offline.alias"])
        CONFIG_DEF.check_known(props, extra={f"{a}.bootstrap.servers" for a in aliases})
        return cls(
            live=live,
            registry_url=values["schema.registry.url"],
            offline=offline,
            warehouse_tables=tables,
            audit_topic=audit_topic,
            window_ms=values["window.ms"],
            grace_ms=values["grace.ms"] or values["window.ms"],
            lookback_ms=values["lookback.ms"],
            topics=topics,
            tiers=tiers,
            warehouse_cutoff=values["warehouse.cutoff"],
            warehouse_format=values["warehouse.format"],
            warehouse_path=path,
            iceberg=iceberg,
            report_dir=to_uri(values["report.dir"]),
            spark_master=values["spark.master"],
            spark={
                k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"
            },
            kafka={
                k: v
                for k, v in props.items()
                if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
            },
        )

    def iceberg_config(self) -> Any:
        """The ``IcebergConfig`` of the ``iceberg.*`` keys (``warehouse.format=iceberg``);
        pyiceberg is imported when its catalog is opened. Raises ``AuditConfigError`` naming a
        bad key."""
        assert self.warehouse_path is not None, "warehouse.format=iceberg only"
        return _parse_iceberg(self.iceberg, self.warehouse_path)

    def sources(self) -> dict[str, Any]:
        """Where each tier was read, for the report."""
        found: dict[str, Any] = {
            "audit_topic": self.audit_topic,
            "live": {c.alias: c.bootstrap_servers for c in self.live},
        }
        if self.offline is not None:
            found["offline"] = {self.offline.alias: self.offline.bootstrap_servers}
        if self.warehouse_tables:
            found["warehouse"] = list(self.warehouse_tables)
            found["warehouse_cutoff"] = self.warehouse_cutoff
        if self.warehouse_path is not None:
            found["warehouse"] = {"format": "iceberg", "path": self.warehouse_path}
            found["warehouse_cutoff"] = self.warehouse_cutoff
        return found


def _clusters(
    props: Mapping[str, str], values: Mapping[str, Any]
) -> tuple[tuple[KafkaCluster, ...], KafkaCluster | None]:
    """The live clusters and the offline one (``None`` without offline.bootstrap.servers)."""
    aliases = values["live.clusters"]
    if not aliases:
        raise AuditConfigError(
            "live.clusters: expected a comma list of cluster aliases (the producers' audit "
            "counts are read from their audit topic), found none"
        )
    if len(set(aliases)) != len(aliases):
        raise AuditConfigError(f"live.clusters: expected distinct aliases, found {aliases}")
    live = tuple(
        KafkaCluster(
            _alias("live.clusters", a),
            required(props, f"{a}.bootstrap.servers", error=AuditConfigError),
        )
        for a in aliases
    )
    if values["offline.bootstrap.servers"] is None:
        return live, None
    alias = _alias("offline.alias", values["offline.alias"])
    if alias in aliases:
        raise AuditConfigError(
            f"offline.alias: expected an alias no live cluster has, found {alias!r}"
        )
    return live, KafkaCluster(alias, values["offline.bootstrap.servers"])


def _iceberg_warehouse(
    values: Mapping[str, Any], tables: tuple[str, ...], iceberg: Mapping[str, str]
) -> str | None:
    """The Iceberg warehouse's URI (``warehouse.format=iceberg``), else ``None``; the keys of
    the other format are refused, so a half-switched file fails here."""
    path = values["warehouse.path"]
    if values["warehouse.format"] == "parquet":
        if path is not None:
            raise AuditConfigError(
                f"warehouse.path: expected it only with warehouse.format=iceberg, found {path!r}"
            )
        if iceberg:
            raise AuditConfigError(
                f"{min(iceberg)}: expected iceberg.* keys only with warehouse.format=iceberg, "
                "found warehouse.format=parquet"
            )
        return None
    if tables:
        raise AuditConfigError(
            "warehouse.table: expected none with warehouse.format=iceberg (the tables are the "
            f"audited topics', named by the iceberg.* keys), found {', '.join(tables)}"
        )
    if path is None:
        raise AuditConfigError(
            "warehouse.path: expected the load's warehouse.path with warehouse.format=iceberg, "
            "found none"
        )
    uri = to_uri(path)
    _parse_iceberg(iceberg, uri)  # checked now: parsing imports no pyiceberg
    return uri


def _parse_iceberg(iceberg: Mapping[str, str], warehouse: str) -> Any:
    from sluice.pipeline.table.iceberg_catalog import IcebergConfig, IcebergConfigError

    try:
        return IcebergConfig.from_properties(iceberg, warehouse)
    except IcebergConfigError as exc:
        raise AuditConfigError(str(exc)) from None


def _check_topics(audit_topic: str, topics: tuple[str, ...]) -> None:
    for topic in (audit_topic, *topics):
        if not _TOPIC.fullmatch(topic):
            raise AuditConfigError(f"topics: expected [A-Za-z0-9._-]+ names, found {topic!r}")
    if audit_topic in topics:
        raise AuditConfigError(
            f"topics: expected application topics, found the audit topic {audit_topic!r}"
        )


def _tiers(given: tuple[str, ...], offline: bool, warehouse: bool) -> tuple[str, ...]:
    """The tiers counted, in data-path order: ``given``, else every configured one."""
    configured = {"live": True, "offline": offline, "warehouse": warehouse}
    tiers = given or tuple(t for t in TIERS if configured[t])
    for tier in tiers:
        if tier not in TIERS:
            raise AuditConfigError(f"tiers: expected some of {', '.join(TIERS)}, found {tier!r}")
        if not configured[tier]:
            key = "offline.bootstrap.servers" if tier == "offline" else "warehouse.table"
            raise AuditConfigError(f"tiers: {tier} needs {key}, found none")
    return tuple(t for t in TIERS if t in tiers)


def parse_time(text: str) -> int:
    """``--until``: ms since the epoch, or ISO-8601 (``2026-11-22T03:00:00Z``; no zone = UTC)."""
    raw = text.strip()
    if raw.isascii() and raw.isdigit():
        return int(raw)
    try:
        moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"expected ms since the epoch or an ISO-8601 time, found {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)
