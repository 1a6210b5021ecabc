"""``AuditConfig``: the keys of ``conf/audit.properties``, and the ``--until`` time.

=========================  =====================  ============================================
key                        default                meaning
=========================  =====================  ============================================
live.clusters              (required)             live cluster aliases, comma-separated (the
                                                  mirror's ``clusters``)
<alias>.bootstrap.servers  (required)             one per live alias
offline.bootstrap.servers  (none: no offline)     the cluster the mirror fills
offline.alias              offline                its alias (the mirror's ``target.alias``)
warehouse.table            (none: no warehouse)   the nightly load's table(s), paths or URIs,
                                                  comma-separated
warehouse.cutoff           load                   ``load``: judge the warehouse up to its newest
                                                  load's start; ``audit``: at the cutoff
audit.topic                sluice-audit           where the producers report, on each live
                                                  cluster; never audited itself
window.ms                  60000                  a multiple of the producers' window
grace.ms                   window.ms              a window is closed once end + grace <= cutoff
lookback.ms                (none: every window)   only windows starting this long before the
                                                  cutoff
topics                     (every reported one)   the audited topics, comma-separated
tiers                      (every configured)     some of ``live``, ``offline``, ``warehouse``
schema.registry.url        (required)             holds ``<audit.topic>-value``
report.dir                 ./build/audit          ``audit.json``, ``.txt``, ``.png``; path or URI
spark.master               local[2]               unless spark-submit chose one
spark.<key>                                       to the SparkSession builder
kafka.<key>                                       to every consumer (the ``sluice`` source)
=========================  =====================  ============================================

``conf/audit.properties`` explains each key at length. Aliases are ``[A-Za-z0-9._-]+`` (they
are the lineage header's, ``sluice.pipeline.lineage``), topic names too. Every malformed key
raises :class:`AuditConfigError` naming the key, what was expected and what was found (numbers
and lists through ``sluice.common.options``); a blank value (``key=``) is the default.

A parsed :class:`AuditConfig` is immutable (its dicts are never changed after parsing);
thread-safe. This module imports neither Spark nor pyarrow: ``sluice audit`` checks its
configuration in the base install.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sluice.common.options import check_known_keys, names, positive_int, required, text
from sluice.common.paths import to_uri
from sluice.pipeline.audit.producer import DEFAULT_AUDIT_TOPIC, DEFAULT_WINDOW_MS
from sluice.pipeline.lineage import LineageError, check_cluster_alias

__all__ = [
    "TIERS",
    "WAREHOUSE_CUTOFFS",
    "AuditConfig",
    "AuditConfigError",
    "KafkaCluster",
    "parse_time",
]

TIERS = ("live", "offline", "warehouse")
"""The tiers the audit can count, in data-path order (the producers' reports come first)."""

WAREHOUSE_CUTOFFS = ("load", "audit")
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


class AuditConfigError(ValueError):
    """A configuration key is missing or malformed; the message names the key."""


# A key without which the config means nothing: missing or blank is a AuditConfigError.
_required = partial(required, error=AuditConfigError)


# Every key of conf/audit.properties the audit reads, besides the per-cluster
# <alias>.bootstrap.servers and the kafka.* / spark.* / schema.registry.* families.
AUDIT_KEYS: frozenset[str] = frozenset(
    {
        "live.clusters", "offline.alias", "offline.bootstrap.servers", "schema.registry.url",
        "audit.topic", "topics", "tiers", "warehouse.table", "warehouse.cutoff", "window.ms",
        "grace.ms", "lookback.ms", "report.dir", "spark.master",
    }
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
    report_dir: str = "./build/audit"
    spark_master: str = "local[2]"
    spark: dict[str, str] = field(default_factory=dict)  # other spark.* keys
    kafka: dict[str, str] = field(default_factory=dict)  # kafka.* keys for every consumer

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuditConfig:
        """The config of ``props``; a key nothing reads is an error naming the nearest one
        (``kafka.*`` and ``spark.*`` pass through; ``<alias>.bootstrap.servers`` per cluster)."""
        aliases = names(props, "live.clusters")
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
                _required(props, f"{a}.bootstrap.servers"),
            )
            for a in aliases
        )
        offline = None
        if text(props, "offline.bootstrap.servers") is not None:
            alias = _alias("offline.alias", text(props, "offline.alias") or "offline")
            if alias in aliases:
                raise AuditConfigError(
                    f"offline.alias: expected an alias no live cluster has, found {alias!r}"
                )
            offline = KafkaCluster(alias, _required(props, "offline.bootstrap.servers"))
        tables = tuple(to_uri(t) for t in names(props, "warehouse.table"))
        window_ms = positive_int(props, "window.ms", DEFAULT_WINDOW_MS, error=AuditConfigError)
        assert window_ms is not None
        grace_ms = positive_int(props, "grace.ms", window_ms, error=AuditConfigError)
        assert grace_ms is not None
        audit_topic = text(props, "audit.topic") or DEFAULT_AUDIT_TOPIC
        topics = names(props, "topics")
        for topic in (audit_topic, *topics):
            if not _TOPIC.fullmatch(topic):
                raise AuditConfigError(f"topics: expected [A-Za-z0-9._-]+ names, found {topic!r}")
        if audit_topic in topics:
            raise AuditConfigError(
                f"topics: expected application topics, found the audit topic {audit_topic!r}"
            )
        configured = {"live": True, "offline": offline is not None, "warehouse": bool(tables)}
        tiers = names(props, "tiers") or tuple(t for t in TIERS if configured[t])
        for tier in tiers:
            if tier not in TIERS:
                raise AuditConfigError(
                    f"tiers: expected some of {', '.join(TIERS)}, found {tier!r}"
                )
            if not configured[tier]:
                key = "offline.bootstrap.servers" if tier == "offline" else "warehouse.table"
                raise AuditConfigError(f"tiers: {tier} needs {key}, found none")
        mode = (text(props, "warehouse.cutoff") or "load").lower()
        if mode not in WAREHOUSE_CUTOFFS:
            raise AuditConfigError(f"warehouse.cutoff: expected load or audit, found {mode!r}")
        # after the values' own checks, which say more about a malformed alias
        offline_alias = text(props, "offline.alias") or "offline"
        check_known_keys(
            props,
            AUDIT_KEYS | {f"{a}.bootstrap.servers" for a in (*aliases, offline_alias)},
            prefixes=("kafka.", "spark.", "schema.registry.", "basic.auth."),
            what="audit config",
            error=AuditConfigError,
        )
        return cls(
            live=live,
            registry_url=_required(props, "schema.registry.url"),
            offline=offline,
            warehouse_tables=tables,
            audit_topic=audit_topic,
            window_ms=window_ms,
            grace_ms=grace_ms,
            lookback_ms=positive_int(props, "lookback.ms", None, error=AuditConfigError),
            topics=topics,
            tiers=tuple(t for t in TIERS if t in tiers),
            warehouse_cutoff=mode,
            report_dir=to_uri(text(props, "report.dir") or "./build/audit"),
            spark_master=text(props, "spark.master") or "local[2]",
            spark={
                k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"
            },
            kafka={
                k: v
                for k, v in props.items()
                if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
            },
        )

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
        return found


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
