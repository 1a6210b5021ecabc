"""Iceberg-ready Parquet data files: written by executors, described by the driver.

``IcebergFileWriter`` (picklable: it holds the table's schema and spec as JSON) turns a load's
Arrow rows into Parquet data files a catalog commit can add as they are:

* the columns are the table's, in its order, each carrying its Iceberg field id
  (``PARQUET:field_id``, pyiceberg's ``schema_to_pyarrow``), so readers resolve columns by id
  and a renamed or added column never mis-reads an old file; a column the rows lack is
  written null (an optional column added by an earlier version);
* **one file per partition value**: the rows are grouped by the table's partition spec
  (``day(timestamp)`` → one file per UTC day), computed here with Arrow compute for
  ``identity``, ``year``, ``month``, ``day``, ``hour`` and value by value for ``bucket`` and
  ``truncate``; the path is ``<location>/data/<spec path>/<prefix>-<n>.parquet``
  (``event_time_day=2024-01-02``), Iceberg's default layout;
* Parquet statistics on every column but the raw ``value`` (``NO_STATISTICS``), from which the
  driver's ``describe_data_files`` takes the Iceberg column metrics (value, null counts,
  bounds) and checks the partition: a file whose rows span two partition values is refused
  (pyiceberg's ``parquet_file_to_data_file``);
* the codec the table names in ``write.parquet.compression-codec`` (Iceberg's default,
  zstd, where it names none; the tables Sluice creates name snappy), row groups of
  ``row_group_rows`` rows, no dictionary for the columns of distinct values
  (``NO_DICTIONARY``).

A file is written to its final name directly: the name holds the writer's ``prefix`` (the run
id, the split and a random part), no reader sees a file until a snapshot references it, and a
file of a crashed run stays unreferenced until ``remove-orphans`` deletes it. A writer call is
for one thread.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO, parquet_file_to_data_file, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    YearTransform,
)
from pyiceberg.typedef import Record

__all__ = ["IcebergFileAppender", "IcebergFileWriter", "WrittenFile", "describe_data_files"]

CODEC_PROPERTY = "write.parquet.compression-codec"
"""The table property naming its data files' codec, as Iceberg's writers read it."""

DEFAULT_CODEC = "zstd"
"""Iceberg's codec where a table names none (tables Sluice creates name ``snappy``:
``iceberg_commit``)."""

NO_DICTIONARY = ("value", "offset")
"""Columns written without a dictionary: distinct values in nearly every row (the raw value,
the offset); parquet-cpp would hash each until its 1 MiB dictionary page gives up, as the
Parquet layout's writer (``split_writer``) also avoids."""

NO_STATISTICS = ("value",)
"""Columns without Parquet statistics: the raw value's bounds help no reader (Iceberg's
column metrics then hold its counts, not bounds)."""

_MICROS_PER_DAY = 86_400_000_000
_MICROS_PER_HOUR = 3_600_000_000


@dataclass(frozen=True)
class WrittenFile:
    """One data file an executor wrote: its full URI, bytes and rows."""

    path: str
    size: int
    rows: int


