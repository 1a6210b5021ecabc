"""The ``sluice`` PySpark Data Source: Kafka topics as a DataFrame, batch and streaming.

The paper's Hadoop input format (§4: "a special Kafka input format ... pulls from brokers and
stores data and offsets together") as a Spark 4 Python Data Source, with the option names and
columns of Spark's own Kafka source (``org.apache.spark.sql.kafka010``)::

    spark.dataSource.register(SluiceDataSource)
    df = (spark.read.format("sluice")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "page_views")          # or subscribePattern / assign
          .option("startingOffsets", "earliest")      # or Spark's offsets JSON
          .option("endingOffsets", "latest")
          .load())

Columns, exactly Spark's (``KafkaRecordToRowConverter``): ``key`` binary, ``value`` binary,
``topic`` string, ``partition`` int, ``offset`` bigint, ``timestamp`` timestamp,
``timestampType`` int; with ``includeHeaders=true`` (default false, as Spark) also ``headers``
array<struct<key:string,value:binary>>.

Options (Spark arrives with them lower-cased; every name is matched case-insensitively) are
Spark's Kafka source's — ``kafka.*`` (consumer settings, ``kafka.bootstrap.servers`` required;
``sluice.pipeline.source.kafka_params`` translates Java-only keys or refuses them),
``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets``, ``endingOffsets``,
``startingTimestamp``, ``endingTimestamp``, ``startingOffsetsByTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``
(``sluice.pipeline.source.options``), ``failOnDataLoss``, ``minPartitions``,
``maxRecordsPerPartition``, ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
``maxTriggerDelay``, ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``,
``kafkaConsumer.pollTimeoutMs``, ``groupIdPrefix``, ``includeHeaders``
(``sluice.pipeline.source.read_options``) — and Sluice's: ``arrowBatchRows`` and the typed
values' options below. Any other name is an error naming the nearest known one
(``sluice.pipeline.source.option_names``), raised when the DataFrame is created. As in Spark,
a batch read logs and ignores the trigger options.

Typed values (``valueFormat=avro|json-schema|protobuf``)
========================================================
With ``valueFormat=avro``, ``json-schema`` or ``protobuf`` (default ``binary``: Spark's columns
above) each value is read as Confluent-framed Avro, JSON or Protobuf and decoded into typed
columns (``sluice.pipeline.source.value_format`` chooses the format's module, which has the
type mapping: ``avro_columns``, ``json_schema_columns``, ``protobuf_columns``)::

    spark.read.format("sluice").option("kafka.bootstrap.servers", ...)
        .option("subscribe", "page_views")
        .option("valueFormat", "avro")                  # or json-schema, protobuf
        .option("schema.registry.url", "http://127.0.0.1:8081")
        .option("decodeErrorPath", "/warehouse/page_views_errors")   # or onDecodeError=fail
        .load()

``schema.registry.url`` (required) is the registry. The **reader schema** — the columns — is
``valueSchemaId`` if given, else version ``valueSchemaVersion`` (default ``latest``) of
``valueSchemaSubject`` (default ``<topic>-value``; every subscribed or assigned topic must then
have the same one; with ``subscribePattern`` name the subject or id); it must be of the
format's type. It is chosen once, on the driver, when the DataFrame is created. Each record
names its writer schema (its id is in the value's header; fetched once per id per executor):
Avro records are decoded with it and resolved to the reader schema, JSON documents validated
against it, Protobuf messages checked to be the reader's message; so records of several
compatible versions land in the same columns. ``valueSchemaMessage`` (Protobuf only) names the
value's message type by full name; default the schema's first message.

``valueColumns=flatten`` (default) puts the value's fields first, then ``key``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``timestampType`` (and ``headers``); a Kafka column
whose name a value field takes is renamed ``kafka_<name>`` (``page_view.avsc`` has its own
``timestamp``, so the record's is ``kafka_timestamp``). ``valueColumns=struct`` keeps Spark's
Kafka columns with ``value`` a struct (what ``from_avro`` / ``from_protobuf`` give).

An undecodable record (null value, wrong magic byte, truncated, unknown schema id, a body that
does not decode, resolve, validate or fit the columns) is never dropped:
``onDecodeError=errorTable`` (the default when ``decodeErrorPath`` is set) writes it to
Parquet under ``decodeErrorPath`` — one file per split,
``part-<topic>-<partition>-<start>-<end>.parquet``, columns ``typed_columns.ERROR_ARROW_SCHEMA``
(topic, partition, offset, timestamp, key, raw value, schema_id, error, reason); a retried task
rewrites its own file. ``onDecodeError=fail`` (the default without ``decodeErrorPath``) fails
the task, hence the job, with an ``UndecodableValueError`` naming topic, partition and offset.

Lifecycle (``pyspark.sql.datasource``)
======================================
The options are parsed once per DataFrame (``sluice.pipeline.source.options``). On the driver
``partitions()`` lists the partitions, asks each for its log bounds, resolves the offset
options against them (``sluice.pipeline.source.ranges``: data loss fails or is clamped) and
returns a **list** of ``SluicePartition`` splits, cut by ``minPartitions`` /
``maxRecordsPerPartition``. Spark pickles the reader to the executors,
where ``read()`` opens its own consumer (``sluice.pipeline.source.split_reader.read_split``).
A start or end given by timestamp is looked up first (ListOffsets by timestamp,
``KafkaMetadata.offsets_for_times``) and becomes offsets (``ranges.timestamp_offsets``).
The streaming reader's offsets are Spark's offsets JSON as dicts, ``{"topic": {"0": 42}}``:
``initialOffset`` resolves the starting options,
``latestOffset`` takes the log ends (capped by the read limit and, under
``Trigger.AvailableNow``, by the target recorded in ``prepareForTriggerAvailableNow``), and
partitions that appear between batches are read from their earliest offset. With
``minOffsetsPerTrigger``, ``latestOffset`` returns the start again (no new batch) while fewer
offsets wait and ``maxTriggerDelay`` has not passed since the last batch — Spark's
``KafkaMicroBatchStream.delayBatch``; the first batch is never delayed, a read limit of
``ReadAllAvailable`` and ``Trigger.AvailableNow`` (which must end) are never delayed either.

Isolation: ``kafka.isolation.level`` defaults to ``read_committed`` (Spark's default is the
Java client's ``read_uncommitted``; why Sluice differs is in ``sluice.pipeline.source.isolation``).
The driver's consumer lists offsets with the same level as the executors read with, so the log
ends above — "latest", ``latestOffset`` — are last stable offsets: ranges stop
before any open transaction, and a split yields the committed records of its range (fewer than
its offsets when it holds aborted records or transaction markers; the split reader bounds it by
offset, not by count).

Consumer group ids are Spark's (``kafka_params.group_ids``): ``kafka.group.id`` if given,
else ``<groupIdPrefix>-<uuid>-driver`` for the driver's lookups and ``...-executor`` for the
splits, made once per reader.

A ``SluiceDataSource`` and its readers are used by one thread at a time, as Spark does.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.sink.data_sink import SluiceBatchWriter, SluiceStreamWriter
from sluice.pipeline.source.kafka_params import group_ids, kafka_params
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.option_names import check_option_names
from sluice.pipeline.source.options import (
    EARLIEST,
    LATEST,
    CaseInsensitiveOptions,
    OffsetSpec,
    SourceOptions,
    TimestampSpec,
    ValueOptions,
    named_topics,
    parse_consumer_strategy,
    parse_source_options,
)
from sluice.pipeline.source.ranges import (
    DataLoss,
    LogBounds,
    OffsetRange,
    OffsetsOutOfBoundsError,
    Resolution,
    resolve_ranges,
    split_ranges,
    timestamp_offsets,
)
from sluice.pipeline.source.read_options import ReadOptions, parse_read_options
from sluice.pipeline.source.split_reader import (
    SPARK_SCHEMA_DDL,
    SPARK_SCHEMA_DDL_NO_HEADERS,
    consumer_settings,
    read_split,
)
from sluice.pipeline.source.typed_columns import OutputLayout, ReaderSchema, write_error_file
from sluice.pipeline.source.value_format import batch_decoder, plan_read

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    _HAS_READ_LIMIT = True
except ImportError:  # pragma: no cover - older pyspark: the option is applied directly
    _HAS_READ_LIMIT = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in so the class statement below works on pyspark < 4.2."""


