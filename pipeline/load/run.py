"""The nightly load: Kafka topics into a Parquet table, data and offsets in one atomic step.

The paper's Hadoop job (§4: "data and offsets are stored in HDFS only when the job completes")
on Spark. One run:

1. **plan** — delete staging left by crashed runs that can never publish; read the newest
   published manifest's offsets (``{}`` for a new table); list the subscribed topics'
   partitions and take each one's log end *now*: the run reads ``[committed, end)``, partitions
   it has never seen from their log start. Offsets outside the log are data loss: with
   ``failOnDataLoss=true`` (default) the run fails naming topic, partition and offsets; with
   ``false`` they are clamped and the loss goes into the manifest and the report. This is the
   run's only resolution of offsets: the ranges planned here are the ranges read and recorded.
2. **read+write** — ``spark.read.format("sluice")`` over exactly those ranges, handed to the
   source as its ``readPlan`` option (``sluice.pipeline.source.read_plan``: the ranges, the
   split options, the parsed Avro options and the reader schema; the source neither lists
   partitions nor resolves offsets again), a ``date`` column (UTC ``yyyy-MM-dd`` of the record
   timestamp), Parquet partitioned by ``topic``/``date`` into the
   run's staging directory (``sluice.pipeline.table.commit``).
3. **verify** — count what landed per topic/partition/date from the staged files and check it
   against what the readers fetched (each split writes its rows/bytes/seconds to
   ``_metrics/`` in the staging directory; deleted before publishing).
4. **commit** — write ``_manifest.json`` (every range with rows and bytes, the resume offsets,
   per-date counts, files, data loss, schema ids, error counts) and publish with one
   no-replace rename.
5. **report** — ``<reports>/<run_id>.json`` and a printed summary.

Typed loads (``valueFormat=avro``)
==================================
The values are decoded into typed columns (``sluice.pipeline.source.data_source``, "Typed Avro
values"). The Avro options are parsed once, with the configuration (``LoadConfig.avro``); the
reader schema is resolved once, in the plan phase, and travels to the source in the read plan,
so a version registered while the job runs changes nothing. Undecodable
records go, with ``onDecodeError=errorTable`` (the default here), to the run's **error
table**: Parquet files under ``load=<N>/_errors/`` (columns ``avro_columns.ERROR_ARROW_SCHEMA``:
topic, partition, offset, timestamp, key, the raw value, schema_id, error, reason). They sit in
the run's own directory, so the one rename that publishes the data publishes its errors — never
one without the other, and a rerun after a crash rewrites both. The ``_`` prefix keeps them out
of Spark's and pyarrow's view of the table; read them with
``spark.read.parquet("<table>/load=*/_errors")``. The manifest lists the error files among its
``files`` and counts them per partition in ``error_counts``; the verify phase checks that
fetched = landed + errors for every partition; the report counts them. With
``onDecodeError=fail`` the first undecodable record fails the run (nothing is published) with
a message naming its topic, partition and offset. The writer schema ids of the decoded records
go into the manifest's ``schema_ids``.

A crash anywhere before the rename leaves the table as it was (the rerun re-reads the same
ranges); after it, the rerun finds nothing new. A run with nothing new publishes nothing.
``SLUICE_CRASH_AT=read|staged|manifest|published`` makes the process SIGKILL itself and its
Spark JVM at that point, for the crash tests. ``run_load`` is for one thread; concurrent loads
of one table coordinate only through the table's commit protocol.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import posixpath
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sluice.common.options import boolean, names, positive_int, text
from sluice.pipeline.load.report import LoadReport, PartitionReport
from sluice.pipeline.source.avro_columns import (
    ERROR_ARROW_SCHEMA,
    OutputLayout,
    ReaderSchema,
    ValueSchemaError,
    output_schema,
    resolve_reader_schema,
)
from sluice.pipeline.source.data_source import register
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.options import (
    EARLIEST,
    AvroOptions,
    OffsetOptionError,
    Subscribe,
    complete_offsets,
)
from sluice.pipeline.source.ranges import OffsetRange, Resolution, resolve_ranges
from sluice.pipeline.source.read_plan import READ_PLAN_OPTION, ReadPlan
from sluice.pipeline.source.split_reader import consumer_config
from sluice.pipeline.table.commit import StagedRun, TableWriter
from sluice.pipeline.table.manifest import (
    ERRORS_DIR,
    DataFile,
    ErrorCount,
    RangeRecord,
    RowCount,
    is_error_file,
)

__all__ = ["CRASH_PHASES", "LoadConfig", "LoadConfigError", "LoadError", "run_load"]

log = logging.getLogger("sluice.load")

CRASH_PHASES = ("read", "staged", "manifest", "published")


AVRO_KEYS = (
    "schema.registry.url",
    "valueSchemaSubject",
    "valueSchemaVersion",
    "valueSchemaId",
    "valueColumns",
    "onDecodeError",
)
"""The ``sluice`` source's Avro options a load passes through (with ``valueFormat``)."""

