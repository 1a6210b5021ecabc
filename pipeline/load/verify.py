"""The verify phase of a load: every planned range accounted for, where the driver publishes.

Two witnesses of what a run read and wrote, and the rule that they agree for every planned
range with offsets to read (``[start, end)``, ``end > start``) before anything is published:

1. **The task results** (``SplitResult``, ``sluice.pipeline.source.split_reader``, filled in by
   ``sluice.pipeline.load.split_writer``): each split's task returns its range, the records it
   fetched, wrote and sent to the error table, bytes, lost offsets, schema ids and every file it
   wrote (path, bytes, rows) — through Spark's task results (``collect()``), so they reach the
   driver even when every file the executors wrote went somewhere the driver cannot see. Their
   ``[start, end)`` must tile the planned range.
2. **The staged files** (``StagedScan``), listed and read by the driver itself on the
   filesystem it publishes from: the data files' rows per (topic, partition, date), from
   Parquet footers (the rows per partition the split writer counted from the ``partition``
   column as it wrote it, ``PARTITION_ROWS_KEY``, checked against the file's rows and the
   column's statistics; in files without that entry — older tables, other writers — the
   column's statistics, and the column itself where a row group holds several partitions),
   and the error table's rows per partition. Before counting,
   the scan deletes what no result names: temporary leftovers of killed attempts
   (``.part-…tmp``) and files of failed attempts that the successful one did not write again.

A range whose tasks wrote more rows than the driver finds, a file a result names that the driver
cannot see (or sees with another size), or a range its results do not tile, is **stranded**:
``StrandedFilesError`` names every such range and the likely cause (a ``file://`` warehouse that
is not one shared filesystem for the driver and every worker). Any other disagreement is a
``LoadError``. Without this rule a worker that cannot see the driver's disk made a run publish
"0 rows" and move its offsets past the data.

For ``table.format=iceberg`` (``account_iceberg``) there is no staged directory to scan: the
files go straight under each table's location and ``IcebergRun.commit`` checks every file the
results name against its own footer (size, rows) before the catalog commit. What stays is the
rest of the rule: the results tile every planned range, and per topic the rows of the data
files the results name equal the rows the tasks wrote, those of its error files the records
they sent to the error table (fetched = written + errors).

Functions only; each call is for one thread (``scan_staged`` reads footers on a few threads
of its own).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

import pyarrow.compute as pc
import pyarrow.parquet as pq

from sluice.pipeline.load.errors import LoadError, StrandedFilesError
from sluice.pipeline.load.report import LoadReport
from sluice.pipeline.load.split_writer import (
    PARTITION_ROWS_KEY,
    TEMPORARY_SUFFIX,
    rows_by_partition,
)
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult
from sluice.pipeline.source.typed_columns import ERROR_ARROW_SCHEMA
from sluice.pipeline.table.commit import StagedRun
from sluice.pipeline.table.manifest import ERRORS_DIR, DataFile, ErrorCount, RowCount, is_error_file

__all__ = ["StagedScan", "account", "account_iceberg", "scan_staged"]

TopicPartitionKey = tuple[str, int]


@dataclass
class StagedScan:
    """What the driver finds in a staging directory: every Parquet file with size and rows,
    the data rows per (topic, partition, date) and the error table's rows per partition."""

    files: list[DataFile] = field(default_factory=list)
    row_counts: list[RowCount] = field(default_factory=list)
    error_counts: list[ErrorCount] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # leftovers deleted (relative paths)

    def landed(self) -> dict[TopicPartitionKey, int]:
        """Data rows per topic-partition."""
        rows: dict[TopicPartitionKey, int] = {}
        for c in self.row_counts:
            rows[c.topic, c.partition] = rows.get((c.topic, c.partition), 0) + c.rows
        return rows


def _hive_value(part: str, name: str) -> str | None:
    key, _, value = part.partition("=")
    return unquote(value) if key == name else None