__all__ = [
    "SluiceBatchReader",
    "SluiceDataSource",
    "SluicePartition",
    "SluiceStreamReader",
    "TypedRead",
    "ValueOptions",
    "register",
    "resolve_typed",
]

log = logging.getLogger("sluice.source")

Offsets = dict[str, dict[str, int]]
"""Streaming offsets as Spark journals them: ``{"topic": {"0": 42}}``."""

TypedRead = tuple[ValueOptions, ReaderSchema, OutputLayout]
"""A typed read resolved on the driver: its options, its reader schema and its columns."""


class SluicePartition(InputPartition):
    """One Spark input partition; ``split`` is the ``[start, end)`` of one Kafka partition."""

    def __init__(self, split: OffsetRange) -> None:
        super().__init__(split.name())
        self.split = split


def register(spark: Any) -> None:
    """Register the ``sluice`` format with ``spark`` (idempotent)."""
    spark.dataSource.register(SluiceDataSource)


def resolve_typed(options: Mapping[str, str]) -> TypedRead | None:
    """Driver side: the typed read's options, reader schema and columns (``None``: binary).

    Asks the registry for the reader schema (``sluice.pipeline.source.value_format``).
    """
    opts = CaseInsensitiveOptions(options)
    include_headers = parse_read_options(opts).include_headers
    typed = ValueOptions.parse(opts)
    if typed is None:
        return None
    typed.require_error_path()
    reader, layout = plan_read(
        typed, named_topics(parse_consumer_strategy(opts)), include_headers=include_headers
    )
    return typed, reader, layout


