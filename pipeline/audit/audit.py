"""The audit (paper §4): did every message the producers published reach every tier?

    spark-submit --master local[2] jobs/audit.py --config conf/audit.properties [--until T]
    sluice audit --config conf/audit.properties [--until 2026-11-22T03:00:00Z]

Producers (``sluice.pipeline.audit.producer.AuditingProducer``) stamp each message with a timestamp
and a ``sluice-audit-server`` header and report, per topic and window, how many messages they
published to an audit topic. One run of the audit:

1. **producers** — sum the reports in the audit topic of each live cluster;
2. **count** — with Spark, the audited messages per topic and window at each configured tier:
   ``live`` (the live clusters), ``offline`` (the cluster the mirror fills), ``warehouse``
   (the nightly load's Parquet table(s)); ``count``, ``distinct`` origins and ``duplicates``
   (``sluice.pipeline.audit.counts``);
3. **judge** — a closed window (``window_end + grace <= cutoff``) differs when a tier's distinct
   count is not the producers' count (``sluice.pipeline.audit.report`` has the rules);
4. **report** — ``audit.json``, ``audit.txt`` and ``audit.png`` in ``report.dir``, and the text
   on stdout.

The audited topics are ``topics`` when configured, else every topic the producers reported;
the audit topic itself is never audited. The cutoff is the time the audit starts unless
``--until`` (or :func:`run_audit`'s ``until_ms``) says otherwise.

**The warehouse lags** — a nightly table holds nothing newer than its last load. With
``warehouse.cutoff=load`` (default) the warehouse judges a window only when it ended (plus the
grace) before the newest published load started; later windows are ``open`` for it. With
``warehouse.cutoff=audit`` it is judged like the Kafka tiers (right after a load, or with an
``--until`` before the load's start).

Exit status (``sluice audit``): 0 every closed window agrees, 1 some closed window differs,
2 bad configuration, 3 the audit could not run (a cluster, the registry or a table
unreadable).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sluice.pipeline.audit.counts import (
    AuditCountError,
    KafkaCluster,
    count_tiers,
    kafka_frame,
    producer_counts,
    warehouse_coverage,
    warehouse_frame,
)
from sluice.pipeline.audit.producer import DEFAULT_AUDIT_TOPIC, DEFAULT_WINDOW_MS, window_of
from sluice.pipeline.audit.report import AuditResult, compare, format_ms, render_text, write_report
from sluice.pipeline.lineage import LineageError, check_cluster_alias

__all__ = [
    "TIERS",
    "AuditConfig",
    "AuditConfigError",
    "AuditError",
    "build_spark",
    "parse_time",
    "run_audit",
]

log = logging.getLogger("sluice.audit")

TIERS = ("live", "offline", "warehouse")
"""The tiers the audit can count, in data-path order (the producers' reports come first)."""

WAREHOUSE_CUTOFFS = ("load", "audit")
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


class AuditConfigError(ValueError):
    """A configuration key is missing or malformed; the message names the key."""


class AuditError(RuntimeError):
    """The audit could not run (a tier unreadable); no verdict. The message says why."""


def _to_uri(path: str) -> str:
    if urlsplit(path).scheme:
        return path.rstrip("/")
    return "file://" + os.path.abspath(path)


def _positive(props: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = (props.get(key) or "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
        raise AuditConfigError(f"{key}: expected a positive number of ms, found {raw!r}")
    return int(raw)


def _names(props: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in (props.get(key) or "").split(",") if n.strip())


def _alias(key: str, alias: str) -> str:
    try:
        return check_cluster_alias(alias)
    except LineageError as exc:
        raise AuditConfigError(f"{key}: {exc}") from None


@dataclass(frozen=True)
class AuditConfig:
    """The keys of ``conf/audit.properties``; see that file for each one's meaning."""

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
        def required(key: str) -> str:
            value = (props.get(key) or "").strip()
            if not value:
                raise AuditConfigError(f"{key}: expected a value, found none")
            return value

        aliases = _names(props, "live.clusters")
        if not aliases:
            raise AuditConfigError(
                "live.clusters: expected a comma list of cluster aliases (the producers' audit "
                "counts are read from their audit topic), found none"
            )
        if len(set(aliases)) != len(aliases):
            raise AuditConfigError(f"live.clusters: expected distinct aliases, found {aliases}")
        live = tuple(
            KafkaCluster(_alias("live.clusters", a), required(f"{a}.bootstrap.servers"))
            for a in aliases
        )
        offline = None
        if (props.get("offline.bootstrap.servers") or "").strip():
            alias = _alias("offline.alias", (props.get("offline.alias") or "offline").strip())
            if alias in aliases:
                raise AuditConfigError(
                    f"offline.alias: expected an alias no live cluster has, found {alias!r}"
                )
            offline = KafkaCluster(alias, required("offline.bootstrap.servers"))
        tables = tuple(_to_uri(t) for t in _names(props, "warehouse.table"))
        window_ms = _positive(props, "window.ms", DEFAULT_WINDOW_MS)
        assert window_ms is not None
        grace_ms = _positive(props, "grace.ms", window_ms)
        assert grace_ms is not None
        audit_topic = (props.get("audit.topic") or DEFAULT_AUDIT_TOPIC).strip()
        topics = _names(props, "topics")
        for topic in (audit_topic, *topics):
            if not _TOPIC.fullmatch(topic):
                raise AuditConfigError(f"topics: expected [A-Za-z0-9._-]+ names, found {topic!r}")
        if audit_topic in topics:
            raise AuditConfigError(
                f"topics: expected application topics, found the audit topic {audit_topic!r}"
            )
        configured = {"live": True, "offline": offline is not None, "warehouse": bool(tables)}
        tiers = _names(props, "tiers") or tuple(t for t in TIERS if configured[t])
        for tier in tiers:
            if tier not in TIERS:
                raise AuditConfigError(
                    f"tiers: expected some of {', '.join(TIERS)}, found {tier!r}"
                )
            if not configured[tier]:
                key = "offline.bootstrap.servers" if tier == "offline" else "warehouse.table"
                raise AuditConfigError(f"tiers: {tier} needs {key}, found none")
        mode = (props.get("warehouse.cutoff") or "load").strip().lower()
        if mode not in WAREHOUSE_CUTOFFS:
            raise AuditConfigError(f"warehouse.cutoff: expected load or audit, found {mode!r}")
        return cls(
            live=live,
            registry_url=required("schema.registry.url"),
            offline=offline,
            warehouse_tables=tables,
            audit_topic=audit_topic,
            window_ms=window_ms,
            grace_ms=grace_ms,
            lookback_ms=_positive(props, "lookback.ms", None),
            topics=topics,
            tiers=tuple(t for t in TIERS if t in tiers),
            warehouse_cutoff=mode,
            report_dir=_to_uri((props.get("report.dir") or "./build/audit").strip()),
            spark_master=(props.get("spark.master") or "local[2]").strip(),
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


def build_spark(config: AuditConfig) -> Any:
    """A SparkSession for the audit: the configured master unless spark-submit chose one."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("sluice-audit")
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # not launched by spark-submit
        builder = builder.master(config.spark_master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        **config.spark,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_audit(
    config: AuditConfig,
    spark: Any | None = None,
    *,
    until_ms: int | None = None,
    progress: Callable[[str], None] | None = None,
    print_report: bool = True,
) -> AuditResult:
    """Run one audit (see the module doc); write the report; return the result.

    ``result.exit_status`` is 1 when a closed window differs. Raises :class:`AuditError` when
    a tier cannot be read (nothing is judged then). ``spark`` defaults to
    ``build_spark(config)``.
    """
    say = progress or (lambda message: log.info("%s", message))
    cutoff = until_ms if until_ms is not None else time.time_ns() // 1_000_000
    since = (
        window_of(cutoff - config.lookback_ms, config.window_ms)
        if config.lookback_ms is not None
        else None
    )
    say(f"cutoff {format_ms(cutoff)}, windows of {config.window_ms} ms, grace {config.grace_ms} ms")
    try:
        spark = spark if spark is not None else build_spark(config)
        began = time.monotonic()
        producers = producer_counts(
            spark,
            config.live,
            audit_topic=config.audit_topic,
            registry_url=config.registry_url,
            window_ms=config.window_ms,
            kafka=config.kafka,
            topics=config.topics,
            since_window=since,
        )
        reported = sum(p.count for p in producers.values())
        topics = list(config.topics) or sorted({t for t, _ in producers})
        say(
            f"producers reported {reported} messages in {len(producers)} topic windows "
            f"({time.monotonic() - began:.1f}s); auditing {', '.join(topics) or 'no topics'}"
        )
        frames: dict[str, Any] = {}
        notes = []
        for tier in config.tiers:
            if tier == "live":
                frames[tier] = kafka_frame(
                    spark, config.live, topics, window_ms=config.window_ms, kafka=config.kafka
                )
            elif tier == "offline":
                assert config.offline is not None
                frames[tier] = kafka_frame(
                    spark, [config.offline], topics, window_ms=config.window_ms, kafka=config.kafka
                )
            else:
                alias = config.offline.alias if config.offline is not None else "offline"
                frames[tier] = warehouse_frame(
                    spark, config.warehouse_tables, topics, alias=alias, window_ms=config.window_ms
                )
        began = time.monotonic()
        counts = count_tiers(frames, since_window=since)
        say(f"counted {', '.join(config.tiers)} ({time.monotonic() - began:.1f}s)")
        coverage: dict[str, int | None] = {}
        if "warehouse" in config.tiers and config.warehouse_cutoff == "load":
            loads = [warehouse_coverage(t) for t in config.warehouse_tables]
            coverage["warehouse"] = None if None in loads else min(loads)  # type: ignore[type-var]
            if coverage["warehouse"] is None:
                notes.append("warehouse: no published load yet, so it judges no window")
    except AuditCountError as exc:
        raise AuditError(str(exc)) from None
    except Exception as exc:  # a cluster, the registry or a table could not be read
        raise AuditError(f"{type(exc).__name__}: {exc}") from exc
    result = compare(
        producers,
        counts,
        window_ms=config.window_ms,
        grace_ms=config.grace_ms,
        cutoff_ms=cutoff,
        coverage=coverage,
        sources=config.sources(),
        notes=notes,
    )
    written = write_report(result, config.report_dir)
    say(f"report: {', '.join(written.values())}")
    if print_report:
        print(render_text(result), flush=True)
    return result
