"""Executor side of the nightly load: fetch one split and write its Parquet files directly.

The paper's own design (Camus-style): Spark schedules the planned splits as an RDD, one task
per packed group of splits (``sc.parallelize(tasks, len(tasks)).mapPartitions(SplitWriter(...))``);
each task fetches each split's ``[start, end)`` with the source's split reader
(``sluice.pipeline.source.split_reader.read_split``), writes the records as Parquet with
``pyarrow`` straight into the run's staging directory through ``pyarrow.fs``, and returns the
split's ``SplitResult`` — its range, the rows fetched and undecodable, the bytes, the lost
offsets, the writer schema ids and every file it wrote; the reader fills in the first figures,
the task the rest, in the same object — to the driver through Spark's task results
(``collect()``). Nothing crosses into the JVM but that small result: no Arrow hand-off
to Spark's Parquet writer.

Packed tasks
============
A task may hold several splits (``sluice.pipeline.source.ranges.pack_splits``: small ranges of
many topics packed to about ``rowsPerTask`` rows, as Camus and Gobblin pack work units). It
reads them all at once with one consumer (``sluice.pipeline.source.packed_reader``) and
writes **one file per (topic, date)** however many of the topic's partitions it read, so 200
topics × 4 partitions of a hundred rows each make about 200 files, not 800, and a handful of
tasks, not 800.
Each split still has its own ``SplitResult`` (its range and figures), naming the files its
rows went to; a file shared by several splits is named by each of them (the verify phase
counts rows per partition from the files' footers, so it needs no more).

Files
=====
One data file per (task, topic, date), in the table's layout
(``sluice.pipeline.table.commit``), named after the first split of that topic in the task::

    topic=<topic>/date=<yyyy-mm-dd>/part-<topic>-<partition>-<start>-<end>.parquet
    _errors/part-<topic>-<partition>-<start>-<end>.parquet      (typed loads: undecodable rows)

``date`` is the UTC date of the record timestamp (``floor(micros / 86400e6)`` days after
1970-01-01, -1 ms is 1969-12-31 as in Spark). The columns are the read's (the source's Arrow
schema, or a typed load's) without ``topic``, which the path holds as a hive partition, as
Spark's ``partitionBy`` writes them; ``partition`` keeps its statistics, and the footer's
key-value metadata holds the file's rows per partition (``PARTITION_ROWS_KEY``), counted from
the column as it is written: the verify phase counts rows per partition from footers alone,
also for a packed task's file, whose row groups hold several partitions. Row groups hold
``row_group_rows`` rows (the last one less).

A file is written under a hidden temporary name in its directory
(``.part-…parquet.<uuid>.tmp``: no reader sees ``.`` files or names not ending ``.parquet``)
and renamed onto its final name when complete. The name is a function of the range, so a
retried task replaces its own file, and a zombie attempt (its executor lost, its Python worker
not yet dead) replaces it with a complete file of the same records: never a torn one. The driver
removes temporary leftovers and files no result names before it publishes
(``sluice.pipeline.load.verify``).

Iceberg tables
==============
With ``iceberg`` set (``table.format=iceberg``: ``IcebergRun.writers``, one ``TopicWriters``
per topic) a task writes no Camus layout: it streams each topic's batches into one appender
of that topic's data table (``IcebergFileAppender``, one file per partition value of the
table's spec) and its undecodable rows into the topic's error table, each file named after
the first split of its topic in the task plus a random part, written under its final name
(nothing references it until the driver's catalog commit). The results name the files by
their full URIs, with sizes and rows; a failed task discards its appenders' files.

Picklable; each ``SplitWriter`` call runs in one task (one thread) and owns its consumer and
files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import posixpath
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sluice.common.gc_pause import CollectionPause, collection_paused
from sluice.pipeline.source.options import ValueOptions
from sluice.pipeline.source.packed_reader import read_splits
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult, read_split
from sluice.pipeline.source.typed_columns import (
    OutputLayout,
    ReaderSchema,
    TypedBatchDecoder,
    write_error_file,
)
from sluice.pipeline.source.value_format import batch_decoder
from sluice.pipeline.table.manifest import ERRORS_DIR

if TYPE_CHECKING:  # pyiceberg only where a task writes Iceberg files: its objects bring it
    from sluice.pipeline.table.iceberg_data_file import IcebergFileAppender, WrittenFile
    from sluice.pipeline.table.iceberg_run import TopicWriters

__all__ = [
    "PARTITION_ROWS_KEY",
    "ROW_GROUP_ROWS",
    "TEMPORARY_SUFFIX",
    "SplitWriter",
    "file_name",
    "rows_by_partition",
]

ROW_GROUP_ROWS = 131_072
"""Rows per Parquet row group (about 30 MB of 200-byte values)."""

TEMPORARY_SUFFIX = ".tmp"
"""A file being written ends so (and starts with ``.``); the driver deletes leftovers."""

PARTITION_ROWS_KEY = "sluice.partition_rows"
"""The footer key-value entry of a data file's rows per Kafka partition: a JSON object of
partition (decimal string) to rows, counted from the ``partition`` column as each row group is
written, e.g. ``{"0":100,"3":100}``; its rows add up to the file's."""