@dataclass(frozen=True)
class IcebergFileWriter:
    """Writes rows as the table's data files (module doc). ``schema_json`` / ``spec_json`` are
    the table's current schema and spec as pyiceberg JSON; ``location`` its root URI."""

    schema_json: str
    spec_json: str
    location: str
    filesystem_properties: tuple[tuple[str, str], ...] = ()
    compression: str = DEFAULT_CODEC

    @classmethod
    def for_table(
        cls,
        schema: Schema,
        spec: PartitionSpec,
        location: str,
        properties: dict[str, str],
        table_properties: dict[str, str] | None = None,
    ) -> IcebergFileWriter:
        """The writer of a table: its schema, spec and location, the S3 settings of its
        FileIO ``properties``, the codec its ``table_properties`` name (``CODEC_PROPERTY``)."""
        codec = (table_properties or {}).get(CODEC_PROPERTY, DEFAULT_CODEC).lower()
        return cls(
            schema.model_dump_json(),
            spec.model_dump_json(),
            location.rstrip("/"),
            tuple(sorted((k, v) for k, v in properties.items() if k.startswith("s3."))),
            "none" if codec == "uncompressed" else codec,
        )

    def write(self, rows: pa.Table, prefix: str) -> list[WrittenFile]:
        """Write ``rows`` (the load's columns) as one file per partition value, named
        ``<prefix>-<n>-<random>.parquet``; returns the files. No rows, no file."""
        appender = self.open(prefix)
        try:
            appender.add(rows)
        except BaseException:
            appender.discard()
            raise
        return appender.close()

    def open(self, prefix: str, *, row_group_rows: int = 131_072) -> IcebergFileAppender:
        """Files to append batches to, one per partition value met (``add``), finished by
        ``close``: what an executor's task uses to stream a split without holding it."""
        return IcebergFileAppender(self, prefix, row_group_rows)


