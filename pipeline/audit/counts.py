"""The audit's counts with Spark: messages per ``(topic, window)`` at each tier of the data path.

* **producers** — the ``AuditCount`` events (``schemas/audit_count.avsc``) in the audit topic of
  every live cluster, read with ``spark.read.format("sluice")`` as typed Avro
  (``valueFormat=avro``, reader schema: the latest version of ``<audit topic>-value``) and
  summed. A producer's window must lie inside one audit window (the audit's ``window.ms`` a
  multiple of the producers'), or :class:`AuditCountError` says which report does not fit.
* **Kafka tiers** (``live``: every live cluster together; ``offline``) — the audited topics of
  each cluster, read from earliest to latest with the ``sluice`` source.
* **warehouse** — the published runs (``load=<N>``) of the nightly load's Parquet table(s),
  or (``warehouse.format=iceberg``) the current snapshot of each audited topic's Iceberg table,
  scanned with pyiceberg (only the Kafka columns, filtered to the audited topics: a table may
  be shared) and handed to Spark as Arrow, so both formats are counted by the same expressions.
  A compaction's snapshot rewrites rows without changing them, so the current snapshot is the
  whole table whatever maintenance ran. The load keeps the source's ``headers`` column
  (``kafka_headers`` when a typed value has a field named ``headers``) and the record
  timestamp (``timestamp``, or ``kafka_timestamp`` when the value has its own ``timestamp``,
  as ``page_view.avsc`` does).

At every data tier only messages with the ``sluice-audit-server`` header count; the window is
``floor(record timestamp ms / window.ms)``, so the mirror must keep the producers' CreateTime
timestamps (it copies records as they are). The **origin** of a message (for ``distinct``) is
its ``sluice-lineage`` header value when it has one, else ``<alias>/<topic>/<partition>/
<offset>`` of the record itself (``sluice.pipeline.lineage``; the warehouse uses the offline alias,
the cluster it is loaded from). Lineage values are compared as strings, not parsed.

All data tiers are counted by one Spark job (a union with a ``tier`` column, then one
``groupBy``); the producers' reports by another. Functions here run on the driver and return
plain dicts of :class:`~sluice.pipeline.audit.report.TierCount` / ``ProducerCount``.

Threads: the functions keep no state of their own, but :func:`warehouse_frame` switches
``spark.sql.sources.partitionColumnTypeInference.enabled`` off on the session while it reads a
table, so call it from one thread per SparkSession.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.audit.config import KafkaCluster
from sluice.pipeline.audit.producer import SERVER_HEADER, audit_subject
from sluice.pipeline.audit.report import ProducerCount, TierCount
from sluice.pipeline.lineage import LINEAGE_HEADER
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.split_reader import consumer_config
from sluice.pipeline.table.commit import TableWriter, published_runs
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import SchemasError

# pyspark, and the ``sluice`` data source (its classes subclass pyspark's), are imported inside
# the functions that build frames: the audit's configuration is parsed, and ``sluice audit``
# reports a bad one, without importing Spark.

__all__ = [
    "AuditCountError",
    "count_tiers",
    "iceberg_coverage",
    "iceberg_frame",
    "kafka_frame",
    "producer_counts",
    "warehouse_coverage",
    "warehouse_frame",
]

Key = tuple[str, int]
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")


class AuditCountError(RuntimeError):
    """A tier could not be counted as configured; the message says what was found."""


def _options(cluster: KafkaCluster, kafka: Mapping[str, str]) -> dict[str, str]:
    return {
        **kafka,
        "kafka.bootstrap.servers": cluster.bootstrap_servers,
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
        # Retention may delete a segment while the audit reads it: count what is left.
        "failOnDataLoss": "false",
    }


def _window(ms: Any, window_ms: int) -> Any:
    """``floor(ms / window_ms)`` in integer arithmetic (also right below the epoch)."""
    from pyspark.sql import functions as F

    return ((ms - F.pmod(ms, F.lit(window_ms))) / F.lit(window_ms)).cast("long")


def _has_records(cluster: KafkaCluster, topic: str, kafka: Mapping[str, str]) -> bool:
    options = {**kafka, "kafka.bootstrap.servers": cluster.bootstrap_servers}
    with KafkaMetadata(consumer_config(options)) as metadata:
        partitions = metadata.partitions_per_topic().get(topic, 0)
        bounds = metadata.bounds(TopicPartition(topic, p) for p in range(partitions))
    return any(b.log_end > b.log_start for b in bounds.values())


def _check_subject(registry_url: str, audit_topic: str) -> None:
    """Fail early, with a short message, when the reports' schema cannot be had."""
    subject = audit_subject(audit_topic)
    try:
        RegistryClient(registry_url).get_version(subject, "latest")
    except SchemasError as exc:
        raise AuditCountError(
            f"audit topic {audit_topic!r}: expected its reports' schema under subject "
            f"{subject!r} in the registry, found: {exc}"
        ) from None