def _partition_rows(parquet: pq.ParquetFile, relative: str) -> dict[int, int]:
    """Rows per value of the ``partition`` column of one file: from the footer's
    ``PARTITION_ROWS_KEY`` where the split writer put it (``_footer_rows``), else from
    row-group statistics where a row group holds one partition (Spark's tasks write one
    split, so one partition, per file), from the column itself otherwise."""
    metadata = parquet.metadata
    # Row groups' column chunks are numbered by leaf column (a struct or list column before
    # ``partition`` has several), not by Arrow field.
    schema = metadata.schema
    leaves = [schema.column(i).path for i in range(len(schema))]
    if "partition" not in leaves:
        raise LoadError(f"expected a 'partition' column, found {parquet.schema_arrow.names}")
    index = leaves.index("partition")
    raw = (metadata.metadata or {}).get(PARTITION_ROWS_KEY.encode())
    if raw is not None:
        return _footer_rows(metadata, index, raw, relative)
    counts: dict[int, int] = {}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        stats = row_group.column(index).statistics
        if (
            stats is not None
            and stats.has_min_max
            and stats.null_count == 0
            and stats.min == stats.max
        ):
            counts[int(stats.min)] = counts.get(int(stats.min), 0) + row_group.num_rows
            continue
        column = parquet.read_row_group(group, columns=["partition"]).column(0)
        for entry in pc.value_counts(column).to_pylist():
            value = int(entry["values"])
            counts[value] = counts.get(value, 0) + int(entry["counts"])
    return counts


def _footer_rows(
    metadata: pq.FileMetaData, index: int, raw: bytes, relative: str
) -> dict[int, int]:
    """The footer's rows per partition, refused (``LoadError``) unless it is a JSON object of
    partition to rows (both integers >= 0) whose rows add up to the file's and whose
    partitions lie within the ``partition`` column's statistics of the file's row groups."""
    where = f"{relative}: footer {PARTITION_ROWS_KEY}"
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    if not isinstance(doc, dict) or not all(
        key.isdigit() and type(n) is int and n >= 0 for key, n in doc.items()
    ):
        raise LoadError(f"{where}: expected {{partition: rows}}, found {raw[:200]!r}")
    counts = {int(key): n for key, n in doc.items()}
    total = sum(counts.values())
    if total != metadata.num_rows:
        raise LoadError(
            f"{where}: expected rows adding up to the file's {metadata.num_rows}, found {total}"
        )
    low, high = None, None
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            return {p: n for p, n in counts.items() if n}  # no bounds to check against
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    held = sorted(p for p, n in counts.items() if n)
    if held and low is not None and high is not None and (held[0] < low or held[-1] > high):
        raise LoadError(
            f"{where}: expected partitions within the column's [{low}, {high}], found {held}"
        )
    return {p: counts[p] for p in held}


def _is_temporary(relative: str) -> bool:
    base = posixpath.basename(relative)
    return base.startswith(".part-") and base.endswith(TEMPORARY_SUFFIX)


def scan_staged(staged: StagedRun, named: Collection[str] | None = None) -> StagedScan:
    """List and read (footers; one small column of a file without ``PARTITION_ROWS_KEY``)
    every Parquet file of the staged run on the driver's view of the table's filesystem. With
    ``named`` (the files the task results name), first delete temporary leftovers and Parquet
    files not named (module doc). Raises ``LoadError`` for a data file under a ``_``/``.``
    directory or out of the ``topic=/date=`` layout."""
    fs = staged.table.fs
    scan = StagedScan()
    errors: dict[TopicPartitionKey, int] = {}
    data: list[tuple[str, int, str, str]] = []  # relative path, size, topic, date
    for relative, size in fs.walk_files(staged.path):
        if named is not None and (
            _is_temporary(relative) or (relative.endswith(".parquet") and relative not in named)
        ):
            fs.fs.delete_file(posixpath.join(staged.path, relative))
            scan.removed.append(relative)
            continue
        if not relative.endswith(".parquet"):
            continue
        parts = relative.split("/")
        if is_error_file(relative):
            rows = _count_errors(staged, relative, errors)
            scan.files.append(DataFile(relative, size, rows))
            continue
        if any(p.startswith(("_", ".")) for p in parts):
            raise LoadError(
                f"{staged.uri}: expected no Parquet file under a '_' or '.' directory but "
                f"{ERRORS_DIR}/, found {relative!r}"
            )
        topic = _hive_value(parts[0], "topic") if len(parts) == 3 else None
        date = _hive_value(parts[1], "date") if len(parts) == 3 else None
        if topic is None or date is None:
            raise LoadError(
                f"{staged.uri}: expected data files at topic=<t>/date=<d>/<file>, "
                f"found {relative!r}"
            )
        data.append((relative, size, topic, date))

    def footer(relative: str) -> tuple[int, dict[int, int]]:
        with fs.fs.open_input_file(posixpath.join(staged.path, relative)) as f:
            parquet = pq.ParquetFile(f)
            return parquet.metadata.num_rows, _partition_rows(parquet, relative)

    # One after another: a footer of a small file is parsed in about 0.1 ms, and handing
    # each to a thread pool cost more than that (200 files: ~20 ms in a loop, 35-40 ms on
    # 1-4 threads, measured on the 2-core machine).
    footers = [footer(relative) for relative, _, _, _ in data]
    dates: dict[tuple[str, int, str], int] = {}
    for (relative, size, topic, date), (rows, partitions) in zip(data, footers, strict=True):
        for partition, n in partitions.items():
            dates[topic, partition, date] = dates.get((topic, partition, date), 0) + n
        scan.files.append(DataFile(relative, size, rows))
    scan.files.sort(key=lambda f: f.path)
    scan.row_counts = sorted(RowCount(t, p, d, n) for (t, p, d), n in dates.items() if n)
    scan.error_counts = [ErrorCount(t, p, n) for (t, p), n in sorted(errors.items())]
    return scan