class IcebergFileAppender:
    """The open data files of one writer call: one ``ParquetWriter`` per partition value, each
    fed a row group at a time — batches are held per file until ``row_group_rows`` rows (a
    ``write_table`` per 4,096-row batch made a row group each: tiny row groups, and a
    dictionary page, a compression call and statistics per column each time, which made the
    writer three times as slow as the Parquet layout's). For one thread (one task)."""

    def __init__(self, writer: IcebergFileWriter, prefix: str, row_group_rows: int) -> None:
        self._schema = Schema.model_validate_json(writer.schema_json)
        self._spec = PartitionSpec.model_validate_json(writer.spec_json)
        self._arrow = schema_to_pyarrow(self._schema, include_field_ids=True)
        self._io = _file_io(dict(writer.filesystem_properties))
        self._location = writer.location
        self._prefix = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self._row_group_rows = row_group_rows
        self._compression = writer.compression
        self._open: dict[tuple[object, ...], _OpenFile] = {}

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Append ``rows`` (the load's columns; missing optional columns are null)."""
        if rows.num_rows == 0:
            return
        table = _conform(pa.table(rows) if isinstance(rows, pa.RecordBatch) else rows, self._arrow)
        for key, record, part in _partitions(table, self._schema, self._spec):
            target = self._open.get(key)
            if target is None:
                target = self._open[key] = self._new_file(record)
            target.add(part, self._row_group_rows)

    def _new_file(self, record: Record) -> _OpenFile:
        relative = self._spec.partition_to_path(record, self._schema) if self._spec.fields else ""
        directory = f"{self._location}/data" + (f"/{relative}" if relative else "")
        path = f"{directory}/{self._prefix}-{len(self._open):05d}.parquet"
        stream = self._io.new_output(path).create(overwrite=True)
        names = self._arrow.names
        writer = pq.ParquetWriter(
            stream,
            self._arrow,
            compression=self._compression,
            use_dictionary=[n for n in names if n not in NO_DICTIONARY],
            write_statistics=[n for n in names if n not in NO_STATISTICS],
        )
        return _OpenFile(path, stream, writer)

    def close(self) -> list[WrittenFile]:
        """Finish every file; returns them with their sizes and rows."""
        written = []
        for target in self._open.values():
            target.flush()
            target.writer.close()
            target.stream.close()
            written.append(
                WrittenFile(target.path, len(self._io.new_input(target.path)), target.rows)
            )
        self._open.clear()
        return written

    def discard(self) -> None:
        """Close and delete every file (a failed task's)."""
        for target in self._open.values():
            with contextlib.suppress(Exception):
                target.writer.close()
                target.stream.close()
            with contextlib.suppress(OSError):
                self._io.delete(target.path)
        self._open.clear()


@dataclass
class _OpenFile:
    """One data file being written: its rows held until a row group's worth."""

    path: str
    stream: Any
    writer: pq.ParquetWriter
    rows: int = 0
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0

    def add(self, part: pa.Table, row_group_rows: int) -> None:
        self.pending.append(part)
        self.pending_rows += part.num_rows
        if self.pending_rows >= row_group_rows:
            self.flush()

    def flush(self) -> None:
        """Write the held rows as one row group."""
        if self.pending_rows:
            table = pa.concat_tables(self.pending)
            self.writer.write_table(table, row_group_size=self.pending_rows)
            self.rows += self.pending_rows
        self.pending, self.pending_rows = [], 0


def describe_data_files(
    io: FileIO, metadata: TableMetadata, paths: Sequence[str]
) -> list[DataFile]:
    """The Iceberg ``DataFile`` entries of ``paths``, from their Parquet footers (record
    counts, column metrics, the partition value — checked to be one per file — and size)."""
    return [parquet_file_to_data_file(io, metadata, path) for path in paths]


def _file_io(properties: dict[str, str]) -> FileIO:
    return PyArrowFileIO(properties)


def _conform(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """``rows`` in the table's column order and types (ids in the field metadata); a column
    the rows lack is null. Widened types (int → long) are cast."""
    if rows.schema.equals(target, check_metadata=False):  # the common case: ids only
        return pa.Table.from_arrays(rows.columns, schema=target)
    columns = []
    for target_field in target:
        if target_field.name in rows.column_names:
            columns.append(rows.column(target_field.name).cast(target_field.type))
        else:
            columns.append(pa.nulls(rows.num_rows, target_field.type))
    return pa.Table.from_arrays(columns, schema=target)


def _partitions(
    table: pa.Table, schema: Schema, spec: PartitionSpec
) -> list[tuple[tuple[object, ...], Record, pa.Table]]:
    """``table``'s rows grouped by their partition value (as a tuple, and as a ``Record``)."""
    if not spec.fields:
        return [((), Record(), table)]
    keys = {}
    for i, spec_field in enumerate(spec.fields):
        source = schema.find_field(spec_field.source_id)
        keys[f"_p{i}"] = _transformed(
            table.column(source.name), spec_field.transform, source.field_type
        )
    key_table = pa.table(keys)
    unique = key_table.group_by(list(keys), use_threads=False).aggregate([]).to_pylist()
    if len(unique) == 1:  # the common case (a batch of one day): no mask, no copy
        values = tuple(unique[0].values())
        return [(values, Record(*values), table)]
    groups = []
    for row in unique:
        mask = None
        for name, value in row.items():
            column = key_table.column(name)
            test = pc.is_null(column) if value is None else pc.equal(column, value)
            test = pc.fill_null(test, False)
            mask = test if mask is None else pc.and_(mask, test)
        values = tuple(row.values())
        groups.append((values, Record(*values), table.filter(mask)))
    return groups


def _transformed(column: pa.ChunkedArray, transform: object, source_type: object) -> pa.Array:
    """The partition values of ``column`` under ``transform`` (Iceberg's integer forms:
    days, hours, months and years since 1970)."""
    if isinstance(transform, IdentityTransform):
        return column
    if isinstance(transform, (DayTransform, HourTransform)):
        if pa.types.is_date(column.type):
            days = pc.cast(column, pa.int32())
            return days if isinstance(transform, DayTransform) else pc.multiply(days, 24)
        micros = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
        unit = _MICROS_PER_DAY if isinstance(transform, DayTransform) else _MICROS_PER_HOUR
        return pc.cast(pc.floor(pc.divide(pc.cast(micros, pa.float64()), float(unit))), pa.int32())
    if isinstance(transform, (MonthTransform, YearTransform)):
        years = pc.subtract(pc.year(column), 1970)
        if isinstance(transform, YearTransform):
            return pc.cast(years, pa.int32())
        return pc.cast(pc.add(pc.multiply(years, 12), pc.subtract(pc.month(column), 1)), pa.int32())
    function = transform.transform(source_type)  # type: ignore[attr-defined]
    return pa.array([function(v) for v in column.to_pylist()])