# Columns worth a dictionary: few distinct values per row group. Dictionary-encoding a column
# of distinct values (offsets, random payloads) costs CPU until parquet-cpp gives up at its
# 1 MiB dictionary page; Spark's writer pays that too.
_NO_DICTIONARY = ("value", "offset")

_EPOCH = dt.date(1970, 1, 1)


def file_name(split: OffsetRange) -> str:
    """The base name of a split's files: ``part-<topic>-<partition>-<start>-<end>.parquet``."""
    return f"part-{split.topic}-{split.partition}-{split.start}-{split.end}.parquet"


class _DateFile:
    """One open data file of a split: batches buffered to a row group, then written."""

    def __init__(
        self, fs: pafs.FileSystem, final: str, schema: pa.Schema, row_group_rows: int
    ) -> None:
        self.fs = fs
        self.final = final
        directory, base = posixpath.split(final)
        self.temporary = posixpath.join(
            directory, f".{base}.{uuid.uuid4().hex[:12]}{TEMPORARY_SUFFIX}"
        )
        self.row_group_rows = row_group_rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.rows = 0
        self.partition_rows: dict[int, int] = {}  # PARTITION_ROWS_KEY, of the rows written
        fs.create_dir(directory, recursive=True)
        self.stream = fs.open_output_stream(self.temporary)
        names = schema.names
        self.writer = pq.ParquetWriter(
            self.stream,
            schema,
            compression="snappy",  # Spark's default
            use_dictionary=[n for n in names if n not in _NO_DICTIONARY],
            write_statistics=[n for n in names if n != "value"],
        )

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self.pending_rows:
            table = pa.Table.from_batches(self.pending)
            self.writer.write_table(table, row_group_size=max(self.pending_rows, 1))
            self.rows += self.pending_rows
            counts = self.partition_rows
            for entry in pc.value_counts(table.column("partition")).to_pylist():
                partition = int(entry["values"])
                counts[partition] = counts.get(partition, 0) + int(entry["counts"])
        self.pending, self.pending_rows = [], 0

    def close(self) -> int:
        """Finish the file and rename it onto its final name; return its size."""
        self._flush()
        counts = {str(p): n for p, n in sorted(self.partition_rows.items())}
        self.writer.add_key_value_metadata(
            {PARTITION_ROWS_KEY: json.dumps(counts, separators=(",", ":"))}
        )
        self.writer.close()
        size = int(self.stream.tell())  # the bytes written: the new file's size
        self.stream.close()
        try:
            self.fs.move(self.temporary, self.final)  # rename(2) on file://: replaces
        except OSError:  # hdfs:// will not rename onto an existing file: a retry's leftover
            self.fs.delete_file(self.final)
            self.fs.move(self.temporary, self.final)
        return size

    def discard(self) -> None:
        try:
            self.writer.close()
            self.stream.close()
        finally:
            self.fs.delete_file(self.temporary)


