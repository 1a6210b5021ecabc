"""bench.bench_load_shapes without Spark: its probes of the disk and of processes' CPU, and the
rows the cron measurement's figures become."""

from __future__ import annotations

import time
from pathlib import Path

from bench import bench_load_shapes
from bench.bench_load_shapes import SHAPES, record_cron
from bench.results import Results


def cron_figures(narrow: list[float], wide: list[float]) -> dict:
    """Figures as ``run_shapes_cron`` returns them: each command ``seconds`` s, its read+write
    half of that, its plan a tenth, as many files as whole seconds."""

    def runs(seconds: list[float]) -> list[dict]:
        return [
            {"seconds": s, "phases": {"plan": s / 10, "read+write": s / 2}, "files": int(s)}
            for s in seconds
        ]

    return {
        "runs": {"narrow": runs(narrow), "wide": runs(wide)},
        "warm_up": {"narrow": 9.0, "wide": 9.5},
        "load_average": "1.00, 1.00, 1.00",
    }


def test_cron_rows_give_each_shapes_commands_and_the_pairs_ratios() -> None:
    results = Results()
    record_cron(results, cron_figures([8.0, 10.0, 9.0], [8.8, 10.0, 13.5]))
    got = {(r.system, r.metric): r for r in results.items}
    assert {r.experiment for r in results.items} == {"nightly_load_shapes_cron"}
    narrow = got["sluice narrow, one command a load", "80,000 rows: sluice load"]
    assert (narrow.value, narrow.unit) == (9.0, "s")  # the median of the three commands
    wide_rw = got["sluice wide, one command a load", "phase read+write"]
    assert (wide_rw.value, wide_rw.unit) == (5.0, "s")
    ratio = got["sluice wide/narrow, one command a load", "80,000 rows: sluice load"]
    # The median of the pairs' ratios (1.1, 1.0, 1.5), not the ratio of the medians (10 / 9).
    assert ratio.unit == "ratio" and abs(ratio.value - 1.1) < 1e-9
    assert got["sluice wide, one command a load", "first command (unmeasured warm-up)"].value == 9.5
    assert got["sluice wide, one command a load", "parquet files (the last command's)"].value == 13
    assert len(SHAPES["wide"]) == 200 and sum(n for _, n in SHAPES["wide"]) == 800
    [note] = results.notes["nightly_load_shapes_cron"]
    assert "1.10; 1.10" in note and "1.50; 1.50" in note


def test_the_mkdir_probe_times_new_directories_and_leaves_none(tmp_path: Path) -> None:
    took = bench_load_shapes._mkdir_ms(tmp_path / "probe", count=20)
    assert 0 < took < 1000, f"expected a time per mkdir in ms, found {took}"
    assert not (tmp_path / "probe").exists()


def test_the_mkdir_probe_before_the_pairs_leaves_its_directories(tmp_path: Path) -> None:
    """Deleting them would slow the loads that follow (an unjournaled ext4 skips recently
    deleted inodes one by one); the bench's work directory goes at its end."""
    bench_load_shapes._mkdir_ms(tmp_path / "probe", count=20, remove=False)
    assert len(list((tmp_path / "probe").glob("topic=*/date=*"))) == 10


def test_cpu_seconds_count_the_driver_and_the_broker_process_apart() -> None:
    import subprocess
    import sys

    # A child that burns 0.3 s of CPU, says so, then waits: it stands in for the broker. The
    # test process may have other children (a suite's shared services), so only differences
    # between two readings taken together are compared.
    burn = (
        "import sys, time\nend = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\nprint('done', flush=True)\nsys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as child:
        named, unnamed = (
            bench_load_shapes.cpu_seconds(child.pid),
            bench_load_shapes.cpu_seconds(None),
        )
        busy = time.process_time() + 0.3
        while time.process_time() < busy:
            pass
        assert child.stdout is not None and child.stdout.readline() == b"done\n"
        named_after, unnamed_after = (
            bench_load_shapes.cpu_seconds(child.pid),
            bench_load_shapes.cpu_seconds(None),
        )
        child.communicate(timeout=10)  # closes its stdin: it ends
    assert set(named_after) == set(bench_load_shapes.CPU_KINDS)
    assert named_after["driver"] - named["driver"] >= 0.25, (named, named_after)
    assert named_after["broker"] - named["broker"] >= 0.2, (named, named_after)
    assert unnamed_after["broker"] == unnamed["broker"] == 0.0
    # Not named as the broker, the child is one of this process's other descendants: counted
    # as PySpark's workers; named, it is not.
    workers = "spark Python workers"
    as_workers = unnamed_after[workers] - unnamed[workers]
    assert as_workers - (named_after[workers] - named[workers]) >= 0.2, (as_workers, named_after)


def test_settling_the_disk_stops_at_its_limit_and_says_what_it_found(tmp_path: Path) -> None:
    """A limit shorter than one pause: one probe, its figure returned, nothing deleted."""
    waited, took = bench_load_shapes._settle_disk(tmp_path / "settle", limit_s=0.0, pause_s=1.0)
    assert 0 <= waited < 5 and 0 < took < 1000
    assert len(list((tmp_path / "settle").glob("attempt-0/topic=*/date=*"))) == 25


def test_the_pairs_alternate_which_shape_goes_first() -> None:
    assert list(bench_load_shapes._alternating(3)) == [
        (0, "narrow"), (0, "wide"), (1, "wide"), (1, "narrow"), (2, "narrow"), (2, "wide"),
    ]  # fmt: skip
