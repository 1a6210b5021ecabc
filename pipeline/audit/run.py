"""The audit (paper §4): did every message the producers published reach every tier?

    spark-submit --master local[2] jobs/audit.py --config conf/audit.properties [--until T]
    sluice audit --config conf/audit.properties [--until 2026-11-22T03:00:00Z]

Producers (``sluice.pipeline.audit.producer.AuditingProducer``) stamp each message with a
timestamp and a ``sluice-audit-server`` header and report, per topic and window, how many
messages they published to an audit topic. One run of the audit:

1. **producers** — sum the reports in the audit topic of each live cluster;
2. **count** — with Spark, the audited messages per topic and window at each configured tier:
   ``live`` (the live clusters), ``offline`` (the cluster the mirror fills), ``warehouse``
   (the nightly load's Parquet table(s), or its Iceberg tables with
   ``warehouse.format=iceberg``); ``count``, ``distinct`` origins and ``duplicates``
   (``sluice.pipeline.audit.counts``);
3. **judge** — a closed window (``window_end + grace <= cutoff``) differs when a tier's distinct
   count is not the producers' count (``sluice.pipeline.audit.report`` has the rules);
4. **report** — ``audit.json``, ``audit.txt`` and ``audit.png`` in ``report.dir``, and the text
   on stdout.

The configuration is :class:`~sluice.pipeline.audit.config.AuditConfig` (``audit.properties``).
The audited topics are ``topics`` when configured, else every topic the producers reported;
the audit topic itself is never audited. The cutoff is the time the audit starts unless
``--until`` (or :func:`run_audit`'s ``until_ms``) says otherwise.

**The warehouse lags** — a nightly table holds nothing newer than its last load. With
``warehouse.cutoff=load`` (default) the warehouse judges a window only when it ended (plus the
grace) before the newest published load started; later windows are ``open`` for it. With
``warehouse.cutoff=audit`` it is judged like the Kafka tiers (right after a load, or with an
``--until`` before the load's start).

Before its SparkSession starts, a run checks the registry, the warehouse and ``report.dir``
(``sluice.pipeline.audit.preflight``): a silent service or an unwritable report directory fails
the audit in seconds, not after Spark's start-up.

Exit status (``sluice audit``): 0 every closed window agrees, 1 some closed window differs or
the audit failed, 2 bad configuration, 3 a service did not answer (a cluster, the registry or
the Spark master; ``sluice.cli.errors.unreachable_cause`` finds it behind the audit's error).

Threads: :class:`AuditConfig` is immutable; :func:`run_audit` runs on the Spark driver, one
audit at a time per SparkSession (reading a warehouse table switches a session setting for the
duration of the read).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from sluice.pipeline.audit.config import AuditConfig, AuditConfigError
from sluice.pipeline.audit.counts import (
    AuditCountError,
    count_tiers,
    iceberg_coverage,
    iceberg_frame,
    kafka_frame,
    producer_counts,
    warehouse_coverage,
    warehouse_frame,
)
from sluice.pipeline.audit.preflight import AuditPreflightError, preflight
from sluice.pipeline.audit.producer import window_of
from sluice.pipeline.audit.report import AuditResult, compare, format_ms, render_text, write_report

__all__ = ["AuditError", "build_spark", "run_audit"]

log = logging.getLogger("sluice.audit")


class AuditError(RuntimeError):
    """The audit could not run (a tier unreadable); no verdict. The message says why."""


def build_spark(config: AuditConfig) -> Any:
    """A SparkSession for the audit: the configured master unless spark-submit chose one."""
    from pyspark.sql import SparkSession  # here: importing the audit must not import Spark

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
    try:
        # Everything checkable without Spark first: the registry, the warehouse, report.dir.
        preflight(config)
    except AuditPreflightError as exc:
        raise AuditError(str(exc)) from exc  # the chain keeps a silent service's error: exit 3
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
                if config.warehouse_path is not None:
                    frames[tier] = iceberg_frame(
                        spark,
                        config.iceberg_config(),
                        topics,
                        alias=alias,
                        window_ms=config.window_ms,
                    )
                else:
                    frames[tier] = warehouse_frame(
                        spark,
                        config.warehouse_tables,
                        topics,
                        alias=alias,
                        window_ms=config.window_ms,
                    )
        began = time.monotonic()
        counts = count_tiers(frames, since_window=since)
        say(f"counted {', '.join(config.tiers)} ({time.monotonic() - began:.1f}s)")
        coverage: dict[str, int | None] = {}
        if "warehouse" in config.tiers and config.warehouse_cutoff == "load":
            if config.warehouse_path is not None:
                coverage["warehouse"] = iceberg_coverage(
                    config.iceberg_config(), topics, config.warehouse_path
                )
            else:
                loads = [warehouse_coverage(t) for t in config.warehouse_tables]
                coverage["warehouse"] = None if None in loads else min(loads)  # type: ignore[type-var]
            if coverage["warehouse"] is None:
                notes.append("warehouse: no published load yet, so it judges no window")
    except (AuditCountError, AuditConfigError) as exc:
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
