"""The nightly load: Kafka topics into a Parquet table, data and offsets in one atomic step.

The paper's Hadoop job (§4: "data and offsets are stored in HDFS only when the job completes")
on Spark. One run:

1. **plan** — delete staging left by crashed runs that can never publish; read the newest
   published manifest's offsets (``{}`` for a new table); list the subscribed topics'
   partitions (``subscribePattern``: the topics matching it now) and take each one's log end
   *now*: the run reads ``[committed, end)``, partitions it has never seen from where
   ``startingOffsets`` / ``startingTimestamp`` say (default: their log start). Offsets
   outside the log are data loss: with ``failOnDataLoss=true`` (default) the run fails
   naming topic, partition and offsets; with ``false`` they are clamped and the loss goes
   into the manifest and the report. This is the run's only resolution of offsets, in
   offsets throughout (``ranges.resume_ranges``): the ranges planned here are the ranges read
   and recorded.
2. **read+write** — the paper's own design, Camus-style: Spark schedules the planned
   ranges, cut into splits by ``minPartitions`` / ``maxRecordsPerPartition`` and small ones
   packed into tasks of about ``rowsPerTask`` offsets (``ranges.pack_splits``, as Camus and
   Gobblin pack work units), as an RDD of one packed task per partition; each task fetches its
   splits with the source's split reader and writes its
   Parquet files itself with pyarrow, into the run's staging directory
   (``sluice.pipeline.table.commit``) in the table's ``topic=<t>/date=<yyyy-mm-dd>`` layout
   (``date``: the UTC date of the record timestamp), and returns its range, rows, bytes, lost
   offsets, errors and files to the driver through Spark's task results
   (``sluice.pipeline.load.split_writer``). No record crosses into the JVM.
   ``spark.read.format("sluice")`` stays for interactive reads; the load does not use it.
3. **verify** — every planned range with offsets must be accounted for where the driver
   publishes (``sluice.pipeline.load.verify``): the task results (delivered through Spark) must
   tile the plan, and the files they name must be there, with their sizes and rows, on the
   driver's own listing of the table's filesystem. A range read but not found — executors
   writing to a disk the driver cannot see — fails the run naming it
   (``StrandedFilesError``): nothing published, no offset moved.
4. **commit** — write ``_manifest.json`` (every range with rows and bytes, the resume offsets,
   per-date counts, files, data loss, schema ids, error counts; ``subscribePattern``: the
   regex and every topic it matched in the plan) and publish with one
   no-replace rename (``HadoopRenamer``: ``FileContext.rename`` on ``hdfs://``; on ``file://``
   the kernel's ``renameat2(RENAME_NOREPLACE)``, since Hadoop's local rename is
   check-then-rename with a copy fallback).
5. **report** — ``<reports>/<run_id>.json`` and a printed summary.

Every consumer of the run — the planner's and the split writers' — gets the same librdkafka
settings, built once from the configuration (``LoadConfig.consumer``; every key of
``conf/nightly_load.properties`` is declared in ``sluice.pipeline.load.config``): one ``group.id``
per run (``sluice-load-<run id>`` unless ``kafka.group.id`` is set), the ``kafka.`` prefix cut once
when the configuration is parsed.

Before Spark starts, ``sluice.pipeline.load.preflight`` checks what it can without it (the
warehouse, the brokers, the topics, the registry). If no split finishes for ``stallTimeoutMs``
while no broker answers, the read+write job is cancelled (``UnreachableError``, exit 3).
Before the plan the run starts Spark (``sluice.pipeline.load.session``: the master by Spark's
conventions unless the configuration names one), refuses a table on a filesystem without an
atomic rename (object stores), and checks that the driver and the executors can open the
table's filesystem. While the read+write job runs, ``sluice.pipeline.load.progress`` shows
splits done of total, rows/s and an ETA; the final figures go into the report.

Typed loads (``valueFormat=avro|json-schema|protobuf``)
======================================================
The values are decoded into typed columns by each split's task (the source's decoder of the
format, ``sluice.pipeline.source.value_format.batch_decoder``; ``sluice.pipeline.source.
data_source``, "Typed values"). The options are parsed once, with the configuration
(``LoadConfig.typed``); the reader schema (of the format's type) is
resolved once, in the plan phase, and travels to the tasks with them, so a version registered
while the job runs changes nothing. Undecodable
records go, with ``onDecodeError=errorTable`` (the default here), to the run's **error
table**: Parquet files under ``load=<N>/_errors/`` (columns ``typed_columns.ERROR_ARROW_SCHEMA``:
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
Spark JVM at that point, for the crash tests (for ``read`` each task holds after its first
written batch, so the kill always lands mid-read). ``run_load`` is for one thread; concurrent loads
of one table coordinate only through the table's commit protocol.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import posixpath
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sluice.common.gc_pause import collection_paused
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.load.config import LoadConfig, LoadConfigError
from sluice.pipeline.load.errors import LoadError, UnreachableError
from sluice.pipeline.load.preflight import preflight
from sluice.pipeline.load.progress import LoadProgress
from sluice.pipeline.load.report import LoadReport, PartitionReport
from sluice.pipeline.load.session import build_spark, check_filesystem
from sluice.pipeline.load.split_writer import SplitWriter
from sluice.pipeline.load.verify import StagedScan, account, account_iceberg, scan_staged
from sluice.pipeline.source.metadata import KafkaMetadata, MetadataError
from sluice.pipeline.source.options import EARLIEST, LATEST, OffsetOptionError
from sluice.pipeline.source.ranges import (
    LogBounds,
    OffsetRange,
    Resolution,
    pack_splits,
    resume_ranges,
    split_ranges,
)
from sluice.pipeline.source.split_reader import BrokersUnreachableError, SplitResult
from sluice.pipeline.source.typed_columns import OutputLayout, ReaderSchema, ValueSchemaError
from sluice.pipeline.source.value_format import plan_read
from sluice.pipeline.table.commit import PublishedRun, StagedRun, TableWriter
from sluice.pipeline.table.filesystem import HadoopRenamer
from sluice.pipeline.table.manifest import ERRORS_DIR, RangeRecord, Subscription

# pyiceberg only for table.format=iceberg (``_run_iceberg`` imports it): a Parquet load starts
# without paying its import, about half a second at every start.
if TYPE_CHECKING:
    from sluice.pipeline.table.iceberg_run import TopicWriters

__all__ = [
    "CRASH_PHASES",
    "LoadConfig",
    "LoadConfigError",
    "LoadError",
    "build_spark",
    "run_load",
]

log = logging.getLogger("sluice.load")

CRASH_PHASES = ("read", "staged", "manifest", "published")


# Columns the table layout owns; a flattened value field may not take them.
_LAYOUT_COLUMNS = ("topic", "partition", "offset", "date")


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


@contextmanager
def _phase(
    report: LoadReport,
    name: str,
    progress: Callable[[str], None],
    *,
    announce: bool = True,
    collect: bool = True,
) -> Iterator[None]:
    """Time phase ``name`` into the report; say when it starts (``announce``: the long ones)
    and how it ended. ``collect=False`` (the driver's own phases: plan, verify, commit) pauses
    the cyclic garbage collector for the phase (``collection_paused``): their objects — a
    range, a result, a file entry per partition — are not garbage, and a full collection
    walks the driver's whole heap of PySpark, Py4J and pyarrow objects (about 40 ms here).
    The read+write phase keeps it: it may last hours, with Py4J calls all along."""
    if announce:
        progress(f"{name} ...")
    began = time.monotonic()
    ended = "failed after"
    try:
        with nullcontext() if collect else collection_paused():
            yield
        ended = "done in"
    finally:
        report.phases[name] = time.monotonic() - began
        progress(f"{name} {ended} {report.phases[name]:.1f}s")


def _plan(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    committed: Mapping[str, Mapping[int, int]],
    progress: Callable[[str], None],
) -> tuple[Resolution, list[str]]:
    """Every subscribed partition's range ``[committed, log end)`` (a partition the table has
    never seen: from where ``startingOffsets`` / ``startingTimestamp`` say, by default its log
    start), the run's one resolution: the split writers read exactly these ranges and the
    manifest records them. The log ends are the ones just listed: the snapshot this run reads
    up to. ``subscribePattern`` is matched against the topics listed here; returned beside
    the ranges: the topics subscribed that exist, sorted (a pattern's: the ones it matched)."""
    resumed = {TopicPartition(t, p): o for t, ps in committed.items() for p, o in ps.items()}
    with KafkaMetadata(consumer) as metadata:
        assigned, bounds = metadata.assigned_bounds(config.strategy)
        fresh = [tp for tp in assigned if tp not in resumed and tp in bounds]
        starts = _first_starts(config, metadata, bounds, fresh)
    present = {tp.topic for tp in assigned}
    if config.subscribe_pattern is not None:
        progress(f"{config.described_topics}: {', '.join(sorted(present)) or 'none'}")
    for topic in config.topics:
        if topic not in present:
            progress(f"topic {topic!r} does not exist (yet); nothing to read from it")
    resolution = resume_ranges(
        bounds,
        {**starts, **resumed},
        partitions=assigned,
        fail_on_data_loss=config.fail_on_data_loss,
    )
    return resolution, sorted(present)


def _first_starts(
    config: LoadConfig,
    metadata: KafkaMetadata,
    bounds: Mapping[TopicPartition, LogBounds],
    fresh: Sequence[TopicPartition],
) -> dict[TopicPartition, int]:
    """Where each partition the table has never seen starts: ``startingTimestamp`` (its first
    offset at or after it, the log end when no record is that late), else ``startingOffsets``
    (earliest, latest, or the JSON's offset; -2/-1 and unnamed partitions: earliest / latest
    as Spark reads them, an unnamed one earliest)."""
    if not fresh:
        return {}
    if config.starting_timestamp is not None:
        found = metadata.offsets_for_times(dict.fromkeys(fresh, config.starting_timestamp))
        return {
            tp: bounds[tp].log_end if found.get(tp) is None else int(found[tp] or 0) for tp in fresh
        }
    spec = config.starting_offsets
    starts: dict[TopicPartition, int] = {}
    for tp in fresh:
        log = bounds[tp]
        if spec == "earliest":
            offset = EARLIEST
        elif spec == "latest":
            offset = LATEST
        else:
            offset = spec.get(tp.topic, {}).get(tp.partition, EARLIEST)
        starts[tp] = {EARLIEST: log.log_start, LATEST: log.log_end}.get(offset, offset)
    return starts


def _resolve_typed(
    config: LoadConfig, topics: Sequence[str]
) -> tuple[ReaderSchema, OutputLayout] | None:
    """The reader schema and columns of a typed load of ``topics`` (``None``: binary values).

    One reader schema per table: topics whose ``<topic>-value`` subjects differ need
    ``valueSchemaSubject`` / ``valueSchemaId``, or tables of their own."""
    typed = config.typed
    if typed is None:
        return None
    try:
        reader, layout = plan_read(typed, topics, include_headers=True)
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
    consumer: Mapping[str, Any],
    reads: Sequence[OffsetRange],
    uri: str,
    avro: tuple[ReaderSchema, OutputLayout] | None,
    watch: Callable[[str, int], LoadProgress],
    report: LoadReport,
    iceberg: Mapping[str, TopicWriters] | None = None,
) -> list[SplitResult]:
    """Fetch the planned ranges and write them as Parquet at ``uri``, one Spark task per split
    (``sluice.pipeline.load.split_writer``); return the tasks' results.

    The splits are the planned ranges cut by ``minPartitions`` / ``maxRecordsPerPartition``;
    Spark schedules them as an RDD of one split per partition, retries failed tasks (each
    rewrites its own files) and delivers every task's ``SplitResult`` to the driver with the
    job's result, whatever filesystem the tasks wrote to. For a typed load the tasks get the
    options with the run's error table and the reader schema resolved in the plan phase — no
    registry request on the driver. The job runs in its own job group, which
    ``watch(group, splits)`` follows for the progress line. ``iceberg``: the tasks write
    each topic's Iceberg data and error files instead (``table.format=iceberg``)."""
    typed = None
    timestamp = "timestamp"
    if avro is not None:
        assert config.typed is not None
        options = replace(config.typed, error_path=posixpath.join(uri, ERRORS_DIR))
        typed = (options, avro[0], avro[1])
        timestamp = avro[1].column("timestamp")
    splits = split_ranges(
        list(reads),
        min_partitions=config.min_partitions,
        max_records_per_partition=config.max_records_per_partition,
    )
    tasks = _pack(config, splits, int(spark.sparkContext.defaultParallelism))
    task = SplitWriter(
        staging_uri=uri,
        consumer=consumer,
        fail_on_data_loss=config.fail_on_data_loss,
        include_headers=True,  # the table keeps the headers (the typed layout has them too)
        typed=typed,
        timestamp=timestamp,
        hold_after_first_batch_s=60.0 if os.environ.get("SLUICE_CRASH_AT") == "read" else 0.0,
        poll_timeout_s=config.split_timeout_s,
        iceberg=iceberg,
    )
    group = f"sluice-load-{report.run_id}"
    context = spark.sparkContext
    context.setJobGroup(group, f"sluice load {report.run_id}: read+write")
    progress = watch(group, len(tasks))
    progress.configure_stall(
        config.stall_timeout_ms / 1000, lambda waiting: _stalled(config, consumer, tasks, waiting)
    )
    progress.start()
    finished = False
    try:
        outcomes: list[SplitResult] = (
            context.parallelize(tasks, len(tasks)).mapPartitions(task).collect()
        )
        finished = True
    except Exception as exc:
        if progress.stalled is not None:
            progress.await_cancelled()  # the killed tasks end quietly before the reason
            raise UnreachableError(progress.stalled) from None
        raise _from_worker(exc) from exc
    finally:
        figures = progress.stop(finished=finished)
        context.setLocalProperty("spark.jobGroup.id", None)
    report.progress = figures.to_json()
    return outcomes


