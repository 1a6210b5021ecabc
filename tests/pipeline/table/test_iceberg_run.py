"""``IcebergRun``, the load's three calls, over several topics with their error tables: resume
positions, a failure between the error and the data commits, racing runs, shared tables."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import DataFileMismatchError, IcebergCommitConflictError
from sluice.pipeline.table.iceberg_data_file import WrittenFile
from sluice.pipeline.table.iceberg_run import IcebergRun
from tests.pipeline.table.iceberg_rows import typed_rows
from tests.pipeline.table.test_iceberg_errors import ERROR_SCHEMA, errors_at

SCHEMA = typed_rows("x", 1, 0, 1).schema


def read_and_write(
    run: IcebergRun, ends: dict[str, int], run_id: str
) -> tuple[list[WrittenFile], dict[str, dict[int, int]]]:
    """What the load's executors do for partition 0 of each topic: rows ``[committed, end)``
    (``pinned`` wins), every tenth offset undecodable; returns the files and the offsets."""
    writers = run.writers(SCHEMA, ERROR_SCHEMA)
    files: list[WrittenFile] = []
    offsets = {}
    for topic, end in ends.items():
        start = run.committed.get(topic, {}).get(0, 0)
        if topic in run.pinned:
            end = run.pinned[topic].get(0, start)
        bad = [o for o in range(start, end) if o % 10 == 0]
        rows = typed_rows(topic, 1, start, end - start)
        good = rows.filter(pc.invert(pc.is_in(rows["offset"], pa.array(bad, pa.int64()))))
        files += writers[topic].data.write(good, f"{run_id}-{topic}")
        errors = writers[topic].errors
        assert errors is not None
        bad_rows = errors_at(bad).set_column(0, "topic", pa.array([topic] * len(bad)))
        files += errors.write(bad_rows, f"{run_id}-{topic}")
        offsets[topic] = {0: end}
    return files, offsets


def offsets_in(config: IcebergConfig, identifier: str) -> list[int]:
    table = config.open_catalog().load_table(identifier)
    offsets: list[int] = table.scan().to_arrow()["offset"].to_pylist()
    return offsets


def test_runs_resume_and_a_failure_between_the_commits_is_repaired(tmp_path: object) -> None:
    config = IcebergConfig.from_properties({}, f"{tmp_path}/wh")
    run = IcebergRun.begin(config, ["a", "b"])
    assert run.committed == {"a": {}, "b": {}} and run.pinned == {}
    done = run.commit(*read_and_write(run, {"a": 100, "b": 50}, "r1"), "r1")
    assert set(done) == {"sluice.a", "sluice.b", "sluice.a_errors", "sluice.b_errors"}

    run = IcebergRun.begin(config, ["a", "b"])
    assert run.committed == {"a": {0: 100}, "b": {0: 50}}
    files, offsets = read_and_write(run, {"a": 200, "b": 80}, "r2")
    # The data files of "a" vanish before the driver commits: the error tables are committed,
    # then the data commit fails — as a driver killed between the two commits would leave it.
    a_data = f"{tmp_path}/wh/sluice/a/"
    lost = [WrittenFile(f.path + ".gone", f.size, f.rows) if a_data in f.path else f for f in files]
    with pytest.raises(DataFileMismatchError, match="found none"):
        run.commit(lost, offsets, "r2")

    run = IcebergRun.begin(config, ["a", "b"])
    assert run.committed == {"a": {0: 100}, "b": {0: 50}}
    assert run.pinned == {"a": {0: 200}, "b": {0: 80}}
    done = run.commit(*read_and_write(run, {"a": 260, "b": 90}, "r3"), "r3")  # the log grew
    assert done["sluice.a_errors"] is None and done["sluice.b_errors"] is None
    assert run.committed == {"a": {0: 100}, "b": {0: 50}}

    run = IcebergRun.begin(config, ["a", "b"])
    assert run.committed == {"a": {0: 200}, "b": {0: 80}} and run.pinned == {}
    run.commit(*read_and_write(run, {"a": 260, "b": 90}, "r4"), "r4")
    for topic, end in (("a", 260), ("b", 90)):
        landed = offsets_in(config, f"sluice.{topic}") + offsets_in(
            config, f"sluice.{topic}_errors"
        )
        assert Counter(landed) == Counter(range(end))  # every offset once, in one table

    run = IcebergRun.begin(config, ["a", "b"])
    done = run.commit(*read_and_write(run, {"a": 260, "b": 90}, "r5"), "r5")
    assert set(done.values()) == {None}  # nothing new: no snapshot anywhere


def test_two_runs_racing_one_commits_the_other_conflicts(tmp_path: object) -> None:
    config = IcebergConfig.from_properties({}, f"{tmp_path}/wh")
    first, second = IcebergRun.begin(config, ["a"]), IcebergRun.begin(config, ["a"])
    staged_first = read_and_write(first, {"a": 100}, "first")
    staged_second = read_and_write(second, {"a": 100}, "second")
    first.commit(*staged_first, "first")
    with pytest.raises(
        IcebergCommitConflictError, match="expected the current snapshot to be none"
    ):
        second.commit(*staged_second, "second")
    assert Counter(
        offsets_in(config, "sluice.a") + offsets_in(config, "sluice.a_errors")
    ) == Counter(range(100))


def test_a_table_changed_between_begin_and_writers_conflicts(tmp_path: object) -> None:
    config = IcebergConfig.from_properties({}, f"{tmp_path}/wh")
    late = IcebergRun.begin(config, ["a"])
    early = IcebergRun.begin(config, ["a"])
    early.commit(*read_and_write(early, {"a": 10}, "early"), "early")
    with pytest.raises(IcebergCommitConflictError):
        late.writers(SCHEMA, ERROR_SCHEMA)


def test_topics_sharing_a_table_commit_together(tmp_path: object) -> None:
    props = {"iceberg.table.a.name": "web.events", "iceberg.table.b.name": "web.events"}
    config = IcebergConfig.from_properties(props, f"{tmp_path}/wh")
    run = IcebergRun.begin(config, ["a", "b"])
    done = run.commit(*read_and_write(run, {"a": 30, "b": 20}, "r1"), "r1")
    assert set(done) == {"web.events", "web.events_errors"}
    run = IcebergRun.begin(config, ["a", "b"])
    assert run.committed == {"a": {0: 30}, "b": {0: 20}}
    table = config.open_catalog().load_table("web.events")
    assert Counter(table.scan().to_arrow()["topic"].to_pylist()) == {"a": 27, "b": 18}


def test_a_file_under_no_table_of_the_run_is_refused(tmp_path: object) -> None:
    config = IcebergConfig.from_properties({}, f"{tmp_path}/wh")
    run = IcebergRun.begin(config, ["a"])
    files, offsets = read_and_write(run, {"a": 10}, "r1")
    stray = WrittenFile(f"{tmp_path}/elsewhere/x.parquet", 1, 1)
    with pytest.raises(DataFileMismatchError, match="found it under none"):
        run.commit([*files, stray], offsets, "r1")
    assert config.open_catalog().load_table("sluice.a").current_snapshot() is None


def test_between_runs_after_the_error_commits_and_before_the_data_commits(tmp_path: object) -> None:
    config = IcebergConfig.from_properties({}, f"{tmp_path}/wh")
    run = IcebergRun.begin(config, ["a", "b"])
    files, offsets = read_and_write(run, {"a": 30, "b": 20}, "r1")
    seen: list[tuple[int, int]] = []

    def between() -> None:
        catalog = config.open_catalog()
        errors = sum(len(catalog.load_table(f"sluice.{t}_errors").metadata.snapshots) for t in "ab")
        data = sum(len(catalog.load_table(f"sluice.{t}").metadata.snapshots) for t in "ab")
        seen.append((errors, data))

    run.commit(files, offsets, "r1", between=between)
    assert seen == [(2, 0)]