def producer_counts(
    spark: Any,
    clusters: Sequence[KafkaCluster],
    *,
    audit_topic: str,
    registry_url: str,
    window_ms: int,
    kafka: Mapping[str, str] | None = None,
    topics: Sequence[str] = (),
    since_window: int | None = None,
) -> dict[Key, ProducerCount]:
    """``{(topic, window): ProducerCount}``: the producers' reports, summed per audit window.

    Clusters whose audit topic is missing or empty contribute nothing. ``topics`` (if given)
    and ``since_window`` filter the result.
    """
    from pyspark.sql import functions as F

    from sluice.pipeline.source.data_source import register

    register(spark)
    kafka = dict(kafka or {})
    frames = []
    for cluster in clusters:
        if not _has_records(cluster, audit_topic, kafka):
            continue
        _check_subject(registry_url, audit_topic)
        options = {
            **_options(cluster, kafka),
            "subscribe": audit_topic,
            "includeHeaders": "false",
            "valueFormat": "avro",
            "valueColumns": "struct",
            "schema.registry.url": registry_url,
            "valueSchemaSubject": audit_subject(audit_topic),
            "onDecodeError": "fail",
        }
        df = spark.read.format("sluice").options(**options).load()
        frames.append(
            df.select(
                F.col("value.producer").alias("producer"),
                F.col("value.topic").alias("topic"),
                F.unix_millis("value.window_start").alias("start_ms"),
                F.unix_millis("value.window_end").alias("end_ms"),
                F.col("value.count").alias("count"),
            )
        )
    if not frames:
        return {}
    reports = frames[0]
    for frame in frames[1:]:
        reports = reports.unionByName(frame)
    reports = reports.withColumn("window", _window(F.col("start_ms"), window_ms)).withColumn(
        "last_window", _window(F.col("end_ms") - F.lit(1), window_ms)
    )
    if topics:
        reports = reports.where(F.col("topic").isin(list(topics)))
    if since_window is not None:
        reports = reports.where(F.col("window") >= F.lit(since_window))
    rows = (
        reports.groupBy("topic", "window")
        .agg(
            F.sum("count").alias("count"),
            F.countDistinct("producer").alias("producers"),
            F.max(F.col("last_window") != F.col("window")).alias("spans"),
            F.first(
                F.when(F.col("last_window") != F.col("window"), F.col("producer")), ignorenulls=True
            ).alias("bad_producer"),
            F.first(
                F.when(
                    F.col("last_window") != F.col("window"), F.col("end_ms") - F.col("start_ms")
                ),
                ignorenulls=True,
            ).alias("bad_length"),
        )  # fmt: skip
        .collect()
    )
    for r in rows:
        if r["spans"]:
            raise AuditCountError(
                f"producer {r['bad_producer']!r} reported {r['topic']!r} in windows of "
                f"{r['bad_length']} ms, which cross the audit's {window_ms} ms windows: expected "
                "window.ms to be a multiple of the producers' window"
            )
    return {
        (str(r["topic"]), int(r["window"])): ProducerCount(int(r["count"]), int(r["producers"]))
        for r in rows
    }


def _audited(df: Any, *, alias: str, timestamp: str, headers: str, window_ms: int) -> Any:
    """``(topic, window, origin)`` of the rows of ``df`` that carry the audit server header."""
    from pyspark.sql import functions as F

    stamped = df.where(F.exists(F.col(headers), lambda h: h["key"] == F.lit(SERVER_HEADER)))
    lineage = F.filter(
        F.col(headers), lambda h: (h["key"] == F.lit(LINEAGE_HEADER)) & h["value"].isNotNull()
    )
    own = F.concat_ws(
        "/",
        F.lit(alias),
        F.col("topic"),
        F.col("partition").cast("string"),
        F.col("offset").cast("string"),
    )
    first = F.try_element_at(lineage, F.lit(1))
    origin = F.coalesce(first.getField("value").cast("string"), own)
    return stamped.select(
        F.col("topic").cast("string").alias("topic"),
        _window(F.unix_millis(F.col(timestamp)), window_ms).alias("window"),
        origin.alias("origin"),
    )