@dataclass(frozen=True)
class SplitWriter:
    """The task of ``mapPartitions``: for each split of its partition, fetch and write it.

    ``staging_uri`` is the run's staging directory (any ``pyarrow.fs`` URI); ``consumer`` the
    confluent-kafka settings, built once per run (``split_reader.consumer_settings``); ``typed`` the
    typed read (options with ``error_path`` set — their ``value_format`` chooses the decoder —,
    reader schema, columns) or ``None`` for Spark's
    Kafka columns; ``timestamp`` the name of the record-timestamp column the date comes from.
    """

    staging_uri: str
    consumer: Mapping[str, Any]
    fail_on_data_loss: bool = True
    include_headers: bool = True
    typed: tuple[ValueOptions, ReaderSchema, OutputLayout] | None = None
    timestamp: str = "timestamp"
    batch_rows: int = 8192
    row_group_rows: int = ROW_GROUP_ROWS
    poll_timeout_s: float = 120.0
    # Crash injection (``SLUICE_CRASH_AT=read``): after writing its first batch the task waits
    # this long, so the driver's kill lands while files are half written instead of racing a
    # read that may finish first. Bounded: if no kill comes, the task carries on.
    hold_after_first_batch_s: float = 0.0
    # table.format=iceberg: each topic's writers (module doc); None: the Camus layout.
    iceberg: Mapping[str, TopicWriters] | None = None

    def __call__(
        self, tasks: Iterable[OffsetRange | Sequence[OffsetRange]]
    ) -> Iterator[SplitResult]:
        for task in tasks:
            yield from self.write_task([task] if isinstance(task, OffsetRange) else list(task))

    def write(self, split: OffsetRange) -> SplitResult:
        """Fetch ``split`` and write its files; see the module doc."""
        [result] = self.write_task([split])
        return result

    def write_task(self, splits: Sequence[OffsetRange]) -> list[SplitResult]:
        """Fetch the splits of one packed task with one consumer, all at once
        (``packed_reader.read_splits``; one split: ``read_split``), and write them into one
        file per (topic, date) and one error file per topic; one result per split, each
        naming the files its rows went to.

        The cyclic garbage collector is off while the task runs (``collection_paused``: the
        messages and open files it holds are not garbage; walking them again and again cost a
        task of 40,000 records 10–30 ms), except for one collection after a batch whenever half
        a million new objects piled up (``CollectionPause.allow``: a long task's cycles, if its
        decoders make any, stay bounded)."""
        with collection_paused() as pause:
            if self.iceberg is not None:
                return self._write_iceberg(splits, self.iceberg, pause)
            return self._write_camus(splits, pause)

    def _write_camus(
        self, splits: Sequence[OffsetRange], pause: CollectionPause
    ) -> list[SplitResult]:
        """``write_task`` for the Camus layout (module doc)."""
        began = time.monotonic()
        fs, root = pafs.FileSystem.from_uri(self.staging_uri)
        # Files are named after the first split of their topic in the task: a retried task
        # (the same splits) replaces its own files.
        names: dict[str, str] = {}
        for split in splits:
            names.setdefault(split.topic, file_name(split))
        decoders: dict[str, TypedBatchDecoder] = {}  # per topic: its schema ids
        files: dict[str, _DateFile] = {}
        errors: dict[str, list[pa.RecordBatch]] = {}
        results = [SplitResult(split) for split in splits]
        touched: list[set[str]] = [set() for _ in splits]
        hold = self.hold_after_first_batch_s
        # Consecutive batches of one topic (a packed task's small splits: one slice each of the
        # reader's batch) are routed together: routing costs Arrow calls per batch, not row.
        group: list[tuple[int, pa.RecordBatch]] = []
        try:
            for index, raw in self._batches(splits, results, pause):
                split, batch = splits[index], raw
                if self.typed is not None:
                    batch, bad = self._decoder(decoders, split.topic).decode(raw)
                    if bad.num_rows:
                        errors.setdefault(split.topic, []).append(bad)
                        results[index].errors += bad.num_rows
                        touched[index].add(posixpath.join(ERRORS_DIR, names[split.topic]))
                if not batch.num_rows:
                    continue
                if group and splits[group[0][0]].topic != split.topic:
                    self._write_group(fs, root, names, splits, group, files, touched)
                group.append((index, batch))
                if sum(b.num_rows for _, b in group) >= self.batch_rows or hold:
                    self._write_group(fs, root, names, splits, group, files, touched)
                    if hold:
                        time.sleep(hold)
                        hold = 0.0
            self._write_group(fs, root, names, splits, group, files, touched)
            written = {relative: (file.close(), file.rows) for relative, file in files.items()}
        except BaseException:
            for file in files.values():
                with contextlib.suppress(OSError):
                    file.discard()
            raise
        for topic, batches in sorted(errors.items()):
            assert self.typed is not None and self.typed[0].error_path is not None
            write_error_file(self.typed[0].error_path, names[topic], batches)
            relative = posixpath.join(ERRORS_DIR, names[topic])
            size = int(fs.get_file_info(posixpath.join(root, relative)).size)
            written[relative] = (size, sum(b.num_rows for b in batches))
        seconds = time.monotonic() - began
        total = max(sum(r.rows for r in results), 1)
        for result, where in zip(results, touched, strict=True):
            result.files = [(r, *written[r]) for r in sorted(where)]
            if result.split.topic in decoders:
                result.schema_ids = sorted(decoders[result.split.topic].stats.schema_ids)
            # The whole task's time, files included, shared by its splits by their rows.
            result.seconds = seconds * result.rows / total
        return results

    def _write_iceberg(
        self,
        splits: Sequence[OffsetRange],
        writers: Mapping[str, TopicWriters],
        pause: CollectionPause,
    ) -> list[SplitResult]:
        """``write_task`` for Iceberg tables (module doc): one appender per topic, the error
        rows per topic in one call; the results name full URIs."""
        began = time.monotonic()
        prefixes: dict[str, str] = {}
        for split in splits:
            prefixes.setdefault(split.topic, file_name(split).removesuffix(".parquet"))
        decoders: dict[str, TypedBatchDecoder] = {}
        appenders: dict[str, IcebergFileAppender] = {}
        errors: dict[str, list[pa.RecordBatch]] = {}
        results = [SplitResult(split) for split in splits]
        hold = self.hold_after_first_batch_s
        written: dict[str, list[WrittenFile]] = {}
        try:
            for index, batch in self._batches(splits, results, pause):
                topic = splits[index].topic
                if self.typed is not None:
                    batch, bad = self._decoder(decoders, topic).decode(batch)
                    if bad.num_rows:
                        errors.setdefault(topic, []).append(bad)
                        results[index].errors += bad.num_rows
                if batch.num_rows:
                    appender = appenders.get(topic)
                    if appender is None:
                        appender = appenders[topic] = writers[topic].data.open(
                            prefixes[topic], row_group_rows=self.row_group_rows
                        )
                    appender.add(batch)
                    if hold:
                        time.sleep(hold)
                        hold = 0.0
            for topic, appender in appenders.items():
                written[topic] = appender.close()
            for topic, batches in sorted(errors.items()):
                target = writers[topic].errors
                assert target is not None, "a typed load has error tables"
                table = pa.Table.from_batches(batches)
                written[topic] = [*written.get(topic, []), *target.write(table, prefixes[topic])]
        except BaseException:
            for appender in appenders.values():
                with contextlib.suppress(Exception):
                    appender.discard()
            raise
        seconds = time.monotonic() - began
        total = max(sum(r.rows for r in results), 1)
        for result in results:
            topic = result.split.topic
            result.files = [(f.path, f.size, f.rows) for f in written.get(topic, [])]
            if topic in decoders:
                result.schema_ids = sorted(decoders[topic].stats.schema_ids)
            result.seconds = seconds * result.rows / total
        return results

    def _batches(
        self,
        splits: Sequence[OffsetRange],
        results: Sequence[SplitResult],
        pause: CollectionPause,
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        for item in self._read(splits, results):
            yield item
            pause.allow()  # the batch handled: collect if half a million new objects piled up

    def _read(
        self, splits: Sequence[OffsetRange], results: Sequence[SplitResult]
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        if len(splits) == 1:
            for batch in read_split(
                splits[0],
                self.consumer,
                fail_on_data_loss=self.fail_on_data_loss,
                include_headers=self.include_headers,
                batch_rows=self.batch_rows,
                poll_timeout_s=self.poll_timeout_s,
                result=results[0],
            ):
                yield 0, batch
        else:
            yield from read_splits(
                splits,
                self.consumer,
                results,
                fail_on_data_loss=self.fail_on_data_loss,
                include_headers=self.include_headers,
                batch_rows=self.batch_rows,
                poll_timeout_s=self.poll_timeout_s,
            )

    def _decoder(self, decoders: dict[str, TypedBatchDecoder], topic: str) -> TypedBatchDecoder:
        decoder = decoders.get(topic)
        if decoder is None:
            assert self.typed is not None
            options, reader, layout = self.typed
            decoder = decoders[topic] = batch_decoder(
                options.value_format,
                options.registry_url,
                reader,
                layout,
                fail=options.on_decode_error == "fail",
                message=options.message,
            )
        return decoder

    def _write_group(
        self,
        fs: pafs.FileSystem,
        root: str,
        names: Mapping[str, str],
        splits: Sequence[OffsetRange],
        group: list[tuple[int, pa.RecordBatch]],
        files: dict[str, _DateFile],
        touched: list[set[str]],
    ) -> None:
        """Route the batches of ``group`` (one topic), then empty it: as one batch when their
        rows share a date (each of their splits then wrote to that one file), else one by one
        (each split names only the files its own rows went to)."""
        if not group:
            return
        name = names[splits[group[0][0]].topic]
        paths = None
        if len(group) > 1:
            merged = pa.concat_batches([b for _, b in group])
            paths = self._route(fs, root, name, merged, files, one_date_only=True)
        for index, batch in group:
            touched[index].update(paths or self._route(fs, root, name, batch, files))
        group.clear()

    def _route(
        self,
        fs: pafs.FileSystem,
        root: str,
        name: str,
        batch: pa.RecordBatch,
        files: dict[str, _DateFile],
        *,
        one_date_only: bool = False,
    ) -> list[str]:
        """Append ``batch`` (without its ``topic`` column) to its date's file(s), named
        ``name`` under ``topic=<t>/date=<d>/``; return their relative paths. With
        ``one_date_only``, a batch of several dates is not written, and ``[]`` returned."""
        topic = batch.column("topic")[0].as_py()
        days = pc.cast(batch.column(self.timestamp), pa.date32())
        data = batch.drop_columns(["topic"])
        low, high = pc.min_max(days).values()
        if low == high:
            return [self._file(fs, root, topic, name, low.as_py(), data.schema, files, data)]
        if one_date_only:
            return []
        paths = []
        for day in pc.unique(days).to_pylist():
            mask = pc.is_null(days) if day is None else pc.equal(days, pa.scalar(day, pa.date32()))
            part = data.filter(mask)
            paths.append(self._file(fs, root, topic, name, day, data.schema, files, part))
        return paths

    def _file(
        self,
        fs: pafs.FileSystem,
        root: str,
        topic: str,
        name: str,
        day: dt.date | None,
        schema: pa.Schema,
        files: dict[str, _DateFile],
        batch: pa.RecordBatch,
    ) -> str:
        """Add ``batch`` to the file of (``topic``, ``day``), opened on first use."""
        date = "__HIVE_DEFAULT_PARTITION__" if day is None else day.isoformat()
        relative = f"topic={topic}/date={date}/{name}"
        file = files.get(relative)
        if file is None:
            final = posixpath.join(root, relative)
            file = files[relative] = _DateFile(fs, final, schema, self.row_group_rows)
        file.add(batch)
        return relative


def rows_by_partition(results: Sequence[SplitResult]) -> dict[tuple[str, int], int]:
    """Data rows written per topic-partition, summed over the splits' results."""
    rows: dict[tuple[str, int], int] = {}
    for r in results:
        key = (r.split.topic, r.split.partition)
        rows[key] = rows.get(key, 0) + r.written
    return rows
