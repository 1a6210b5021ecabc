"""bench.bench_cleaner: a tiny run on a real log, and its section of the README report."""

from __future__ import annotations

from pathlib import Path

from bench import bench_cleaner
from bench.report import context, render
from bench.results import Results

MACHINE = {"command": "python -m bench.run --quick --only cleaner", "mode": "quick",
           "date": "2026-11-24T10:00:00+00:00", "cpus": 2}  # fmt: skip


def test_one_pass_keeps_one_record_per_key_and_reads_both_logs(tmp_path: Path) -> None:
    records = bench_cleaner.write_log(tmp_path / "pristine", 300_000, keys=500)
    assert records >= 300_000 // (bench_cleaner.VALUE + 20)
    result = bench_cleaner.one_pass(tmp_path / "pristine", tmp_path)
    assert result["kept"] <= 500 and result["kept"] >= 490  # every key drawn, or nearly
    assert result["after_mb"] < result["before_mb"] / 4
    assert result["before_mb"] >= 0.3 and result["clean_mb_s"] > 0
    assert result["before_s"] > 0 and result["after_s"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["pristine"]  # the copy is gone


def test_a_tiny_run_writes_the_rows_and_removes_its_directory(tmp_path: Path) -> None:
    results = Results()
    bench_cleaner.run(results, True, size=2_000_000, work_parent=tmp_path)
    assert list(tmp_path.iterdir()) == []
    found = {(r.system, r.metric): r for r in results.items}
    assert {r.experiment for r in results.items} == {"log_cleaner"}
    assert len(found[("cleaner", "compaction, MB/s")].runs) == bench_cleaner.REPEATS
    assert found[("compacted", "size, MB")].value < found[("uncompacted", "size, MB")].value
    assert found[("compacted", "records kept")].value <= bench_cleaner.KEYS
    assert found[("uncompacted/compacted", "read the whole topic")].unit == "ratio"
    assert "random keys" in results.notes["log_cleaner"][0]

    text = render(context(results.items, {**MACHINE, "experiments": {"log_cleaner": MACHINE}}))
    assert "**Log compaction**" in text and "100 MB" in text  # the quick mode's size
    assert "compaction, MB/s" in text and "read from the start, MB/s" in text
    assert "uncompacted/compacted (read the whole topic)" in text  # the ratio, quoted