# Columns the table layout owns; a flattened value field may not take them.
_LAYOUT_COLUMNS = ("topic", "partition", "offset", "date")


class LoadConfigError(ValueError):
    """A configuration key is missing or malformed; the message names the key."""


class LoadError(RuntimeError):
    """The run failed; nothing was published. The message says why."""


def _to_uri(path: str) -> str:
    """A plain local path becomes an absolute ``file://`` URI; URIs pass through."""
    if urlsplit(path).scheme:
        return path.rstrip("/")
    return "file://" + os.path.abspath(path)


@dataclass(frozen=True)
class LoadConfig:
    """The keys of ``conf/nightly_load.properties``; see that file for each one's meaning."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    warehouse: str  # a URI (plain paths are made absolute file:// URIs)
    table: str = "events"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    spark_master: str = "local[2]"
    run_id: str | None = None
    reports: str | None = None  # default <warehouse>/_reports
    kafka: dict[str, str] = field(default_factory=dict)  # other kafka.* keys, for consumers
    spark: dict[str, str] = field(default_factory=dict)  # other spark.* keys
    avro: AvroOptions | None = None  # valueFormat=avro: typed columns; error path per run

    @property
    def value_format(self) -> str:
        return "binary" if self.avro is None else "avro"

    @property
    def table_uri(self) -> str:
        return posixpath.join(self.warehouse, self.table)

    @property
    def reports_uri(self) -> str:
        return self.reports or posixpath.join(self.warehouse, "_reports")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LoadConfig:
        def required(key: str) -> str:
            value = text(props, key)
            if value is None:
                raise LoadConfigError(f"{key}: expected a value, found none")
            return value

        topics = names(props, "topics")
        if not topics:
            raise LoadConfigError(f"topics: expected a comma list, found {required('topics')!r}")
        table = (props.get("table") or "events").strip()
        if not table or "/" in table or table.startswith(("_", ".")):
            raise LoadConfigError(f"table: expected a plain directory name, found {table!r}")
        value_format = (text(props, "valueFormat") or "binary").lower()
        if value_format not in ("binary", "avro"):
            raise LoadConfigError(f"valueFormat: expected binary or avro, found {value_format!r}")
        given = {k: v for k in AVRO_KEYS if (v := text(props, k)) is not None}
        avro = None
        if value_format == "avro":
            required("schema.registry.url")
            # Parsed once, here; the run adds its own error table directory (decodeErrorPath).
            try:
                avro = AvroOptions.parse(
                    {"valueFormat": "avro", "onDecodeError": "errorTable", **given}
                )
            except ValueError as exc:
                raise LoadConfigError(str(exc)) from None
        elif given:
            raise LoadConfigError(
                f"{sorted(given)[0]}: expected only with valueFormat=avro, found valueFormat=binary"
            )
        reports = text(props, "reports.path")
        return cls(
            avro=avro,
            bootstrap_servers=required("kafka.bootstrap.servers"),
            topics=topics,
            warehouse=_to_uri(required("warehouse.path")),
            table=table,
            fail_on_data_loss=boolean(props, "failOnDataLoss", True, error=LoadConfigError),
            min_partitions=positive_int(props, "minPartitions", error=LoadConfigError),
            max_records_per_partition=positive_int(
                props, "maxRecordsPerPartition", error=LoadConfigError
            ),
            spark_master=text(props, "spark.master") or "local[2]",
            run_id=text(props, "run.id"),
            reports=_to_uri(reports) if reports else None,
            kafka={
                k: v
                for k, v in props.items()
                if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
            },
            spark={
                k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"
            },
        )

    def kafka_options(self) -> dict[str, str]:
        """The ``kafka.*`` options of every consumer of this load (the planner's, the source's)."""
        return {"kafka.bootstrap.servers": self.bootstrap_servers, **self.kafka}


# -- crash injection ------------------------------------------------------------------------


def _crash_point(phase: str, spark: Any) -> None:
    """SIGKILL this process and its Spark JVM if ``SLUICE_CRASH_AT`` names ``phase``."""
    if os.environ.get("SLUICE_CRASH_AT") != phase:
        return
    log.warning("SLUICE_CRASH_AT=%s: killing the driver and its JVM now", phase)
    _kill_everything(spark)


def _kill_everything(spark: Any) -> None:
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # `python -m ...`: pyspark launched the JVM as our child
        os.kill(proc.pid, signal.SIGKILL)
    elif os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit: the JVM is our parent
        os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _crash_during_read(spark: Any) -> threading.Thread | None:
    """For ``SLUICE_CRASH_AT=read``: kill everything once a read task has run for a moment."""
    if os.environ.get("SLUICE_CRASH_AT") != "read":
        return None

    def watch() -> None:
        tracker = spark.sparkContext.statusTracker()
        while True:
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None and info.numActiveTasks + info.numCompletedTasks > 0:
                    time.sleep(0.3)
                    log.warning("SLUICE_CRASH_AT=read: killing the driver mid-read")
                    _kill_everything(spark)
            time.sleep(0.05)

    thread = threading.Thread(target=watch, name="sluice-crash-at-read", daemon=True)
    thread.start()
    return thread


# -- the run --------------------------------------------------------------------------------


def _default_run_id(table: str) -> str:
    return f"nightly-{table}-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S%fZ')}"


def build_spark(config: LoadConfig) -> Any:
    """A SparkSession for the load: the configured master unless spark-submit chose one."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"sluice-nightly-load-{config.table}")
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # not launched by spark-submit
        builder = builder.master(config.spark_master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        **config.spark,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _phase(report: LoadReport, name: str, progress: Callable[[str], None]) -> Iterator[None]:
    progress(f"{name} ...")
    began = time.monotonic()
    try:
        yield
    finally:
        report.phases[name] = time.monotonic() - began
        progress(f"{name} done in {report.phases[name]:.1f}s")


def _plan(
    config: LoadConfig, committed: Mapping[str, Mapping[int, int]], progress: Callable[[str], None]
) -> Resolution:
    """Every subscribed partition's range ``[committed, log end)``, the run's one resolution:
    the source reads exactly these ranges (``readPlan``) and the manifest records them."""
    with KafkaMetadata(consumer_config(config.kafka_options())) as metadata:
        assigned, bounds = metadata.assigned_bounds(Subscribe(list(config.topics)))
    present = {tp.topic for tp in assigned}
    for topic in config.topics:
        if topic not in present:
            progress(f"topic {topic!r} does not exist (yet); nothing to read from it")
    starting = complete_offsets(committed, assigned, EARLIEST)
    return resolve_ranges(
        bounds,
        starting or "earliest",
        "latest",  # the log ends just listed: the snapshot this run reads up to
        partitions=assigned,
        fail_on_data_loss=config.fail_on_data_loss,
    )


def _read_metrics(staged: StagedRun) -> list[dict[str, Any]]:
    fs = staged.table.fs
    root = posixpath.join(staged.path, "_metrics")
    metrics = [
        json.loads(fs.read_bytes(posixpath.join(root, name)))
        for name, _ in fs.walk_files(root)
        if name.endswith(".json")
    ]
    fs.delete_dir(root)
    return metrics


def _landed(spark: Any, staged: StagedRun, files: Sequence[DataFile]) -> list[RowCount]:
    """Rows per (topic, partition, date) in the staged Parquet data files (Spark does not
    look into ``_errors/``)."""
    if not any(not is_error_file(f.path) for f in files):
        return []
    rows = (
        spark.read.option("basePath", staged.uri)
        .parquet(staged.uri)
        .groupBy("topic", "partition", "date")
        .count()
        .collect()
    )
    return sorted(RowCount(str(r[0]), int(r[1]), str(r[2]), int(r[3])) for r in rows)


def _resolve_avro(
    config: LoadConfig, topics: Sequence[str]
) -> tuple[ReaderSchema, OutputLayout] | None:
    """The reader schema and columns of a typed load of ``topics`` (``None``: binary values).

    One reader schema per table: topics whose ``<topic>-value`` subjects differ need
    ``valueSchemaSubject`` / ``valueSchemaId``, or tables of their own."""
    avro = config.avro
    if avro is None:
        return None
    try:
        reader = resolve_reader_schema(
            avro.registry_url,
            topics,
            subject=avro.subject,
            version=avro.version,
            schema_id=avro.schema_id,
        )
        layout = output_schema(reader, nested=avro.nested, include_headers=True)
    except ValueSchemaError as exc:
        raise LoadError(f"reader schema: {exc}") from None
    taken = [n for n in _LAYOUT_COLUMNS if n in layout.value_fields and not layout.nested]
    if taken:
        raise LoadError(
            f"reader schema {reader.describe()}: expected no value field named "
            f"{' or '.join(_LAYOUT_COLUMNS)} (the table's layout owns them), found {taken}; "
            "set valueColumns=struct"
        )
    return reader, layout


def _read_and_write(
    spark: Any,
    config: LoadConfig,
    reads: Sequence[OffsetRange],
    uri: str,
    avro: tuple[ReaderSchema, OutputLayout] | None,
) -> None:
    """Read the planned ranges with the ``sluice`` source and write them as Parquet at ``uri``.

    The source gets the plan itself (``readPlan``): the ranges, the split options and, for a
    typed load, the options with the run's error table and the reader schema resolved in the
    plan phase — it lists no partitions and asks no registry on the driver."""
    register(spark)
    typed = None
    timestamp = "timestamp"
    if avro is not None:
        assert config.avro is not None
        typed = replace(config.avro, error_path=posixpath.join(uri, ERRORS_DIR))
        timestamp = avro[1].column("timestamp")
    plan = ReadPlan(
        ranges=tuple(reads),
        fail_on_data_loss=config.fail_on_data_loss,
        min_partitions=config.min_partitions,
        max_records_per_partition=config.max_records_per_partition,
        avro=typed,
        reader_schema=None if avro is None else avro[0],
    )
    options = {
        **config.kafka_options(),
        "metricsPath": posixpath.join(uri, "_metrics"),
        READ_PLAN_OPTION: plan.encode(),
    }
    df = spark.read.format("sluice").options(**options).load()
    # The UTC date whatever the session time zone: whole days since the epoch, as a DATE.
    utc_date = F.expr(
        "CAST(date_add(DATE'1970-01-01', "
        f"CAST(floor(unix_micros(`{timestamp}`) / 86400000000) AS INT)) AS STRING)"
    )
    out = df.withColumn("date", utc_date)
    out.write.mode("append").partitionBy("topic", "date").parquet(uri)


def run_load(
    config: LoadConfig,
    spark: Any | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> LoadReport:
    """Run one load; see the module doc. Returns the report (also written and logged).

    Raises ``LoadError`` (report written, status ``failed``) when the run fails; nothing is
    published then. ``spark`` defaults to ``build_spark(config)``.
    """
    say = progress or (lambda message: log.info("%s", message))
    run_id = config.run_id or _default_run_id(config.table)
    writer = TableWriter(config.table_uri)
    report = LoadReport(run_id=run_id, table=writer.uri)
    try:
        return _run(config, spark, writer, report, say)
    except Exception as exc:
        report.finish("failed", "nothing was published", f"{type(exc).__name__}: {exc}")
        say(f"FAILED: {exc}")
        try:
            say(f"report: {report.write(config.reports_uri)}")
        except OSError as write_error:  # the failure matters more than its report
            say(f"could not write the report: {write_error}")
        if isinstance(exc, LoadError):
            raise
        raise LoadError(f"{type(exc).__name__}: {exc}") from exc


def _run(
    config: LoadConfig,
    spark: Any | None,
    writer: TableWriter,
    report: LoadReport,
    say: Callable[[str], None],
) -> LoadReport:
    with _phase(report, "plan", say):
        removed = writer.cleanup_staging()
        for uri in removed:
            say(f"removed dead staging directory {uri}")
        latest = writer.latest_manifest()
        committed = latest.offsets if latest else {}
        say(
            f"table {writer.uri}: "
            + (f"resuming after load={latest.sequence} ({latest.run_id})" if latest else "new")
        )
        try:
            resolution = _plan(config, committed, say)
        except OffsetOptionError as exc:
            raise LoadError(str(exc)) from None
        ranges = resolution.ranges
        report.data_loss = list(resolution.data_loss)
        reads = [r for r in ranges if r.count > 0]
        changed = [
            r
            for r in ranges
            if r.count > 0 or r.start != committed.get(r.topic, {}).get(r.partition, r.start)
        ]
        report.partitions = [PartitionReport(r) for r in changed]
        say(f"{sum(r.count for r in reads)} offsets to read from {len(reads)} partitions")
        avro = _resolve_avro(config, sorted({r.topic for r in reads})) if reads else None
        if avro is not None:
            reader = avro[0]
            report.reader_schema = {
                "id": reader.schema_id,
                "subject": reader.subject,
                "version": reader.version,
            }
            say(f"values: Avro, typed by reader schema {reader.describe()}")
    if not changed:
        report.finish("no-new-data", "no new data since the last run: nothing published")
        say(report.message)
        say(f"report: {report.write(config.reports_uri)}")
        print(report.summary(), flush=True)
        return report

    spark = spark if spark is not None else build_spark(config)
    report.spark_app_id = spark.sparkContext.applicationId
    staged = writer.begin(report.run_id, latest.run_id if latest else None)
    report.sequence = staged.sequence
    say(f"staging load={staged.sequence} at {staged.uri}")
    try:
        with _phase(report, "read+write", say):
            if reads:
                _crash_during_read(spark)
                _read_and_write(spark, config, reads, staged.uri, avro)
        with _phase(report, "verify", say):
            metrics = _read_metrics(staged)
            files, error_counts = _run_files(staged)
            dates = _landed(spark, staged, files)
            _account(report, reads, metrics, dates, error_counts)
        _crash_point("staged", spark)
        with _phase(report, "commit", say):
            manifest = staged.manifest(
                [RangeRecord(p.range, p.rows, p.bytes) for p in report.partitions],
                files,  # the data files and the error table's
                row_counts=dates,
                schema_ids=report.schema_ids,
                data_loss=report.data_loss,
                error_counts=error_counts,
            )
            staged.write_manifest(manifest)
            _crash_point("manifest", spark)
            published = staged.publish()
            _crash_point("published", spark)
    except BaseException:
        if os.environ.get("SLUICE_CRASH_AT") is None:
            with suppress(OSError):
                staged.abort()
        raise
    if report.total_errors:
        report.errors_path = posixpath.join(published.uri, ERRORS_DIR)
    report.finish(
        "published",
        f"published {report.total_rows} rows as {published.uri}"
        + (
            f"; {report.total_errors} undecodable records in its error table {report.errors_path}"
            if report.total_errors
            else ""
        )
        + (
            f"; {report.total_lost} offsets LOST (failOnDataLoss=false)" if report.data_loss else ""
        ),
    )
    say(report.message)
    say(f"report: {report.write(config.reports_uri)}")
    print(report.summary(), flush=True)
    return report


def _run_files(staged: StagedRun) -> tuple[list[DataFile], list[ErrorCount]]:
    """Every Parquet file of the staged run (data and ``_errors/``), with sizes and row
    counts, and the error table's rows per partition."""
    fs = staged.table.fs
    files: list[DataFile] = []
    errors: dict[tuple[str, int], int] = {}
    for relative, size in fs.walk_files(staged.path):
        if not relative.endswith(".parquet"):
            continue
        is_error = is_error_file(relative)
        if not is_error and any(p.startswith(("_", ".")) for p in relative.split("/")):
            raise LoadError(
                f"{staged.uri}: expected no Parquet file under a '_' or '.' directory but "
                f"{ERRORS_DIR}/, found {relative!r}"
            )
        with fs.fs.open_input_file(posixpath.join(staged.path, relative)) as f:
            if is_error:
                table = pq.read_table(f, columns=["topic", "partition"])
                expected = [
                    ERROR_ARROW_SCHEMA.field("topic"),
                    ERROR_ARROW_SCHEMA.field("partition"),
                ]
                if list(table.schema) != expected:
                    raise LoadError(f"{relative}: expected an error file, found {table.schema}")
                for topic, partition in zip(
                    table.column("topic").to_pylist(),
                    table.column("partition").to_pylist(),
                    strict=True,
                ):
                    errors[topic, partition] = errors.get((topic, partition), 0) + 1
                rows = table.num_rows
            else:
                rows = pq.ParquetFile(f).metadata.num_rows
        files.append(DataFile(relative, size, rows))
    counts = [ErrorCount(t, p, n) for (t, p), n in sorted(errors.items())]
    return sorted(files, key=lambda f: f.path), counts


def _account(
    report: LoadReport,
    reads: Sequence[OffsetRange],
    metrics: Sequence[Mapping[str, Any]],
    dates: Sequence[RowCount],
    error_counts: Sequence[ErrorCount] = (),
) -> None:
    """Fill the report's per-partition numbers; fail if the files and the readers disagree:
    every record fetched is in the data files or in the error table, once."""
    by_tp = {(p.range.topic, p.range.partition): p for p in report.partitions}
    schema_ids: dict[str, set[int]] = {}
    for m in metrics:
        part = by_tp[m["topic"], m["partition"]]
        part.bytes += int(m["bytes"])
        part.seconds += float(m["seconds"])
        part.lost += int(m["lost"])
        errors = int(m.get("errors", 0))
        part.rows += int(m["rows"]) - errors
        part.errors += errors
        if m.get("schema_ids"):
            schema_ids.setdefault(m["topic"], set()).update(int(i) for i in m["schema_ids"])
    landed: dict[tuple[str, int], int] = {}
    for d in dates:
        landed[d.topic, d.partition] = landed.get((d.topic, d.partition), 0) + d.rows
    in_error_table = {(e.topic, e.partition): e.rows for e in error_counts}
    for r in reads:
        part = by_tp[r.topic, r.partition]
        written = landed.get((r.topic, r.partition), 0)
        if part.rows != written or written > r.count:
            raise LoadError(
                f"{r.topic}-{r.partition}: expected the staged files to hold the {part.rows} "
                f"records fetched from [{r.start}, {r.end}) and decoded, found {written}"
            )
        routed = in_error_table.pop((r.topic, r.partition), 0)
        if part.errors != routed:
            raise LoadError(
                f"{r.topic}-{r.partition}: expected the error table to hold the {part.errors} "
                f"undecodable records of [{r.start}, {r.end}), found {routed}"
            )
    if in_error_table:
        raise LoadError(f"expected error rows only of partitions read, found {in_error_table}")
    report.dates = list(dates)
    report.schema_ids = {t: sorted(ids) for t, ids in sorted(schema_ids.items())}
