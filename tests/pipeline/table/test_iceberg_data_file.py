"""The executor's data file writer against pyiceberg itself: the time transforms it computes
alone give pyiceberg's partition values and paths, and a task writing a day-partitioned local
table imports no pyiceberg."""

from __future__ import annotations

import datetime as dt
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import parse_transform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, LongType, NestedField, TimestamptzType

from sluice.pipeline.table.iceberg_data_file import (
    TIME_TRANSFORMS,
    IcebergFileWriter,
    TopicWriters,
    _partitioner,
    _pyiceberg_partitioner,
)

# Instants around the epoch and far from it, on and off hour / day / month / year bounds.
_INSTANTS = [
    dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC),
    dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    dt.datetime(1900, 2, 28, 12, 30, tzinfo=dt.UTC),
    dt.datetime(1969, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
    dt.datetime(2024, 2, 29, 23, 0, tzinfo=dt.UTC),
    dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
    dt.datetime(2026, 11, 28, 12, 7, 31, tzinfo=dt.UTC),
    dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.UTC),
]


def _writer(tmp_path: Path, source_type: object, transform: str) -> IcebergFileWriter:
    schema = Schema(
        NestedField(1, "event_time", source_type, required=False),  # type: ignore[arg-type]
        NestedField(2, "offset", LongType(), required=True),
    )
    spec = PartitionSpec(
        PartitionField(1, 1000, parse_transform(transform), f"event_time_{transform}")
    )
    return IcebergFileWriter.for_table(schema, spec, (tmp_path / "t").as_uri(), {})


@pytest.mark.parametrize(
    ("source", "transform"),
    [("timestamptz", t) for t in TIME_TRANSFORMS]
    + [("date", t) for t in TIME_TRANSFORMS if t != "hour"],  # Iceberg has no hour of a date
)
def test_time_transforms_give_pyiceberg_s_values_and_paths(
    tmp_path: Path, transform: str, source: str
) -> None:
    iceberg_type = TimestamptzType() if source == "timestamptz" else DateType()
    arrow_type = pa.timestamp("us", tz="UTC") if source == "timestamptz" else pa.date32()
    values = [v if source == "timestamptz" else v.date() for v in _INSTANTS] + [None]
    writer = _writer(tmp_path, iceberg_type, transform)
    table = pa.table({"event_time": pa.array(values, arrow_type), "offset": range(len(values))})
    mine, theirs = _partitioner(writer), _pyiceberg_partitioner(writer)
    function = parse_transform(transform).transform(iceberg_type)
    for value in values:  # one row at a time: each row's value and path
        row = table.filter(pa.array([v == value for v in values]))
        [(key, _)] = mine.groups(row)
        expected = function(pa.scalar(value, arrow_type).cast(pa.int64() if source ==
                            "timestamptz" else pa.int32()).as_py())  # fmt: skip
        assert key == (expected,), f"{transform} of {value}: expected {expected}, found {key}"
        spec = PartitionSpec.model_validate_json(writer.spec_json)
        schema = Schema.model_validate_json(writer.schema_json)
        assert mine.path(key) == spec.partition_to_path(Record(*key), schema) == theirs.path(key)
    # All rows at once: the same groups, with the same rows, as pyiceberg's transforms give.
    assert [(k, t.to_pylist()) for k, t in mine.groups(table)] == [
        (k, t.to_pylist()) for k, t in theirs.groups(table)
    ]


@pytest.mark.parametrize(
    ("source", "transform"),
    [("timestamptz", t) for t in TIME_TRANSFORMS]
    + [("date", t) for t in TIME_TRANSFORMS if t != "hour"],
)
def test_rows_are_one_group_by_their_bounds_exactly_when_their_values_agree(
    tmp_path: Path, transform: str, source: str
) -> None:
    # The one-value shortcut (``single``: the bounds' partition values) against pyiceberg's
    # transforms, for every pair of values, a microsecond either side of each bound included.
    iceberg_type = TimestamptzType() if source == "timestamptz" else DateType()
    arrow_type = pa.timestamp("us", tz="UTC") if source == "timestamptz" else pa.date32()
    step = dt.timedelta(microseconds=1) if source == "timestamptz" else dt.timedelta(days=1)
    instants = [i + d for i in _INSTANTS[:-1] for d in (-step, dt.timedelta(0), step)]
    values = [v if source == "timestamptz" else v.date() for v in instants]
    writer = _writer(tmp_path, iceberg_type, transform)
    mine, theirs = _partitioner(writer), _pyiceberg_partitioner(writer)
    assert mine.single is not None
    for first in values:
        for second in values:
            pair = pa.array([first, second], arrow_type)
            table = pa.table(
                {"event_time": pa.chunked_array([pair[:1], pair[1:]]), "offset": [0, 1]}
            )
            found = [(k, t.to_pylist()) for k, t in mine.groups(table)]
            expected = [(k, t.to_pylist()) for k, t in theirs.groups(table)]
            assert found == expected, f"{first}, {second}: expected {expected}, found {found}"
            assert (mine.single(table) is not None) == (len(expected) == 1)


