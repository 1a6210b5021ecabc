"""Iceberg tables (``table.format=iceberg``): compaction's MB/s, and the cost of one commit.

Both on the embedded SQLite catalog and a local warehouse, through the calls the nightly load
and ``sluice table compact`` make (``IcebergRun.begin/writers/commit``,
``iceberg_maintenance.compact``), in-process; the tables are partitioned by
``day(event_time)``.

* ``iceberg_compaction`` — ``LOADS`` (10) nightly runs are committed, each writing ``WRITES``
  splits (24 quick, 80 full) of ``ROWS`` (3,000) records whose event times spread over
  ``DAYS`` (3) days: one small file per split and day, ``LOADS × WRITES × DAYS`` in all (720
  quick, 2,400 full), as a load of many small ranges leaves them. Then one ``compact`` with the
  default 128 MiB target rewrites every partition's files into one, in one snapshot. Timed:
  the compaction alone (plan, read, write, commit); MB/s is the bytes of the data files it
  rewrote (their sizes in the manifests) per second, rows/s likewise. Files before and after
  are counted. Each repetition builds a fresh table (not timed).
* ``iceberg_commit`` — one ``IcebergRun.commit`` of N data files (N = 1, 10, 100 quick; 1,000
  too in full), written beforehand by the run's own writer (not timed): the driver checks each
  file against its Parquet footer, then writes a manifest, a manifest list and a metadata file
  and swaps the catalog's pointer conditionally. Each repetition is the next run on the same
  table, so the table has history, as a nightly table does.

Each figure is the median of ``REPEATS`` repetitions, with the spread. Not thread-safe; the
temporary directory goes when the run ends.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench.bench_broker import load_average
from bench.results import REPEATS, Results
from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_data_file import WrittenFile
from sluice.pipeline.table.iceberg_maintenance import compact
from sluice.pipeline.table.iceberg_run import IcebergRun

TOPIC = "bench_events"
IDENTIFIER = f"sluice.{TOPIC}"
PROPS = {"iceberg.tables.default-partition-by": "day(event_time)"}
LOADS = 10
WRITES = {True: 24, False: 80}  # splits per load: quick, full
ROWS = 3_000  # records per split
DAYS = 3
COMMIT_FILES = {True: (1, 10, 100), False: (1, 10, 100, 1_000)}
COMMIT_ROWS = 200  # records per file of the commit experiment
BASE = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
_DAY_US = 86_400_000_000


def rows(start: int, count: int, days: int = DAYS) -> pa.Table:
    """``count`` records of a typed load (offsets from ``start``, partition 0), event times
    spread evenly over ``days`` days from ``BASE``."""
    step = days * _DAY_US // count
    event = pa.array([BASE + dt.timedelta(microseconds=i * step) for i in range(count)],
                     pa.timestamp("us", tz="UTC"))  # fmt: skip
    return pa.table(
        {
            "event_time": event,
            "user_id": pa.array([(start + i) % 10_007 for i in range(count)], pa.int32()),
            "page": pa.array([f"/page/{(start + i) % 97}" for i in range(count)]),
            "key": pa.array([str(start + i).encode() for i in range(count)], pa.binary()),
            "topic": pa.array([TOPIC] * count),
            "partition": pa.array([0] * count, pa.int32()),
            "offset": pa.array(range(start, start + count), pa.int64()),
            "timestamp": event,
            "timestampType": pa.array([0] * count, pa.int32()),
        }
    )


Staged = tuple[IcebergRun, list[WrittenFile], dict[str, dict[int, int]]]


def one_load(
    config: IcebergConfig, run_id: str, splits: int, per_split: int, days: int = DAYS
) -> Staged:
    """Plan a run and write its ``splits`` splits (one file per split and day); not committed."""
    run = IcebergRun.begin(config, [TOPIC])
    start = run.committed.get(TOPIC, {}).get(0, 0)
    writer = run.writers(rows(0, 1).schema)[TOPIC].data
    files: list[WrittenFile] = []
    for split in range(splits):
        first = start + split * per_split
        files += writer.write(rows(first, per_split, days), f"{run_id}-{split:04d}")
    return run, files, {TOPIC: {0: start + splits * per_split}}


def compaction_pass(work: Path, loads: int, splits: int, per_split: int) -> dict[str, float]:
    """A fresh table of ``loads`` committed runs, then one timed compaction (see the module)."""
    shutil.rmtree(work, ignore_errors=True)
    config = IcebergConfig.from_properties(PROPS, str(work))
    for n in range(loads):
        run, files, offsets = one_load(config, f"load{n}", splits, per_split)
        run.commit(files, offsets, f"load{n}")
    catalog = config.open_catalog()
    table = catalog.load_table(IDENTIFIER)
    data_bytes = sum(t.file.file_size_in_bytes for t in table.scan().plan_files())
    started = time.perf_counter()
    result = compact(catalog, IDENTIFIER)
    elapsed = time.perf_counter() - started
    after = catalog.load_table(IDENTIFIER)
    assert after.scan().to_arrow().num_rows == loads * splits * per_split
    return {
        "seconds": elapsed,
        "mb": data_bytes / 1e6,
        "rows": float(result.rows),
        "files_before": float(result.files_before),
        "files_after": float(result.files_after),
        "files_total_after": float(len(list(after.scan().plan_files()))),
    }


def commit_runs(work: Path, files: int, repeats: int) -> list[float]:
    """Seconds of ``repeats`` successive commits of ``files`` files each to one table."""
    shutil.rmtree(work, ignore_errors=True)
    config = IcebergConfig.from_properties(PROPS, str(work))
    seconds = []
    for n in range(repeats):
        # one day per split: each split is one file
        run, written, offsets = one_load(config, f"commit{n}", files, COMMIT_ROWS, days=1)
        assert len(written) == files
        started = time.perf_counter()
        run.commit(written, offsets, f"commit{n}")
        seconds.append(time.perf_counter() - started)
    return seconds


def run(results: Results, quick: bool, *, loads: int = LOADS, splits: int | None = None,
        per_split: int = ROWS, commit_files: tuple[int, ...] | None = None,
        work_parent: Path | None = None) -> None:  # fmt: skip
    """The rows of ``iceberg_compaction`` and ``iceberg_commit`` (see the module); the
    keywords shrink the run (the tests') and place its temporary directory."""
    splits = WRITES[quick] if splits is None else splits
    commit_files = COMMIT_FILES[quick] if commit_files is None else commit_files
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-iceberg-", dir=work_parent))
    try:
        passes = [compaction_pass(work / "compact", loads, splits, per_split)
                  for _ in range(REPEATS)]  # fmt: skip
        commits = {n: commit_runs(work / f"commit-{n}", n, REPEATS) for n in commit_files}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    exp = "iceberg_compaction"
    mb = [p["mb"] / p["seconds"] for p in passes]
    results.add_runs(exp, "compact", "rewritten, MB/s", mb, "MB/s")
    per_s = [p["rows"] / p["seconds"] for p in passes]
    results.add_runs(exp, "compact", "rewritten, rows/s", per_s, "rows/s")
    results.add_runs(exp, "compact", "one compaction, s", [p["seconds"] for p in passes], "s")
    results.add(exp, "before", "data files", passes[0]["files_before"], "files")
    results.add(exp, "after", "data files", passes[0]["files_total_after"], "files")
    results.add(exp, "before", "data, MB", passes[0]["mb"], "MB")
    results.note(exp, f"{loads} loads of {splits} splits of {per_split:,} records over {DAYS} "
                 f"event-time days (day(event_time)): {int(passes[0]['files_before']):,} files "
                 f"into {int(passes[0]['files_after'])}, one snapshot; SQLite catalog, local "
                 f"disk; {REPEATS} fresh tables, median [min .. max]; load average "
                 f"{load_average()}")  # fmt: skip
    exp = "iceberg_commit"
    for n, seconds in commits.items():
        label = f"{n:,} file" + ("s" if n != 1 else "")
        results.add_runs(exp, label, "one commit, ms", [s * 1000 for s in seconds], "ms")
        results.add_runs(exp, label, "per file, ms", [s * 1000 / n for s in seconds], "ms")
    results.note(exp, f"IcebergRun.commit of N files of {COMMIT_ROWS} records (footers checked, "
                 "manifest, manifest list, metadata, conditional swap); SQLite catalog, local "
                 f"disk; {REPEATS} successive runs on one table, median [min .. max]")  # fmt: skip