def _pack(
    config: LoadConfig, splits: Sequence[OffsetRange], parallelism: int
) -> list[list[OffsetRange]]:
    """The splits packed into tasks (``ranges.pack_splits``) of about ``rowsPerTask`` offsets,
    fewer so that every core gets work, no more than ``maxRecordsPerPartition``; one split per
    task when packing would leave fewer tasks than ``minPartitions`` asks for."""
    total = sum(s.count for s in splits)
    target = min(config.rows_per_task, -(-total // max(parallelism, config.min_partitions or 1, 1)))
    if config.max_records_per_partition is not None:
        target = min(target, config.max_records_per_partition)
    tasks = pack_splits(splits, max(target, 1))
    if len(tasks) < min(config.min_partitions or 0, len(splits)):
        return [[s] for s in splits]
    return tasks


def _stalled(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    tasks: Sequence[Sequence[OffsetRange]],
    waiting: Sequence[int],
) -> str | None:
    """Why a read+write with no split finished for ``stallTimeoutMs`` must stop, or ``None``
    while a broker answers (a long split is reading; ``kafkaConsumer.pollTimeoutMs`` bounds
    each split). The reason names the brokers and the splits that were waiting."""
    try:
        with KafkaMetadata(consumer, timeout_s=5.0) as metadata:
            metadata.partitions_per_topic()
        return None
    except MetadataError as exc:
        failed = str(exc).partition("brokers not answering: ")[2]
    names = [s.name() for i in waiting if i < len(tasks) for s in tasks[i]]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"read+write: expected a split to finish within stallTimeoutMs="
        f"{config.stall_timeout_ms}, found none, and no broker of {config.bootstrap_servers} "
        f"answering ({failed or 'no answer'}); waiting splits: {shown or 'unknown'}"
    )


_CAUSE = re.compile(r"^(?:[\w.]+\.)?(?P<type>\w+(?:Error|Exception)): (?P<message>.+)$", re.M)


def _from_worker(exc: Exception) -> Exception:
    """A failed Spark job reduced to its cause: the last ``SomeError: message`` line of the
    Python worker's traceback inside Spark's exception (``PythonException`` /
    ``Py4JJavaError``), as a ``LoadError`` (``UnreachableError`` when a split timed out on
    brokers that did not answer); any other exception is returned as it is."""
    text = str(exc)
    if "Traceback (most recent call last)" not in text:
        return exc
    causes = [m for m in _CAUSE.finditer(text) if m.group("type") not in ("Py4JJavaError",)]
    if not causes:
        return exc
    cause = causes[-1]
    line = f"{cause.group('type')}: {cause.group('message').strip()}"
    if cause.group("type") == BrokersUnreachableError.__name__:
        return UnreachableError(line)
    return LoadError(line)


def run_load(
    config: LoadConfig,
    spark: Any | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    live: bool = False,
) -> LoadReport:
    """Run one load; see the module doc. Returns the report (also written and logged).

    Raises ``LoadError`` (report written, status ``failed``) when the run fails; nothing is
    published then. ``spark`` defaults to ``build_spark(config)``. ``progress`` gets the
    progress lines (default: the ``sluice.load`` logger); ``live=True`` (a TTY) shows the
    read+write progress as one line rewritten in place on stderr instead.
    """
    say = progress or (lambda message: log.info("%s", message))
    run_id = config.run_id or _default_run_id(config.table)
    report = LoadReport(run_id=run_id, table=config.table_uri)
    consumer = config.consumer(run_id)
    try:
        # Everything checkable without Spark first: brokers, topics, registry, warehouse.
        preflight(config, consumer)
        spark = spark if spark is not None else build_spark(config, say)
        report.spark_app_id = spark.sparkContext.applicationId

        def watch(group: str, splits: int) -> LoadProgress:
            offsets = sum(p.range.count for p in report.partitions)
            return LoadProgress(spark, group, splits=splits, offsets=offsets, say=say, live=live)

        if config.iceberg is not None:  # the catalog commits: no rename, no TableWriter
            return _run_iceberg(config, consumer, spark, report, say, watch)
        check_filesystem(spark, config.table_uri, say)
        # One publish path for every scheme: the rename through the JVM's Hadoop FileContext.
        writer = TableWriter(config.table_uri, HadoopRenamer.from_spark(spark))
        report.table = writer.uri
        return _run(config, consumer, spark, writer, report, say, watch)
    except Exception as exc:
        report.finish("failed", "nothing was published", f"{type(exc).__name__}: {exc}")
        try:
            say(f"report: {report.write(config.reports_uri)}")
        except OSError as write_error:  # the failure matters more than its report
            say(f"could not write the report: {write_error}")
        if isinstance(exc, LoadError | LoadConfigError):
            raise
        raise LoadError(f"{type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class _Plan:
    """What the plan phase decided: the newest published run (``None`` for a new table), the
    ranges to read (``[start, end)`` with offsets), whether any partition moved at all (a
    clamped empty range moves its resume offset too) and the typed read, if any."""

    previous_run: str | None
    reads: list[OffsetRange]
    changed: bool
    avro: tuple[ReaderSchema, OutputLayout] | None


def _plan_phase(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    writer: TableWriter,
    report: LoadReport,
    say: Callable[[str], None],
) -> _Plan:
    """Clean dead staging, read the resume offsets, plan the ranges, resolve the reader
    schema; the report gets the partitions, the data loss and the reader schema."""
    for uri in writer.cleanup_staging():
        say(f"removed dead staging directory {uri}")
    latest = writer.latest_manifest()
    committed = latest.offsets if latest else {}
    where = f"table {writer.uri}: " + (
        f"resuming after load={latest.sequence} ({latest.run_id})" if latest else "new"
    )
    reads, changed, avro = _plan_reads(config, consumer, committed, report, say, where)
    return _Plan(latest.run_id if latest else None, reads, changed, avro)


def _plan_reads(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    committed: Mapping[str, Mapping[int, int]],
    report: LoadReport,
    say: Callable[[str], None],
    where: str,
    adjust: Callable[[list[OffsetRange]], list[OffsetRange]] | None = None,
) -> tuple[list[OffsetRange], bool, tuple[ReaderSchema, OutputLayout] | None]:
    """The plan from ``committed`` (either table format's resume offsets): the ranges to
    read, whether any partition moved, the typed read; ``adjust`` (Iceberg's pinning) may cut
    the planned ranges first. ``where`` opens the plan's progress line."""
    try:
        resolution, present = _plan(config, consumer, committed, say)
    except OffsetOptionError as exc:
        raise LoadError(str(exc)) from None
    ranges = list(resolution.ranges) if adjust is None else adjust(list(resolution.ranges))
    report.topics = sorted({r.topic for r in ranges})
    if config.subscribe_pattern is not None:  # every topic matched, those with nothing new too
        pattern = config.subscribe_pattern.pattern.pattern
        report.subscription = Subscription(pattern, tuple(present))
    report.data_loss = list(resolution.data_loss)
    reads = [r for r in ranges if r.count > 0]
    # A partition moved if it has offsets to read or its resume offset moves (a clamp). A
    # partition the table has never seen is recorded at once when where it starts was chosen
    # (startingOffsets / startingTimestamp: "latest" must not move on by the next run) or when
    # a pattern chose its topic (the manifest then names every topic that matched).
    chosen = (
        config.starting_offsets != "earliest"
        or config.starting_timestamp is not None
        or config.subscribe_pattern is not None
    )
    changed = [
        r
        for r in ranges
        if r.count > 0
        or (
            r.start != committed[r.topic][r.partition]
            if r.partition in committed.get(r.topic, {})
            else chosen
        )
    ]
    report.partitions = [PartitionReport(r) for r in changed]
    say(f"{where}; {sum(r.count for r in reads)} offsets to read from {len(reads)} partitions")
    avro = _resolve_typed(config, sorted({r.topic for r in reads})) if reads else None
    if avro is not None:
        reader = avro[0]
        report.reader_schema = {
            "id": reader.schema_id,
            "subject": reader.subject,
            "version": reader.version,
            "type": reader.schema_type,
        }
        assert config.typed is not None
        say(f"values: {config.value_format}, typed by reader schema {reader.describe()}")
    return reads, bool(changed), avro


def _finish(report: LoadReport, config: LoadConfig, say: Callable[[str], None]) -> LoadReport:
    """Write the report and print its summary (which says the outcome: once); the collector
    paused as in the driver's phases (``_phase``)."""
    with collection_paused():
        say(f"report: {report.write(config.reports_uri)}")
        print(report.summary(), flush=True)
    return report


def _publish(staged: StagedRun, report: LoadReport, scan: StagedScan, spark: Any) -> PublishedRun:
    """The commit step, the one place a table format decides how a verified run becomes
    visible: here the Camus-style Parquet table's manifest (every range with rows and bytes,
    the resume offsets, per-date counts, files, data loss, schema ids, error counts) written
    into the staged run and published with one no-replace rename. ``report`` and ``scan`` are
    the verified figures and files; nothing before this step is visible to readers."""
    manifest = staged.manifest(
        [RangeRecord(p.range, p.rows, p.bytes) for p in report.partitions],
        scan.files,  # the data files and the error table's
        row_counts=scan.row_counts,
        schema_ids=report.schema_ids,
        data_loss=report.data_loss,
        error_counts=scan.error_counts,
    )
    if report.subscription is not None:  # subscribePattern: what it matched at plan time
        manifest = replace(manifest, subscription=report.subscription)
    staged.write_manifest(manifest)
    _crash_point("manifest", spark)
    published = staged.publish()
    _crash_point("published", spark)
    return published


def _run(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    spark: Any,
    writer: TableWriter,
    report: LoadReport,
    say: Callable[[str], None],
    watch: Callable[[str, int], LoadProgress],
) -> LoadReport:
    with _phase(report, "plan", say, announce=False, collect=False):
        plan = _plan_phase(config, consumer, writer, report, say)
    if not plan.changed:
        report.finish("no-new-data", "no new data since the last run: nothing published")
        return _finish(report, config, say)

    reads = plan.reads
    staged = writer.begin(report.run_id, plan.previous_run)
    report.sequence = staged.sequence
    say(f"staging load={staged.sequence} at {staged.uri}")
    try:
        outcomes: list[SplitResult] = []
        with _phase(report, "read+write", say):
            if reads:
                _crash_during_read(spark)
                outcomes = _read_and_write(
                    spark, config, consumer, reads, staged.uri, plan.avro, watch, report
                )
        with _phase(report, "verify", say, announce=False, collect=False):
            scan = scan_staged(staged, {path for o in outcomes for path, _, _ in o.files})
            for relative in scan.removed:
                say(f"removed {relative}: no task result names it (a failed attempt's)")
            account(report, reads, outcomes, scan, staged.uri)
        if report.progress is not None:  # the exact rate, now that the rows are counted
            seconds = report.phases.get("read+write", 0.0)
            done = report.total_rows + report.total_errors
            report.progress["rows_per_second"] = round(done / seconds, 1) if seconds else 0.0
        _crash_point("staged", spark)
        with _phase(report, "commit", say, announce=False, collect=False):
            published = _publish(staged, report, scan, spark)
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
        # the error table's count and place: the summary's ERRORS line says them, once
        + (
            f"; {report.total_lost} offsets LOST (failOnDataLoss=false)" if report.data_loss else ""
        ),
    )
    return _finish(report, config, say)


def _run_iceberg(
    config: LoadConfig,
    consumer: Mapping[str, Any],
    spark: Any,
    report: LoadReport,
    say: Callable[[str], None],
    watch: Callable[[str, int], LoadProgress],
) -> LoadReport:
    """``_run`` for ``table.format=iceberg`` (``sluice.pipeline.load.iceberg_tables``): plan
    from the tables' snapshots (pinned topics reproduce a crashed run's ranges), create or
    check the tables before any read, write the files, account for them, and publish with one
    conditional catalog commit per table; the parquet path's crash points, ``manifest``
    falling between the error tables' commits and the data tables'."""
    from sluice.pipeline.load import iceberg_tables

    with _phase(report, "plan", say, announce=False, collect=False):
        run = iceberg_tables.begin(config, consumer)
        report.table = ", ".join(sorted(run.data))
        resumed = any(run.committed.values())
        where = f"tables {report.table}: " + ("resuming from their snapshots" if resumed else "new")
        if run.pinned:
            where += f"; {', '.join(sorted(run.pinned))} pinned to a crashed run's ranges"
        reads, changed, avro = _plan_reads(
            config, consumer, run.committed, report, say, where,
            lambda ranges: iceberg_tables.pin(ranges, run.committed, run.pinned),
        )  # fmt: skip
        if changed:
            writers = iceberg_tables.writers(run, avro)
    if not changed:
        report.finish("no-new-data", "no new data since the last run: nothing published")
        return _finish(report, config, say)
    outcomes: list[SplitResult] = []
    with _phase(report, "read+write", say):
        if reads:
            _crash_during_read(spark)
            outcomes = _read_and_write(
                spark, config, consumer, reads, config.warehouse, avro, watch, report, writers
            )
    with _phase(report, "verify", say, announce=False, collect=False):
        roots = [w.errors.location for w in writers.values() if w.errors is not None]
        files = account_iceberg(report, reads, outcomes, roots)
    if report.progress is not None:  # the exact rate, now that the rows are counted
        seconds = report.phases.get("read+write", 0.0)
        done = report.total_rows + report.total_errors
        report.progress["rows_per_second"] = round(done / seconds, 1) if seconds else 0.0
    _crash_point("staged", spark)
    offsets: dict[str, dict[int, int]] = {}
    for part in report.partitions:
        offsets.setdefault(part.range.topic, {})[part.range.partition] = part.range.end
    with _phase(report, "commit", say, announce=False, collect=False):
        snapshots = iceberg_tables.commit(
            run, files, offsets, report.run_id, lambda: _crash_point("manifest", spark)
        )
        _crash_point("published", spark)
    committed = ", ".join(f"{t}@{s}" for t, s in sorted(snapshots.items()) if s is not None)
    if report.total_errors:
        report.errors_path = ", ".join(sorted(run.errors))
    report.finish(
        "published",
        f"published {report.total_rows} rows to {report.table} (snapshots {committed or 'none'})"
        # the error table's count and place: the summary's ERRORS line says them, once
        + (
            f"; {report.total_lost} offsets LOST (failOnDataLoss=false)" if report.data_loss else ""
        ),
    )
    return _finish(report, config, say)