def test_a_day_partitioned_local_table_is_written_without_pyiceberg(tmp_path: Path) -> None:
    """What a Spark task does: unpickle the topic's writers and write, in a fresh interpreter;
    the files are the table's (field ids, one per day) and pyiceberg was never imported."""
    writer = _writer(tmp_path, TimestamptzType(), "day")
    shipped = tmp_path / "writers.pickle"
    shipped.write_bytes(pickle.dumps(TopicWriters(writer)))
    script = f"""
import pickle, sys, datetime as dt
import pyarrow as pa
writers = pickle.loads(open({str(shipped)!r}, "rb").read())
days = [dt.datetime(2024, 3, d, tzinfo=dt.UTC) for d in (1, 1, 2)]
rows = pa.table({{"event_time": pa.array(days, pa.timestamp("us", tz="UTC")),
                 "offset": pa.array([0, 1, 2], pa.int64())}})
files = writers.data.write(rows, "task-0")
print(sorted((f.path, f.rows) for f in files))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyiceberg", "pydantic"))
print(loaded)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()  # fmt: skip
    assert out[1] == "[]", f"expected no pyiceberg in the task, found {out[1]}"
    files = eval(out[0])  # noqa: S307 — our own subprocess's repr of a list of tuples
    assert [(Path(p).parent.name, rows) for p, rows in files] == [
        ("event_time_day=2024-03-01", 2),
        ("event_time_day=2024-03-02", 1),
    ]
    io = PyArrowFileIO()
    for path, _ in files:  # the table's columns with their field ids; pyiceberg reads them
        parquet = pq.read_schema(path.removeprefix("file://"))
        assert [f.metadata[b"PARQUET:field_id"] for f in parquet] == [b"1", b"2"]
        assert len(io.new_input(path)) == Path(path.removeprefix("file://")).stat().st_size


def test_data_files_are_described_as_pyiceberg_describes_them(tmp_path: Path) -> None:
    # DataFileDescriber checks the schema once per distinct footer schema; every entry must
    # still be pyiceberg's parquet_file_to_data_file's, field for field.
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    from sluice.pipeline.table.iceberg_data_file import DataFileDescriber

    writer = _writer(tmp_path, TimestamptzType(), "day")
    schema = Schema.model_validate_json(writer.schema_json)
    spec = PartitionSpec.model_validate_json(writer.spec_json)
    metadata = new_table_metadata(schema, spec, UNSORTED_SORT_ORDER, writer.location, {})
    stamps = [v for v in _INSTANTS[:6]] + [None]
    rows = pa.table(
        {
            "event_time": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            "offset": range(len(stamps)),
        }
    )
    written = writer.write(rows, "a") + writer.write(rows.slice(2, 3), "b")
    assert len(written) > 4
    io = PyArrowFileIO()
    describer = DataFileDescriber(io, metadata)
    fields = (
        "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
        "column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
        "lower_bounds", "upper_bounds", "split_offsets", "sort_order_id",
        "equality_ids", "key_metadata", "content",
    )  # fmt: skip
    for file in written:
        mine, theirs = (
            describer.describe(file.path),
            parquet_file_to_data_file(io, metadata, file.path),
        )
        for name in fields:
            assert getattr(mine, name) == getattr(theirs, name), f"{file.path} {name}"
        assert mine == theirs
    with pytest.raises(FileNotFoundError):
        describer.describe(f"{writer.location}/data/none.parquet")