def kafka_frame(
    spark: Any,
    clusters: Sequence[KafkaCluster],
    topics: Sequence[str],
    *,
    window_ms: int,
    kafka: Mapping[str, str] | None = None,
) -> Any:
    """``(topic, window, origin)`` of the audited messages of ``topics`` in ``clusters``
    (a topic a cluster does not have is skipped); ``None`` when there is nothing to read."""
    from sluice.pipeline.source.data_source import register

    if not topics or not clusters:
        return None
    register(spark)
    frame = None
    for cluster in clusters:
        # the lineage header is how the audit tells copies apart: headers are needed
        options = {
            **_options(cluster, dict(kafka or {})),
            "subscribe": ",".join(topics),
            "includeHeaders": "true",
        }
        df = spark.read.format("sluice").options(**options).load()
        part = _audited(
            df, alias=cluster.alias, timestamp="timestamp", headers="headers", window_ms=window_ms
        )
        frame = part if frame is None else frame.unionByName(part)
    return frame


@contextmanager
def _partition_values_as_strings(spark: Any) -> Iterator[None]:
    """Hive partition values stay strings (a topic named ``007`` stays ``007``)."""
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _kafka_column(columns: Sequence[str], name: str) -> str | None:
    """Kafka's column ``name`` in a table: ``kafka_<name>`` when a value field took it."""
    for candidate in (f"kafka_{name}", name):
        if candidate in columns:
            return candidate
    return None


def warehouse_frame(
    spark: Any,
    tables: Sequence[str],
    topics: Sequence[str],
    *,
    alias: str,
    window_ms: int,
) -> Any:
    """``(topic, window, origin)`` of the audited rows of ``topics`` in the published runs of
    ``tables`` (URIs); tables without published runs add nothing. ``None`` if nothing."""
    from pyspark.sql import functions as F

    if not topics:
        return None
    frame = None
    for table in tables:
        if not published_runs(table):
            continue
        with _partition_values_as_strings(spark):
            df = spark.read.parquet(table)
        columns = df.columns
        timestamp = _kafka_column(columns, "timestamp")
        headers = _kafka_column(columns, "headers")
        missing = [n for n, c in (("timestamp", timestamp), ("headers", headers)) if c is None]
        missing += [n for n in ("topic", "partition", "offset") if n not in columns]
        if missing:
            raise AuditCountError(
                f"warehouse table {table}: expected the Kafka columns topic, partition, offset, "
                f"timestamp and headers, found no {', '.join(missing)} (columns: {columns})"
            )
        assert timestamp is not None and headers is not None
        df = df.where(F.col("topic").isin(list(topics)))
        part = _audited(df, alias=alias, timestamp=timestamp, headers=headers, window_ms=window_ms)
        frame = part if frame is None else frame.unionByName(part)
    return frame


def _iceberg_tables(config: Any, topics: Sequence[str]) -> dict[str, list[str]]:
    """``{table identifier: [audited topics in it]}`` (several topics may share a table)."""
    tables: dict[str, list[str]] = {}
    for topic in topics:
        tables.setdefault(config.identifier(topic), []).append(topic)
    return tables


def iceberg_frame(
    spark: Any,
    config: Any,
    topics: Sequence[str],
    *,
    alias: str,
    window_ms: int,
) -> Any:
    """``(topic, window, origin)`` of the audited rows of ``topics`` in the current snapshots of
    their Iceberg tables (``config``: an ``IcebergConfig``); a topic whose table does not exist
    or has no snapshot adds nothing. ``None`` if nothing."""
    from pyiceberg.exceptions import NoSuchTableError

    if not topics:
        return None
    catalog = config.open_catalog()
    frame = None
    for identifier, mine in _iceberg_tables(config, topics).items():
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            continue
        if table.current_snapshot() is None:
            continue
        columns = [f.name for f in table.schema().fields]
        timestamp = _kafka_column(columns, "timestamp")
        headers = _kafka_column(columns, "headers")
        missing = [n for n, c in (("timestamp", timestamp), ("headers", headers)) if c is None]
        missing += [n for n in ("topic", "partition", "offset") if n not in columns]
        if missing:
            raise AuditCountError(
                f"warehouse table {identifier}: expected the Kafka columns topic, partition, "
                f"offset, timestamp and headers, found no {', '.join(missing)} "
                f"(columns: {columns})"
            )
        assert timestamp is not None and headers is not None
        # Kafka's topic names are [A-Za-z0-9._-]+, safe inside quotes; a producer's report
        # naming anything else names no topic a table can hold.
        names = sorted(t for t in mine if _TOPIC_NAME.fullmatch(t))
        if not names:
            continue
        rows = table.scan(
            row_filter=f"topic IN ({', '.join(repr(t) for t in names)})",
            selected_fields=("topic", "partition", "offset", timestamp, headers),
        ).to_arrow()
        df = spark.createDataFrame(rows)
        part = _audited(df, alias=alias, timestamp=timestamp, headers=headers, window_ms=window_ms)
        frame = part if frame is None else frame.unionByName(part)
    return frame


