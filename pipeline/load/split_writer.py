"""Executor side of the nightly load: fetch one split and write its Parquet files directly.

The paper's own design (Camus-style): Spark schedules the planned splits as an RDD, one task per
split (``sc.parallelize(splits, len(splits)).mapPartitions(SplitWriter(...))``); each task
fetches its ``[start, end)`` with the source's split reader
(``sluice.pipeline.source.split_reader.read_split``), writes the records as Parquet with
``pyarrow`` straight into the run's staging directory through ``pyarrow.fs``, and returns the
split's ``SplitResult`` — its range, the rows fetched and undecodable, the bytes, the lost
offsets, the writer schema ids and every file it wrote; the reader fills in the first figures,
the task the rest, in the same object — to the driver through Spark's task results
(``collect()``). Nothing crosses into the JVM but that small result: no Arrow hand-off
to Spark's Parquet writer.

Files
=====
One data file per (split, date), in the table's layout (``sluice.pipeline.table.commit``)::

    topic=<topic>/date=<yyyy-mm-dd>/part-<topic>-<partition>-<start>-<end>.parquet
    _errors/part-<topic>-<partition>-<start>-<end>.parquet      (typed loads: undecodable rows)

``date`` is the UTC date of the record timestamp (``floor(micros / 86400e6)`` days after
1970-01-01, -1 ms is 1969-12-31 as in Spark). The columns are the read's (the source's Arrow
schema, or a typed load's) without ``topic``, which the path holds as a hive partition, as
Spark's ``partitionBy`` writes them; ``partition`` keeps its statistics (the verify phase counts
rows per partition from footers). Row groups hold ``row_group_rows`` rows (the last one less).

A file is written under a hidden temporary name in its directory
(``.part-…parquet.<uuid>.tmp``: no reader sees ``.`` files or names not ending ``.parquet``)
and renamed onto its final name when complete. The name is a function of the range, so a
retried task replaces its own file, and a zombie attempt (its executor lost, its Python worker
not yet dead) replaces it with a complete file of the same records: never a torn one. The driver
removes temporary leftovers and files no result names before it publishes
(``sluice.pipeline.load.verify``).

Picklable; each ``SplitWriter`` call runs in one task (one thread) and owns its consumer and
files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import posixpath
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sluice.pipeline.source.avro_columns import (
    AvroBatchDecoder,
    OutputLayout,
    ReaderSchema,
    write_error_file,
)
from sluice.pipeline.source.options import AvroOptions
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult, read_split
from sluice.pipeline.table.manifest import ERRORS_DIR

__all__ = [
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
        self.pending, self.pending_rows = [], 0

    def close(self) -> int:
        """Finish the file and rename it onto its final name; return its size."""
        self._flush()
        self.writer.close()
        self.stream.close()
        try:
            self.fs.move(self.temporary, self.final)  # rename(2) on file://: replaces
        except OSError:  # hdfs:// will not rename onto an existing file: a retry's leftover
            self.fs.delete_file(self.final)
            self.fs.move(self.temporary, self.final)
        return int(self.fs.get_file_info(self.final).size)

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
    confluent-kafka settings, built once per run (``split_reader.consumer_settings``); ``avro`` the
    typed read (options with ``error_path`` set, reader schema, columns) or ``None`` for Spark's
    Kafka columns; ``timestamp`` the name of the record-timestamp column the date comes from.
    """

    staging_uri: str
    consumer: Mapping[str, Any]
    fail_on_data_loss: bool = True
    include_headers: bool = True
    avro: tuple[AvroOptions, ReaderSchema, OutputLayout] | None = None
    timestamp: str = "timestamp"
    batch_rows: int = 8192
    row_group_rows: int = ROW_GROUP_ROWS
    poll_timeout_s: float = 120.0
    # Crash injection (``SLUICE_CRASH_AT=read``): after writing its first batch the task waits
    # this long, so the driver's kill lands while files are half written instead of racing a
    # read that may finish first. Bounded: if no kill comes, the task carries on.
    hold_after_first_batch_s: float = 0.0

    def __call__(self, splits: Iterable[OffsetRange]) -> Iterator[SplitResult]:
        for split in splits:
            yield self.write(split)

    def write(self, split: OffsetRange) -> SplitResult:
        """Fetch ``split`` and write its files; see the module doc."""
        began = time.monotonic()
        fs, root = pafs.FileSystem.from_uri(self.staging_uri)
        result = SplitResult(split)
        batches: Iterator[pa.RecordBatch] = read_split(
            split,
            self.consumer,
            fail_on_data_loss=self.fail_on_data_loss,
            include_headers=self.include_headers,
            batch_rows=self.batch_rows,
            poll_timeout_s=self.poll_timeout_s,
            result=result,
        )
        decoder = None
        errors: list[pa.RecordBatch] = []
        if self.avro is not None:
            options, reader, layout = self.avro
            decoder = AvroBatchDecoder(
                options.registry_url, reader, layout, fail=options.on_decode_error == "fail"
            )
        files: dict[str, _DateFile] = {}
        hold = self.hold_after_first_batch_s
        try:
            for raw in batches:
                batch = raw
                if decoder is not None:
                    batch, bad = decoder.decode(raw)
                    if bad.num_rows:
                        errors.append(bad)
                if batch.num_rows:
                    self._route(fs, root, split, batch, files)
                    if hold:
                        time.sleep(hold)
                        hold = 0.0
            for relative, file in sorted(files.items()):
                result.files.append((relative, file.close(), file.rows))
        except BaseException:
            for file in files.values():
                with contextlib.suppress(OSError):
                    file.discard()
            raise
        if errors:
            assert self.avro is not None and self.avro[0].error_path is not None
            write_error_file(self.avro[0].error_path, file_name(split), errors)
            relative = posixpath.join(ERRORS_DIR, file_name(split))
            size = int(fs.get_file_info(posixpath.join(root, relative)).size)
            result.files.append((relative, size, sum(b.num_rows for b in errors)))
        if decoder is not None:
            result.errors = decoder.stats.errors
            result.schema_ids = sorted(decoder.stats.schema_ids)
        result.seconds = time.monotonic() - began  # the whole task's, files included
        return result

    def _route(
        self,
        fs: pafs.FileSystem,
        root: str,
        split: OffsetRange,
        batch: pa.RecordBatch,
        files: dict[str, _DateFile],
    ) -> None:
        """Append ``batch`` (without its ``topic`` column) to its date's file(s)."""
        days = pc.cast(batch.column(self.timestamp), pa.date32())
        data = batch.drop_columns(["topic"])
        low, high = pc.min_max(days).values()
        if low == high:
            self._file(fs, root, split, low.as_py(), data.schema, files).add(data)
            return
        for day in pc.unique(days).to_pylist():
            mask = pc.is_null(days) if day is None else pc.equal(days, pa.scalar(day, pa.date32()))
            part = data.filter(mask)
            self._file(fs, root, split, day, data.schema, files).add(part)

    def _file(
        self,
        fs: pafs.FileSystem,
        root: str,
        split: OffsetRange,
        day: dt.date | None,
        schema: pa.Schema,
        files: dict[str, _DateFile],
    ) -> _DateFile:
        date = "__HIVE_DEFAULT_PARTITION__" if day is None else day.isoformat()
        relative = f"topic={split.topic}/date={date}/{file_name(split)}"
        file = files.get(relative)
        if file is None:
            final = posixpath.join(root, relative)
            file = files[relative] = _DateFile(fs, final, schema, self.row_group_rows)
        return file


def rows_by_partition(results: Sequence[SplitResult]) -> dict[tuple[str, int], int]:
    """Data rows written per topic-partition, summed over the splits' results."""
    rows: dict[tuple[str, int], int] = {}
    for r in results:
        key = (r.split.topic, r.split.partition)
        rows[key] = rows.get(key, 0) + r.written
    return rows