class _Unresolved(enum.Enum):
    """The typed read is not resolved yet: a reader built without a ``SluiceDataSource``."""

    RESOLVE = enum.auto()


class _Common:
    """What batch and streaming readers share: the parsed options and the executor's ``read``.

    ``typed`` is the typed read the data source resolved (``None``: binary values); left out,
    the reader resolves it from ``options`` itself.
    """

    def __init__(
        self,
        options: Mapping[str, str],
        *,
        fail_on_data_loss: bool,
        min_partitions: int | None,
        max_records_per_partition: int | None,
        typed: TypedRead | None | _Unresolved,
        streaming: bool = False,
    ) -> None:
        opts = CaseInsensitiveOptions(options)
        read = parse_read_options(opts)
        self.read_options: ReadOptions = read
        params = kafka_params(opts)  # librdkafka's keys: the kafka. prefix cut once, here
        ids = group_ids(opts, read.group_id_prefix, streaming=streaming)
        self.config = consumer_settings({**params, "group.id": ids.executor})
        self.driver_config = consumer_settings({**params, "group.id": ids.driver})
        self.fail_on_data_loss = fail_on_data_loss
        self.min_partitions = min_partitions
        self.max_records_per_partition = max_records_per_partition
        if isinstance(typed, _Unresolved):
            typed = resolve_typed(opts)
        self.typed: TypedRead | None = typed

    def _metadata(self) -> KafkaMetadata:
        read = self.read_options
        return KafkaMetadata(
            self.driver_config,
            attempts=read.fetch_offset_attempts,
            retry_interval_s=read.fetch_offset_retry_interval_ms / 1000,
        )

    def _resolve_limit(
        self,
        metadata: KafkaMetadata,
        timestamps: TimestampSpec | None,
        offsets: OffsetSpec,
        assigned: list[TopicPartition],
        bounds: Mapping[TopicPartition, LogBounds],
        *,
        starting: bool,
    ) -> OffsetSpec:
        """``offsets``, or the offsets the timestamp option (which takes precedence) finds."""
        if timestamps is None:
            return offsets
        asked = {
            tp: ts
            for tp, ts in timestamps.timestamps(assigned).items()
            if tp in bounds and ts not in (EARLIEST, LATEST)
        }
        found = metadata.offsets_for_times(asked)
        return timestamp_offsets(timestamps, assigned, found, starting=starting)

    def _splits(self, ranges: list[OffsetRange]) -> list[SluicePartition]:
        splits = split_ranges(
            ranges,
            min_partitions=self.min_partitions,
            max_records_per_partition=self.max_records_per_partition,
        )
        return [SluicePartition(r) for r in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: the records of one split (see ``sluice.pipeline.source.split_reader``)."""
        if not isinstance(partition, SluicePartition):
            raise TypeError(f"expected a SluicePartition, found {type(partition).__name__}")
        split = partition.split
        read = self.read_options
        batches = read_split(
            split,
            self.config,
            fail_on_data_loss=self.fail_on_data_loss,
            include_headers=read.include_headers,
            batch_rows=read.batch_rows,
            poll_timeout_s=read.poll_timeout_s,
        )
        if self.typed is None:
            yield from batches
        else:
            yield from self._decode(split, batches)

    def _decode(
        self, split: OffsetRange, batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """Typed batches of one split; its undecodable records go to one error file."""
        assert self.typed is not None
        options, reader, layout = self.typed
        decoder = batch_decoder(
            options.value_format,
            options.registry_url,
            reader,
            layout,
            fail=options.on_decode_error == "fail",
            message=options.message,
        )
        errors: list[pa.RecordBatch] = []
        for raw in batches:
            typed, bad = decoder.decode(raw)
            if bad.num_rows:
                errors.append(bad)
            if typed.num_rows:
                yield typed
        if errors:
            assert options.error_path is not None  # onDecodeError=fail raised already
            name = f"part-{split.topic}-{split.partition}-{split.start}-{split.end}.parquet"
            write_error_file(options.error_path, name, errors)


def _log_losses(losses: list[DataLoss]) -> None:
    for loss in losses:
        log.warning(
            "data loss on %s-%s: %s offset %d not in the log [%d, %d), reading from %d "
            "(%d offsets lost)",
            loss.topic,
            loss.partition,
            loss.bound,
            loss.requested,
            loss.log_start,
            loss.log_end,
            loss.used,
            loss.lost,
        )


class SluiceBatchReader(_Common, DataSourceReader):
    """``spark.read.format("sluice")``: one split per (piece of a) partition range, the
    options resolved against the log when ``partitions()`` is called."""

    def __init__(
        self,
        options: Mapping[str, str],
        typed: TypedRead | None | _Unresolved = _Unresolved.RESOLVE,
    ) -> None:
        check_option_names(options)
        self.source: SourceOptions = parse_source_options(options)
        _warn_trigger_options(options)
        super().__init__(
            options,
            fail_on_data_loss=self.source.fail_on_data_loss,
            min_partitions=self.source.min_partitions,
            max_records_per_partition=self.source.max_records_per_partition,
            typed=typed,
        )

    def plan(self) -> Resolution:
        """The ranges to read (driver side; no Spark needed): the offset options resolved
        against the log now, data loss logged."""
        source = self.source
        assert source.ending_offsets is not None
        with self._metadata() as metadata:
            assigned, bounds = metadata.assigned_bounds(source.strategy)
            starting = self._resolve_limit(
                metadata, source.starting_timestamps, source.starting_offsets, assigned, bounds,
                starting=True,
            )  # fmt: skip
            ending = self._resolve_limit(
                metadata, source.ending_timestamps, source.ending_offsets, assigned, bounds,
                starting=False,
            )  # fmt: skip
        resolution = resolve_ranges(
            bounds,
            starting,
            ending,
            partitions=assigned,
            fail_on_data_loss=source.fail_on_data_loss,
        )
        _log_losses(resolution.data_loss)
        return resolution

    def partitions(self) -> list[SluicePartition]:
        splits = self._splits(self.plan().ranges)
        # An empty list is legal for streaming but not documented for batch reads; one empty
        # split reads nothing and keeps every Spark version happy.
        return splits or [SluicePartition(OffsetRange("", 0, 0, 0))]


def _warn_trigger_options(options: Mapping[str, str]) -> None:
    """Spark's batch reads log and ignore the streaming trigger options."""
    opts = CaseInsensitiveOptions(options)
    for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if key in opts:
            log.warning("%s option ignored in batch queries", key)


def _to_tp_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


def _to_json(offsets: Mapping[TopicPartition, int]) -> Offsets:
    result: Offsets = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def _rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """Spark's ``KafkaMicroBatchStream.rateLimit``: share ``limit`` offsets by backlog size."""
    sizes = {tp: max(end[tp] - start[tp], 0) for tp in end}
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    capped = {}
    for tp, size in sizes.items():
        prorate = limit * (size / total)
        step = int(-(-prorate // 1)) if prorate < 1 else int(prorate)  # ceil below 1, else floor
        capped[tp] = min(start[tp] + step, end[tp])
    return capped


class SluiceStreamReader(_Common, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("sluice")``; offsets are ``{"topic": {"0": 42}}`` dicts."""

    def __init__(
        self,
        options: Mapping[str, str],
        typed: TypedRead | None | _Unresolved = _Unresolved.RESOLVE,
    ) -> None:
        check_option_names(options)
        self.source = parse_source_options(options, streaming=True)
        super().__init__(
            options,
            fail_on_data_loss=self.source.fail_on_data_loss,
            min_partitions=self.source.min_partitions,
            max_records_per_partition=self.source.max_records_per_partition,
            typed=typed,
            streaming=True,
        )
        self.max_offsets_per_trigger = self.read_options.max_offsets_per_trigger
        self.min_offsets_per_trigger = self.read_options.min_offsets_per_trigger
        self.max_trigger_delay_s = self.read_options.max_trigger_delay_ms / 1000
        self._target: dict[TopicPartition, int] | None = None  # AvailableNow's end
        self._last_end: Offsets | None = None
        self._latest: Offsets | None = None
        self._last_trigger = 0.0  # time.time() of the last batch: the first is never delayed

    def _assigned_bounds(self) -> tuple[list[TopicPartition], dict[TopicPartition, LogBounds]]:
        with self._metadata() as metadata:
            return metadata.assigned_bounds(self.source.strategy)

    # -- offsets -----------------------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        source = self.source
        with self._metadata() as metadata:
            assigned, bounds = metadata.assigned_bounds(source.strategy)
            starting = self._resolve_limit(
                metadata, source.starting_timestamps, source.starting_offsets, assigned, bounds,
                starting=True,
            )  # fmt: skip
        resolution = resolve_ranges(
            bounds,
            starting,
            "latest",
            partitions=assigned,
            fail_on_data_loss=self.source.fail_on_data_loss,
        )
        _log_losses(resolution.data_loss)
        return _to_json({r.topic_partition: r.start for r in resolution.ranges})

    def _log_ends(self) -> tuple[dict[TopicPartition, LogBounds], dict[TopicPartition, int]]:
        _, bounds = self._assigned_bounds()
        ends = {tp: b.log_end for tp, b in bounds.items()}
        if self._target is not None:  # AvailableNow: nothing past the target, no new partition
            ends = {tp: min(o, self._target[tp]) for tp, o in ends.items() if tp in self._target}
        return bounds, ends

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: b.log_end for tp, b in self._assigned_bounds()[1].items()}

    def getDefaultReadLimit(self) -> Any:
        """Spark's: ``ReadMaxRows`` with ``maxOffsetsPerTrigger`` (a minimum is applied here,
        Python sources having no composite limit), else ``ReadMinRows`` with
        ``minOffsetsPerTrigger``, else ``ReadAllAvailable``."""
        if not _HAS_READ_LIMIT:
            return None
        if self.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.max_offsets_per_trigger)
        if self.min_offsets_per_trigger is not None:
            return ReadMinRows(self.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _delay_batch(
        self, begin: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
    ) -> bool:
        """Spark's ``delayBatch``: wait while fewer than ``minOffsetsPerTrigger`` offsets are
        new and ``maxTriggerDelay`` has not passed since the last batch."""
        now = time.time()
        if now - self._last_trigger >= self.max_trigger_delay_s:
            self._last_trigger = now
            return False
        waiting = sum(end - begin.get(tp, 0) for tp, end in ends.items())
        if self.min_offsets_per_trigger is not None and waiting < self.min_offsets_per_trigger:
            return True
        self._last_trigger = now
        return False

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        """The end of the next micro-batch: log ends, capped by the read limit, or the
        start again while ``minOffsetsPerTrigger`` holds the batch back.

        Called with ``(start, limit)`` by pyspark >= 4.2; older versions call it without
        arguments, and the trigger options apply from the previous end.
        """
        read_all = _HAS_READ_LIMIT and isinstance(limit, ReadAllAvailable)
        if start is None:
            start = self._last_end
            max_rows = self.max_offsets_per_trigger
        else:
            max_rows = (
                limit.max_rows if _HAS_READ_LIMIT and isinstance(limit, ReadMaxRows) else None
            )
        bounds, ends = self._log_ends()
        self._latest = _to_json(ends)
        begin = _to_tp_offsets(start or {})
        # Partitions that are gone keep their offset; new ones start at their log start.
        from_offsets = {tp: begin.get(tp, bounds[tp].log_start) for tp in ends}
        target = {tp: max(o, from_offsets[tp]) for tp, o in ends.items()}
        delayable = (
            self.min_offsets_per_trigger is not None
            and not read_all
            and self._target is None  # AvailableNow must reach its target
            and start is not None
        )
        if delayable and self._delay_batch(begin, target):
            return dict(start or {})
        if max_rows is not None:
            target = _rate_limit(from_offsets, target, max_rows)
        merged = {**begin, **target}
        self._last_end = _to_json(merged)
        return self._last_end

    def reportLatestOffset(self) -> Offsets | None:
        return self._latest

    def partitions(self, start: Offsets, end: Offsets) -> list[SluicePartition]:
        begin, finish = _to_tp_offsets(start), _to_tp_offsets(end)
        wanted = {tp: o for tp, o in finish.items() if begin.get(tp) != o}
        if not wanted:
            return []
        with self._metadata() as metadata:
            bounds = metadata.bounds(sorted(wanted))
        ranges: list[OffsetRange] = []
        for tp, stop in sorted(wanted.items()):
            log_bounds = bounds[tp]
            first = begin.get(tp)
            if first is None:  # a partition added since the previous batch: from earliest
                first = log_bounds.log_start
                if first > 0:
                    self._loss(tp, EARLIEST, first, f"added partition starts at {first}, not 0")
            if stop < first:
                self._loss(tp, first, stop, "its offset went backwards (topic recreated?)")
                continue
            if first < log_bounds.log_start:
                self._loss(tp, first, log_bounds.log_start, "retention deleted offsets")
                first = min(log_bounds.log_start, stop)
            ranges.append(OffsetRange(tp.topic, tp.partition, first, stop))
        return self._splits(ranges)

    def _loss(self, tp: TopicPartition, requested: int, found: int, why: str) -> None:
        message = (
            f"{tp.topic}-{tp.partition}: expected offset {requested}, found {found}: {why}; "
            "some data may have been lost; set failOnDataLoss=false to go on"
        )
        if self.fail_on_data_loss:
            raise OffsetsOutOfBoundsError(message)
        log.warning(message)

    def commit(self, end: Offsets) -> None:
        """Spark's Kafka source commits nothing to Kafka; the checkpoint holds the offsets."""

    def stop(self) -> None:
        """No driver-side resources outlive a call."""


class GivenSchemaError(ValueError):
    """A typed read was given columns other than its reader schema's."""


class SluiceDataSource(DataSource):
    """``format("sluice")``: Spark's Kafka source options and columns over confluent-kafka, and
    the sink (``df.write.format("sluice")``, ``writeStream``) from ``sluice.pipeline.sink``."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _typed(self) -> TypedRead | None:
        """The typed read (``None``: binary values), resolved once per DataFrame: ``schema()``
        runs before the instance is pickled for the reader, so the reader gets the very schema
        the columns came from (a newer latest version registered in between changes nothing)."""
        cached: TypedRead | None | _Unresolved = getattr(
            self, "_resolved_typed", _Unresolved.RESOLVE
        )
        if isinstance(cached, _Unresolved):
            cached = resolve_typed(self.options)
            self._resolved_typed = cached
        return cached

    def schema(self) -> Any:
        """The read's columns; checks the option names first (so a typo fails at ``load()``).
        Spark calls it for reads only: a write's options are the sink's."""
        check_option_names(self.options)
        typed = self._typed()
        if typed is not None:
            return typed[2].schema
        headers = parse_read_options(self.options).include_headers
        return SPARK_SCHEMA_DDL if headers else SPARK_SCHEMA_DDL_NO_HEADERS

    def _checked(self, schema: Any) -> TypedRead | None:
        typed = self._typed()
        if typed is None or schema is None or not hasattr(schema, "fields"):
            return typed
        if schema != typed[2].schema:
            raise GivenSchemaError(
                f"valueFormat={typed[0].value_format.value}: expected the columns of reader "
                f"schema {typed[1].describe()}, "
                f"{typed[2].schema.simpleString()}, found the given schema {schema.simpleString()}"
            )
        return typed

    def reader(self, schema: Any) -> SluiceBatchReader:
        return SluiceBatchReader(self.options, self._checked(schema))

    def streamReader(self, schema: Any) -> SluiceStreamReader:
        return SluiceStreamReader(self.options, self._checked(schema))

    # The writers live in sluice.pipeline.sink (Spark's Kafka sink contract); the Python Data
    # Source API puts readers and writers on one DataSource class, so format("sluice") is both.
    def writer(self, schema: Any, overwrite: bool) -> SluiceBatchWriter:
        return SluiceBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> SluiceStreamWriter:
        return SluiceStreamWriter(self.options, schema, overwrite)