def iceberg_coverage(config: Any, topics: Sequence[str], warehouse: str) -> int | None:
    """Until when (ms) the Iceberg tables of ``topics`` hold what the offline cluster had: per
    table, the newest load's start — its snapshot is the newest of the current ancestry with
    ``sluice.offsets`` that is not a compaction; ``started`` of its run report
    ``<warehouse>/_reports/<run id>.json`` if there is one, else the snapshot's commit time —
    and the earliest over the tables. ``None`` when a table has no load yet."""
    import pyarrow.fs as pafs
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table.snapshots import ancestors_of

    from sluice.pipeline.table.iceberg_commit import OFFSETS_PROPERTY, RUN_ID_PROPERTY
    from sluice.pipeline.table.iceberg_maintenance import COMPACTION_PROPERTY

    catalog = config.open_catalog()
    fs, root = pafs.FileSystem.from_uri(warehouse)
    found: list[int] = []
    for identifier in _iceberg_tables(config, topics):
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            return None
        load = next(
            (
                s
                for s in ancestors_of(table.current_snapshot(), table.metadata)
                if s.summary is not None
                and OFFSETS_PROPERTY in s.summary.additional_properties
                and s.summary.additional_properties.get(COMPACTION_PROPERTY) != "true"
            ),
            None,
        )
        if load is None or load.summary is None:
            return None
        at = load.timestamp_ms
        run_id = load.summary.additional_properties.get(RUN_ID_PROPERTY)
        if run_id:
            report = posixpath.join(root, "_reports", f"{run_id}.json")
            try:
                with fs.open_input_stream(report) as stream:
                    started = json.loads(stream.read()).get("started")
                if started:
                    at = _iso_ms(str(started))
            except (OSError, ValueError):
                pass
        found.append(at)
    return min(found) if found else None


def count_tiers(
    frames: Mapping[str, Any], *, since_window: int | None = None
) -> dict[str, dict[Key, TierCount]]:
    """``{tier: {(topic, window): TierCount}}`` of ``(topic, window, origin)`` frames, in one
    Spark job. A tier whose frame is ``None`` gets no counts (but keeps its key)."""
    from pyspark.sql import functions as F

    result: dict[str, dict[Key, TierCount]] = {tier: {} for tier in frames}
    union = None
    for tier, frame in frames.items():
        if frame is None:
            continue
        tagged = frame.withColumn("tier", F.lit(tier))
        union = tagged if union is None else union.unionByName(tagged)
    if union is None:
        return result
    if since_window is not None:
        union = union.where(F.col("window") >= F.lit(since_window))
    rows = (
        union.groupBy("tier", "topic", "window")
        .agg(F.count(F.lit(1)).alias("count"), F.countDistinct("origin").alias("distinct"))
        .collect()
    )
    for r in rows:
        result[str(r["tier"])][str(r["topic"]), int(r["window"])] = TierCount(
            int(r["count"]), int(r["distinct"])
        )
    return result


def _iso_ms(text: str) -> int:
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def warehouse_coverage(table: str) -> int | None:
    """Until when (ms) the table holds what the offline cluster had: the start of the newest
    published load (``started`` in its run report ``<table's parent>/_reports/<run id>.json``,
    where the load writes it unless ``reports.path`` moved it), else that load's manifest
    ``created`` (its commit, a little later). ``None`` when nothing is published."""
    writer = TableWriter(table)
    manifest = writer.latest_manifest()
    if manifest is None:
        return None
    fs = writer.fs
    report = posixpath.join(posixpath.dirname(writer.path), "_reports", f"{manifest.run_id}.json")
    try:
        started = json.loads(fs.read_bytes(report)).get("started")
        if started:
            return _iso_ms(str(started))
    except (OSError, ValueError):
        pass
    return _iso_ms(manifest.created)