def _count_errors(staged: StagedRun, relative: str, errors: dict[TopicPartitionKey, int]) -> int:
    """Add the rows of one error file to ``errors`` per partition; return its rows."""
    with staged.table.fs.fs.open_input_file(posixpath.join(staged.path, relative)) as f:
        table = pq.read_table(f, columns=["topic", "partition"])
    expected = [ERROR_ARROW_SCHEMA.field("topic"), ERROR_ARROW_SCHEMA.field("partition")]
    if list(table.schema) != expected:
        raise LoadError(f"{relative}: expected an error file, found {table.schema}")
    for topic, partition in zip(
        table.column("topic").to_pylist(), table.column("partition").to_pylist(), strict=True
    ):
        errors[topic, partition] = errors.get((topic, partition), 0) + 1
    return int(table.num_rows)


def _stranded(
    reads: Sequence[OffsetRange],
    outcomes: Sequence[SplitResult],
    scan: StagedScan,
) -> list[str]:
    """One line per planned range that Spark's tasks read but the driver cannot account for."""
    observed = rows_by_partition(outcomes)
    landed = scan.landed()
    seen = {f.path: f.size for f in scan.files}
    covered: dict[TopicPartitionKey, int] = {}
    unseen: dict[TopicPartitionKey, list[str]] = {}
    for o in outcomes:
        key = (o.split.topic, o.split.partition)
        covered[key] = covered.get(key, 0) + o.split.count
        unseen.setdefault(key, []).extend(p for p, size, _ in o.files if seen.get(p) != size)
    lines = []
    for r in reads:
        key = (r.topic, r.partition)
        wrote, found, metered = observed.get(key, 0), landed.get(key, 0), covered.get(key, 0)
        problems = []
        if wrote > found:
            problems.append(f"Spark's tasks wrote {wrote} rows, the driver finds {found}")
        if unseen.get(key):
            missing = sorted(unseen[key])
            problems.append(
                f"{len(missing)} files its tasks wrote are not there with their sizes "
                f"({missing[0]}{', ...' if len(missing) > 1 else ''})"
            )
        if metered != r.count:
            problems.append(f"task results cover {metered} of its {r.count} offsets")
        if problems:
            lines.append(f"{r.topic}-{r.partition} [{r.start}, {r.end}): " + "; ".join(problems))
    return lines


