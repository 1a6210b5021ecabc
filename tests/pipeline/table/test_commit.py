"""Tests for sluice.pipeline.table.commit (and sluice.pipeline.table.filesystem) on file://.

Readers are the real ones: Spark (local[2]), pyarrow.dataset and duckdb. Crashes are real too: a
child process loads the table and SIGKILLs itself at a chosen step, then a retry runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.table.commit import (
    MANIFEST_NAME,
    CommitConflictError,
    CorruptTableError,
    InvalidRunIdError,
    RunAlreadyPublishedError,
    StagedRun,
    StagingValidationError,
    TableWriter,
    cleanup_staging,
    latest_committed_offsets,
    latest_manifest,
    published_runs,
)
from sluice.pipeline.table.filesystem import (
    HadoopRenamer,
    LocalRenamer,
    TableFileSystem,
    TargetExistsError,
)
from sluice.pipeline.table.manifest import DataFile, InvalidManifestError, RangeRecord, RowCount

# --------------------------------------------------------------------------------------------
# Helpers: a run written with pyarrow (fast) and the three readers
# --------------------------------------------------------------------------------------------


def stage(staged: StagedRun, topic: str, partition: int, start: int, end: int) -> RangeRecord:
    """Write offsets [start, end) of one partition (one file per date), like a load would."""
    by_date: dict[str, list[int]] = {}
    for offset in range(start, end):
        by_date.setdefault(f"2024-01-{1 + offset // 40:02d}", []).append(offset)
    for date, offsets in by_date.items():
        directory = Path(staged.path) / f"topic={topic}" / f"date={date}"
        directory.mkdir(parents=True, exist_ok=True)
        rows = pa.table(
            {
                "partition": pa.array([partition] * len(offsets), pa.int32()),
                "offset": pa.array(offsets, pa.int64()),
                "value": pa.array([f"{topic}:{partition}:{o}".encode() for o in offsets]),
            }
        )
        pq.write_table(rows, directory / f"part-{staged.run_id}-{partition}.parquet")
    return RangeRecord(OffsetRange(topic, partition, start, end), end - start, 0)


def row_counts(records: list[RangeRecord]) -> list[RowCount]:
    counts: Counter[tuple[str, int, str]] = Counter()
    for r in (record.range for record in records):
        for offset in range(r.start, r.end):
            counts[(r.topic, r.partition, f"2024-01-{1 + offset // 40:02d}")] += 1
    return [RowCount(t, p, d, n) for (t, p, d), n in sorted(counts.items())]


def load(table: str, run_id: str, previous: str | None, ranges: list[OffsetRange]) -> StagedRun:
    staged = TableWriter(table).begin(run_id, previous)
    records = [stage(staged, r.topic, r.partition, r.start, r.end) for r in ranges]
    staged.write_manifest(staged.manifest(records, row_counts=row_counts(records)))
    return staged


def keys_pyarrow(table: Path) -> list[tuple[Any, ...]]:
    t = ds.dataset(str(table), partitioning="hive").to_table(
        columns=["load", "topic", "partition", "offset"]
    )
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


def keys_duckdb(table: Path) -> list[tuple[Any, ...]]:
    with duckdb.connect() as con:
        rows = con.execute(
            'SELECT load, topic, partition, "offset" FROM read_parquet(?, hive_partitioning=true)',
            [f"{table}/**/*.parquet"],
        ).fetchall()
    return sorted(tuple(r) for r in rows)


def assert_spark_keys(spark: Any, table: Path, expected: list[tuple[Any, ...]]) -> None:
    """Spark's read of the table holds exactly ``expected``: ``(load, topic, partition,
    offset)`` keys, or ``(topic, partition, offset)`` ones."""
    columns = ["load", "topic", "partition", "offset"][-len(expected[0]) :]
    types = {"load": "int", "topic": "string", "partition": "int", "offset": "bigint"}
    want = spark.createDataFrame(expected, ", ".join(f"{c} {types[c]}" for c in columns))
    got = spark.read.parquet(str(table)).select(*columns)
    assert_df_equality(got, want, ignore_row_order=True)


def expected_keys(load_no: int, ranges: list[OffsetRange]) -> list[tuple[Any, ...]]:
    return sorted((load_no, r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end))


# --------------------------------------------------------------------------------------------
# Layout, begin, publish
# --------------------------------------------------------------------------------------------


def test_first_run_publishes_into_load_1(tmp_path: Path) -> None:
    table = tmp_path / "events"
    staged = load(str(table), "r1", None, [OffsetRange("a", 0, 0, 50)])
    assert staged.sequence == 1
    assert Path(staged.path) == tmp_path / "_staging" / "events" / "1-r1"
    assert not any(table.rglob("*.parquet")), "nothing under the table before publish"
    published = staged.publish()
    assert published.sequence == 1 and Path(published.path) == table / "load=1"
    assert (table / "load=1" / MANIFEST_NAME).is_file()
    assert not Path(staged.path).exists()
    assert [r.sequence for r in published_runs(str(table))] == [1]
    manifest = latest_manifest(str(table))
    assert manifest is not None and manifest.run_id == "r1" and manifest.total_rows == 50
    assert latest_committed_offsets(str(table)) == {"a": {0: 50}}
    assert keys_pyarrow(table) == expected_keys(1, [OffsetRange("a", 0, 0, 50)])


def test_file_uri_and_plain_path_are_the_same_table(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/events"
    staged = load(uri, "r1", None, [OffsetRange("a", 0, 0, 5)])
    assert staged.uri.startswith("file:///") and staged.uri.endswith("/_staging/events/1-r1")
    staged.publish()
    manifest = latest_manifest(str(tmp_path / "events"))
    assert manifest is not None and manifest.table == uri
    assert latest_committed_offsets(uri) == {"a": {0: 5}}


def test_resume_position_carries_untouched_partitions(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    load(table, "r1", None, [OffsetRange("a", 0, 0, 10), OffsetRange("b", 0, 0, 4)]).publish()
    staged = load(table, "r2", "r1", [OffsetRange("a", 0, 10, 30)])
    assert staged.sequence == 2 and staged.previous_offsets == {"a": {0: 10}, "b": {0: 4}}
    staged.publish()
    assert latest_committed_offsets(table) == {"a": {0: 30}, "b": {0: 4}}
    assert [r.sequence for r in published_runs(table)] == [1, 2]


def test_begin_checks_expected_previous_run(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    with pytest.raises(InvalidRunIdError, match="found 'a/b'"):
        TableWriter(table).begin("a/b", None)
    load(table, "r1", None, [OffsetRange("a", 0, 0, 1)]).publish()
    with pytest.raises(
        CommitConflictError, match=r"expected previous run None, found 'r1' \(load=1\)"
    ):
        TableWriter(table).begin("r2", None)
    with pytest.raises(CommitConflictError, match="expected previous run 'r0', found 'r1'"):
        TableWriter(table).begin("r2", "r0")
    with pytest.raises(RunAlreadyPublishedError, match="'r1'.*published as load=1"):
        TableWriter(table).begin("r1", "r1")


def test_publish_requires_a_manifest(tmp_path: Path) -> None:
    staged = TableWriter(str(tmp_path / "t")).begin("r1", None)
    stage(staged, "a", 0, 0, 3)
    with pytest.raises(StagingValidationError, match="expected _manifest.json, found none"):
        staged.publish()
    assert published_runs(str(tmp_path / "t")) == []


def test_publish_rejects_files_that_differ_from_the_manifest(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    staged = load(table, "r1", None, [OffsetRange("a", 0, 0, 3)])
    extra = Path(staged.path) / "topic=a" / "date=2024-01-09"
    extra.mkdir()
    pq.write_table(pa.table({"x": [1]}), extra / "stray.parquet")
    with pytest.raises(StagingValidationError, match=r"unlisted=\['topic=a/date=2024-01-09/"):
        staged.publish()
    (extra / "stray.parquet").unlink()
    listed = Path(staged.path) / "topic=a" / "date=2024-01-01" / "part-r1-0.parquet"
    listed.write_bytes(listed.read_bytes() + b"junk")
    with pytest.raises(StagingValidationError, match="different size"):
        staged.publish()
    listed.unlink()
    with pytest.raises(StagingValidationError, match=r"missing=\['topic=a/date=2024-01-01/"):
        staged.publish()
    assert published_runs(table) == []


def test_parquet_under_hidden_directory_is_refused(tmp_path: Path) -> None:
    staged = TableWriter(str(tmp_path / "t")).begin("r1", None)
    hidden = Path(staged.path) / "_temporary" / "0"
    hidden.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), hidden / "part-0.parquet")
    with pytest.raises(StagingValidationError, match="duckdb reads them"):
        staged.data_files()


def test_manifest_must_name_this_run(tmp_path: Path) -> None:
    staged = TableWriter(str(tmp_path / "t")).begin("r1", None)
    other = TableWriter(str(tmp_path / "u")).begin("r1", None)
    with pytest.raises(StagingValidationError, match="expected a manifest for"):
        staged.write_manifest(other.manifest([], files=[]))


def test_publish_checks_the_stored_manifest_not_the_one_it_wrote(tmp_path: Path) -> None:
    """The manifest is read back before the rename: one changed on disk after it was written
    (another run's, a torn one) is refused even though this object wrote a valid one."""
    table = str(tmp_path / "t")
    staged = load(table, "r1", None, [OffsetRange("a", 0, 0, 3)])
    path = Path(staged.path) / MANIFEST_NAME
    written = path.read_bytes()
    path.write_bytes(written.replace(b'"r1"', b'"r9"'))
    with pytest.raises(StagingValidationError, match="expected a manifest for"):
        staged.publish()
    path.write_bytes(written[: len(written) // 2])
    with pytest.raises(InvalidManifestError, match="expected a JSON object"):
        staged.publish()
    path.write_bytes(written)
    assert staged.publish().sequence == 1


def test_publish_refuses_a_manifest_the_next_run_could_not_read(tmp_path: Path) -> None:
    """Building a manifest checks values, decoding checks types too: one with a float byte
    count is written, but the publish decodes it and refuses it, so no run is published that
    would stop the next one."""
    table = str(tmp_path / "t")
    staged = TableWriter(table).begin("r1", None)
    record = stage(staged, "a", 0, 0, 3)
    staged.write_manifest(staged.manifest([replace(record, bytes=120.0)]))
    with pytest.raises(InvalidManifestError, match="expected int, found float"):
        staged.publish()
    assert published_runs(table) == []


def test_abort_and_cleanup(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    staged = load(table, "r1", None, [OffsetRange("a", 0, 0, 3)])
    staged.abort()
    assert not Path(staged.path).exists() and published_runs(table) == []
    # Two runs race for load=1; the loser's staging is a dead end, removed by the winner.
    loser = load(table, "r2", None, [OffsetRange("a", 0, 0, 3)])
    load(table, "r3", None, [OffsetRange("a", 0, 0, 3)]).publish()
    assert not Path(loser.path).exists()
    # A dead end left by a crash is removed by cleanup_staging / the next begin.
    dead = tmp_path / "_staging" / "t" / "1-crashed"
    dead.mkdir()
    assert cleanup_staging(table) == [str(dead)]
    live = tmp_path / "_staging" / "t" / "2-maybe-alive"
    live.mkdir()
    assert cleanup_staging(table) == [] and live.exists()


def test_rebegin_replaces_own_leftover(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    first = load(table, "r1", None, [OffsetRange("a", 0, 0, 3)])
    again = TableWriter(table).begin("r1", None)
    assert again.path == first.path and list(Path(again.path).iterdir()) == []


def test_corrupt_table_is_reported(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "load=x").mkdir(parents=True)
    with pytest.raises(CorruptTableError, match="expected load=<sequence >= 1>, found 'load=x'"):
        published_runs(str(table))
    (table / "load=x").rmdir()
    (table / "load=1").mkdir()
    with pytest.raises(CorruptTableError, match="expected _manifest.json, found none"):
        latest_manifest(str(table))


# --------------------------------------------------------------------------------------------
# Rename-if-absent
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("syscall", [True, False], ids=["renameat2", "os.rename"])
def test_local_rename_noreplace(tmp_path: Path, syscall: bool) -> None:
    renamer = LocalRenamer()
    if not syscall:
        renamer._renameat2 = None
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f").write_text("new")
    dst.mkdir()
    (dst / "g").write_text("old")
    with pytest.raises(TargetExistsError):
        renamer.rename_noreplace(str(src), str(dst))
    assert (dst / "g").read_text() == "old" and (src / "f").exists()
    renamer.rename_noreplace(str(src), str(tmp_path / "moved"))
    assert (tmp_path / "moved" / "f").read_text() == "new" and not src.exists()


def test_non_local_filesystem_needs_a_renamer(tmp_path: Path) -> None:
    fs = TableFileSystem(TableFileSystem.from_uri(str(tmp_path))[0].fs, "hdfs://nn:8020", None)
    with pytest.raises(Exception, match="expected a Renamer"):
        fs.rename_noreplace("/a", "/b")


def test_hadoop_renamer_through_the_spark_jvm(spark: Any, tmp_path: Path) -> None:
    renamer = HadoopRenamer.from_spark(spark)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f").write_text("x")
    dst.mkdir()
    with pytest.raises(TargetExistsError):
        renamer.rename_noreplace(f"file://{src}", f"file://{dst}")
    assert not (dst / "src").exists(), "must not move src into dst, as FileSystem.rename does"
    renamer.rename_noreplace(f"file://{src}", f"file://{tmp_path / 'moved'}")
    assert (tmp_path / "moved" / "f").exists()
    # The whole protocol with the JVM renamer.
    writer = TableWriter(f"file://{tmp_path}/t", renamer=renamer)
    staged = writer.begin("r1", None)
    record = stage(staged, "a", 0, 0, 5)
    staged.write_manifest(staged.manifest([record]))
    assert staged.publish().sequence == 1


# --------------------------------------------------------------------------------------------
# Concurrency: two publishers, one winner
# --------------------------------------------------------------------------------------------


def test_concurrent_publishers_exactly_one_wins(tmp_path: Path) -> None:
    for attempt in range(8):
        table = str(tmp_path / f"t{attempt}")
        load(table, "base", None, [OffsetRange("a", 0, 0, 5)]).publish()
        runs = [load(table, f"run-{i}", "base", [OffsetRange("a", 0, 5, 10)]) for i in range(2)]
        barrier = threading.Barrier(2)
        outcomes: dict[str, Any] = {}

        def publish(
            staged: StagedRun,
            outcomes: dict[str, Any] = outcomes,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            try:
                outcomes[staged.run_id] = staged.publish()
            except CommitConflictError as exc:
                outcomes[staged.run_id] = exc

        threads = [threading.Thread(target=publish, args=(s,)) for s in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [o for o in outcomes.values() if isinstance(o, CommitConflictError)]
        assert len(errors) == 1, outcomes
        winner = next(k for k, o in outcomes.items() if not isinstance(o, Exception))
        assert f"expected previous run 'base', found '{winner}'" in str(errors[0])
        assert [r.sequence for r in published_runs(table)] == [1, 2]
        assert keys_pyarrow(Path(table)).count((2, "a", 0, 5)) == 1
        assert not list((tmp_path / "_staging" / f"t{attempt}").iterdir())


def test_rename_is_the_guard_when_the_check_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = str(tmp_path / "t")
    a = load(table, "a", None, [OffsetRange("x", 0, 0, 5)])
    b = load(table, "b", None, [OffsetRange("x", 0, 0, 5)])
    a.publish()
    # b's early check runs as if a had not published yet; the rename must still refuse.
    real = b.table.published_runs
    calls = iter([[], None])
    monkeypatch.setattr(b.table, "published_runs", lambda: next(calls) or real())
    with pytest.raises(CommitConflictError, match="found 'a' published as load=1 first"):
        b.publish()
    assert keys_pyarrow(Path(table)) == expected_keys(1, [OffsetRange("x", 0, 0, 5)])


# --------------------------------------------------------------------------------------------
# Visibility to Spark, pyarrow and duckdb
# --------------------------------------------------------------------------------------------


def spark_stage(spark: Any, staged: StagedRun, ranges: list[OffsetRange]) -> None:
    rows = [
        (r.topic, r.partition, o, f"v{o}".encode(), f"2024-01-{1 + o // 40:02d}")
        for r in ranges
        for o in range(r.start, r.end)
    ]
    schema = "topic string, partition int, offset long, value binary, date string"
    df = spark.createDataFrame(rows, schema)
    df.coalesce(1).write.mode("append").partitionBy("topic", "date").parquet(staged.uri)
    records = [RangeRecord(r, r.count, 0) for r in ranges]
    staged.write_manifest(staged.manifest(records, row_counts=row_counts(records)))


def test_staged_run_is_invisible_until_published(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "events"
    first = [OffsetRange("clicks", 0, 0, 30), OffsetRange("views", 0, 0, 10)]
    second = [OffsetRange("clicks", 0, 30, 90), OffsetRange("views", 0, 10, 20)]
    writer = TableWriter(f"file://{table}")
    staged = writer.begin("r1", None)
    spark_stage(spark, staged, first)
    staged.publish()
    staged = writer.begin("r2", "r1")
    spark_stage(spark, staged, second)
    assert any(Path(staged.path).rglob("*.parquet"))
    before = expected_keys(1, first)
    assert_spark_keys(spark, table, before)
    assert keys_pyarrow(table) == before
    assert keys_duckdb(table) == before
    staged.publish()
    after = sorted(before + expected_keys(2, second))
    assert_spark_keys(spark, table, after)
    assert keys_pyarrow(table) == after
    assert keys_duckdb(table) == after
    assert latest_committed_offsets(str(table)) == {"clicks": {0: 90}, "views": {0: 20}}
    manifest = latest_manifest(str(table))
    assert manifest is not None and {f.path.split("/")[0] for f in manifest.files} == {
        "topic=clicks",
        "topic=views",
    }
    assert sum(f.rows for f in manifest.files) == 70
    assert all(isinstance(f, DataFile) for f in manifest.files)


# --------------------------------------------------------------------------------------------
# Crash injection: SIGKILL at each step, then a retry
# --------------------------------------------------------------------------------------------

CRASH_SCRIPT = r"""
import os, signal, sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.table.manifest import RangeRecord
from sluice.pipeline.source.options import complete_offsets
from sluice.pipeline.source.ranges import LogBounds, resolve_ranges
from sluice.pipeline.table.commit import TableWriter

table, run_id, log_end = sys.argv[1], sys.argv[2], int(sys.argv[3])
crash = os.environ.get("SLUICE_CRASH_AT", "")

def crash_point(name):
    if crash == name:
        os.kill(os.getpid(), signal.SIGKILL)

class KillAfterRename:
    def __init__(self, inner):
        self.inner = inner
    def rename_noreplace(self, src, dst):
        self.inner.rename_noreplace(src, dst)
        crash_point("renamed")

writer = TableWriter(table)
writer.fs = replace(writer.fs, renamer=KillAfterRename(writer.fs.renamer))
log = {tp: LogBounds(0, log_end) for tp in
       [TopicPartition("clicks", 0), TopicPartition("clicks", 1), TopicPartition("views", 0)]}
previous = writer.latest_manifest()
starting = complete_offsets(writer.latest_committed_offsets(), log)
resolution = resolve_ranges(log, starting, "latest")
staged = writer.begin(run_id, previous.run_id if previous else None)
records = []
for r in resolution.ranges:
    by_day = {}
    for offset in range(r.start, r.end):
        by_day.setdefault(offset // 40, []).append(offset)
    for day, offsets in by_day.items():
        first = offsets[0]
        directory = Path(staged.path) / f"topic={r.topic}" / f"date=2024-01-{1 + first // 40:02d}"
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table({"partition": pa.array([r.partition] * len(offsets), pa.int32()),
                      "offset": pa.array(offsets, pa.int64())}),
            directory / f"part-{run_id}-{r.partition}-{first}.parquet")
    records.append(RangeRecord(r, r.count, 0))
crash_point("staged")
staged.write_manifest(staged.manifest(records))
crash_point("manifest")
staged.publish()
"""

LOG = [("clicks", 0), ("clicks", 1), ("views", 0)]


def run_load(script: Path, table: Path, run_id: str, log_end: int, crash: str = "") -> int:
    env = {**os.environ, "SLUICE_CRASH_AT": crash}
    result = subprocess.run(
        [sys.executable, str(script), str(table), run_id, str(log_end)],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if result.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(result.stderr.decode())
    return result.returncode


@pytest.mark.parametrize("crash", ["staged", "manifest", "renamed"])
def test_crash_then_retry_loads_every_row_once(spark: Any, tmp_path: Path, crash: str) -> None:
    script = tmp_path / "load.py"
    script.write_text(CRASH_SCRIPT)
    table = tmp_path / "events"
    assert run_load(script, table, "r1", 50) == 0
    assert run_load(script, table, "r2", 100, crash) == -signal.SIGKILL
    committed = latest_committed_offsets(str(table))
    if crash == "renamed":
        assert committed == {t: {p: 100 for tt, p in LOG if tt == t} for t, _ in LOG}
    else:
        assert committed == {t: {p: 50 for tt, p in LOG if tt == t} for t, _ in LOG}
        assert [r.sequence for r in published_runs(str(table))] == [1]
    assert run_load(script, table, "r3", 100) == 0
    assert latest_committed_offsets(str(table)) == {"clicks": {0: 100, 1: 100}, "views": {0: 100}}
    expected = sorted((t, p, o) for t, p in LOG for o in range(100))
    for keys in (keys_pyarrow(table), keys_duckdb(table)):
        assert sorted(k[1:] for k in keys) == expected  # every row exactly once
    assert_spark_keys(spark, table, expected)
    staging = tmp_path / "_staging" / "events"
    assert not staging.exists() or not list(staging.iterdir())
