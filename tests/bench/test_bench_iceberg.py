"""bench.bench_iceberg: a tiny run through IcebergRun and compact, and its section of the report."""

from __future__ import annotations

from pathlib import Path

from bench import bench_iceberg
from bench.report import context, render
from bench.results import Results
from sluice.pipeline.table.iceberg_catalog import IcebergConfig

MACHINE = {"command": "python -m bench.run --quick --only iceberg", "mode": "quick",
           "date": "2026-11-28T06:00:00+00:00", "cpus": 2}  # fmt: skip


def test_a_compaction_pass_leaves_one_file_per_day_and_every_row(tmp_path: Path) -> None:
    result = bench_iceberg.compaction_pass(tmp_path / "w", loads=2, splits=3, per_split=90)
    assert result["files_before"] == 2 * 3 * bench_iceberg.DAYS
    assert result["files_after"] == result["files_total_after"] == bench_iceberg.DAYS
    assert result["rows"] == 2 * 3 * 90
    assert result["mb"] > 0 and result["seconds"] > 0
    config = IcebergConfig.from_properties(bench_iceberg.PROPS, str(tmp_path / "w"))
    table = config.open_catalog().load_table(bench_iceberg.IDENTIFIER)
    offsets = sorted(table.scan().to_arrow()["offset"].to_pylist())
    assert offsets == list(range(2 * 3 * 90))  # every offset once after the rewrite
    summary = table.current_snapshot().summary
    assert summary["sluice.compaction"] == "true" and summary["sluice.offsets"]


def test_commit_runs_commit_n_files_each_time(tmp_path: Path) -> None:
    seconds = bench_iceberg.commit_runs(tmp_path / "w", files=4, repeats=2)
    assert len(seconds) == 2 and all(s > 0 for s in seconds)
    config = IcebergConfig.from_properties(bench_iceberg.PROPS, str(tmp_path / "w"))
    table = config.open_catalog().load_table(bench_iceberg.IDENTIFIER)
    assert len(table.metadata.snapshots) == 2
    assert len(list(table.scan().plan_files())) == 8
    assert table.scan().to_arrow().num_rows == 8 * bench_iceberg.COMMIT_ROWS


def test_a_tiny_run_writes_the_rows_and_removes_its_directory(tmp_path: Path) -> None:
    results = Results()
    bench_iceberg.run(results, True, loads=2, splits=2, per_split=60, commit_files=(1, 3),
                      work_parent=tmp_path)  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    found = {(r.experiment, r.system, r.metric): r for r in results.items}
    rate = found[("iceberg_compaction", "compact", "rewritten, MB/s")]
    assert len(rate.runs) == bench_iceberg.REPEATS and rate.unit == "MB/s"
    assert found[("iceberg_compaction", "before", "data files")].value == 12
    assert found[("iceberg_compaction", "after", "data files")].value == 3
    assert len(found[("iceberg_commit", "3 files", "one commit, ms")].runs) == 3
    assert ("iceberg_commit", "1 file", "per file, ms") in found
    assert "12 files into 3" in results.notes["iceberg_compaction"][0]

    experiments = {"iceberg_compaction": MACHINE, "iceberg_commit": MACHINE}
    text = render(context(results.items, {**MACHINE, "experiments": experiments}))
    assert "**Iceberg tables**" in text and "24 splits" in text  # the quick mode's size
    assert "rewritten, MB/s" in text and "one commit, ms" in text and "3 files" in text