def account(
    report: LoadReport,
    reads: Sequence[OffsetRange],
    outcomes: Sequence[SplitResult],
    scan: StagedScan,
    staged_uri: str,
) -> None:
    """Fill the report's per-partition numbers from the task results; raise unless every
    planned range is accounted for (module doc): ``StrandedFilesError`` for ranges read but
    not where the driver publishes, ``LoadError`` for any other disagreement."""
    stranded = _stranded(reads, outcomes, scan)
    if stranded:
        raise StrandedFilesError(
            f"{len(stranded)} of {len(reads)} planned ranges are not accounted for in "
            f"{staged_uri}, where the driver publishes: " + "; ".join(stranded) + ". Likely "
            "cause: the executors write to a path the driver cannot see — a file:// "
            "warehouse that is not one filesystem shared by the driver and every worker at "
            "the same path (use hdfs://, or mount shared storage everywhere). Nothing was "
            "published and no offset moved; the rerun reads these ranges again"
        )
    landed = scan.landed()
    observed = rows_by_partition(outcomes)
    by_tp = {(p.range.topic, p.range.partition): p for p in report.partitions}
    schema_ids: dict[str, set[int]] = {}
    for o in outcomes:
        part = by_tp[o.split.topic, o.split.partition]
        part.bytes += o.bytes
        part.seconds += o.seconds
        part.lost += o.lost
        part.rows += o.written
        part.errors += o.errors
        if o.schema_ids:
            schema_ids.setdefault(o.split.topic, set()).update(o.schema_ids)
    in_error_table = {(e.topic, e.partition): e.rows for e in scan.error_counts}
    for r in reads:
        part = by_tp[r.topic, r.partition]
        written = landed.get((r.topic, r.partition), 0)
        wrote = observed.get((r.topic, r.partition), 0)
        if part.rows != written or written > r.count or wrote != written:
            raise LoadError(
                f"{r.topic}-{r.partition}: expected the staged files to hold the {part.rows} "
                f"records fetched from [{r.start}, {r.end}) and decoded (Spark's tasks "
                f"counted {wrote}), found {written}"
            )
        routed = in_error_table.pop((r.topic, r.partition), 0)
        if part.errors != routed:
            raise LoadError(
                f"{r.topic}-{r.partition}: expected the error table to hold the {part.errors} "
                f"undecodable records of [{r.start}, {r.end}), found {routed}"
            )
    if in_error_table:
        raise LoadError(f"expected error rows only of partitions read, found {in_error_table}")
    report.dates = list(scan.row_counts)
    report.schema_ids = {t: sorted(ids) for t, ids in sorted(schema_ids.items())}


def account_iceberg(
    report: LoadReport,
    reads: Sequence[OffsetRange],
    outcomes: Sequence[SplitResult],
    error_locations: Collection[str],
) -> list[tuple[str, int, int]]:
    """``account`` for Iceberg tables (module doc): fill the report's per-partition numbers
    from the task results; raise ``StrandedFilesError`` for a planned range the results do not
    tile, ``LoadError`` when a topic's files do not hold its rows. ``error_locations`` are the
    error tables' roots. Returns every file the results name, once: (URI, bytes, rows)."""
    covered: dict[TopicPartitionKey, int] = {}
    for o in outcomes:
        key = (o.split.topic, o.split.partition)
        covered[key] = covered.get(key, 0) + o.split.count
    untiled = [
        f"{r.topic}-{r.partition} [{r.start}, {r.end}): task results cover "
        f"{covered.get((r.topic, r.partition), 0)} of its {r.count} offsets"
        for r in reads
        if covered.get((r.topic, r.partition), 0) != r.count
    ]
    if untiled:
        raise StrandedFilesError(
            f"{len(untiled)} of {len(reads)} planned ranges are not accounted for: "
            + "; ".join(untiled)
        )
    by_tp = {(p.range.topic, p.range.partition): p for p in report.partitions}
    schema_ids: dict[str, set[int]] = {}
    wrote: dict[str, list[int]] = {}  # topic -> [data rows, error rows]
    files: dict[str, tuple[str, int, int]] = {}
    topic_files: dict[str, dict[str, tuple[int, int]]] = {}
    for o in outcomes:
        part = by_tp[o.split.topic, o.split.partition]
        part.bytes += o.bytes
        part.seconds += o.seconds
        part.lost += o.lost
        part.rows += o.written
        part.errors += o.errors
        counts = wrote.setdefault(o.split.topic, [0, 0])
        counts[0] += o.written
        counts[1] += o.errors
        if o.schema_ids:
            schema_ids.setdefault(o.split.topic, set()).update(o.schema_ids)
        for path, size, rows in o.files:  # a packed task's file is named by each of its splits
            files[path] = (path, size, rows)
            topic_files.setdefault(o.split.topic, {})[path] = (size, rows)
    roots = tuple(location.rstrip("/") + "/" for location in error_locations)
    for topic, (data_rows, error_rows) in sorted(wrote.items()):
        mine = topic_files.get(topic, {})
        in_errors = sum(rows for path, (_, rows) in mine.items() if path.startswith(roots))
        in_data = sum(rows for path, (_, rows) in mine.items() if not path.startswith(roots))
        if (in_data, in_errors) != (data_rows, error_rows):
            raise LoadError(
                f"{topic}: expected its files to hold the {data_rows} records its tasks wrote "
                f"and the {error_rows} they sent to the error table, found {in_data} and "
                f"{in_errors}"
            )
    report.schema_ids = {t: sorted(ids) for t, ids in sorted(schema_ids.items())}
    return sorted(files.values())
