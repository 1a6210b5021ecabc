"""bench.bench_load without Spark: the rows a run's figures become, the profile's parsing, and
the cluster run left out (with a note) where no cluster can start."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import bench_load
from bench.bench_load import CLUSTER, PROFILE, record, record_iceberg, top_lines
from bench.results import Results

FIGURES = {
    "rows": 1_000_000,
    "phases": {"plan": 0.5, "read+write": 4.0, "verify": 0.25, "commit": 0.25},
    "tasks": 3.5,
    "load_bytes": 204_000_000,
    "baseline_seconds": 10.0,
    "baseline_bytes": 214_000_000,
    "profile": [["read_split (split_reader.py:309)", 18.6], ["write_table (core.py:1225)", 7.9]],
    "profile_failure": None,
}


def rows_of(results: Results) -> dict[tuple[str, str], tuple[float, str]]:
    return {(r.system, r.metric): (r.value, r.unit) for r in results.items}


def test_local_figures_keep_the_ratio_row_earlier_runs_compare_with() -> None:
    results = Results()
    record(results, 1_000_000, FIGURES)
    got = rows_of(results)
    assert got["sluice/in-memory", "rows/s"] == (2.0, "ratio")  # 10 s / 5 s
    assert got["sluice", "1,000,000 rows over 8 partitions"] == (200_000.0, "rows/s")
    assert got["spark in-memory write", "1,000,000 rows"] == (100_000.0, "rows/s")
    assert got["sluice", "phase read+write"] == (4.0, "s")
    assert got["sluice", "parquet bytes"] == (204_000_000, "B")
    assert got["spark in-memory write", "parquet bytes"] == (214_000_000, "B")
    assert got[PROFILE, "read_split (split_reader.py:309)"] == (18.6, "%")
    assert {r.experiment for r in results.items} == {"nightly_load"}


def test_cluster_rows_are_the_local_systems_with_the_cluster_suffix() -> None:
    results = Results()
    record(results, 1_000_000, {**FIGURES, "profile": [], "profile_failure": "no profile: x"},
           CLUSTER)  # fmt: skip
    systems = {r.system for r in results.items}
    assert systems == {f"sluice{CLUSTER}", f"spark in-memory write{CLUSTER}",
                       f"sluice/in-memory{CLUSTER}"}  # fmt: skip
    assert results.notes["nightly_load"] == [f"no profile: x{CLUSTER}"]


def test_top_lines_rank_the_spark_workers_own_samples() -> None:
    raw = "\n".join([
        'process 1:"python -m bench.run";wait (threading.py:320) 50',  # the driver: left out
        'process 1:"bench";process 7:"pyspark.daemon";main (daemon.py:1);read (r.py:9) 30',
        'process 1:"bench";process 8:"pyspark.daemon";main (daemon.py:1);read (r.py:9) 30',
        'process 1:"bench";process 8:"pyspark.daemon";main (daemon.py:1);write (w.py:2) 40',
        'process 1:"bench";process 8:"pyspark.daemon" 5',  # no Python frame
        "garbage",
    ])  # fmt: skip
    assert top_lines(raw) == [("read (r.py:9)", 60.0), ("write (w.py:2)", 40.0)]
    assert top_lines(raw, 1) == [("read (r.py:9)", 60.0)]
    assert top_lines("") == []


def test_the_cluster_run_is_a_note_where_no_cluster_can_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sluice.testing.spark_cluster as spark_cluster

    monkeypatch.setattr(spark_cluster, "spark_cluster_missing", lambda: "no java here")
    results = Results()
    bench_load.run_cluster(results, "127.0.0.1:9092", 10, tmp_path)
    assert results.items == []
    assert results.notes["nightly_load"] == ["no standalone cluster run: no java here"]


def test_iceberg_rows_time_both_loads_by_their_phases_and_give_the_two_ratios() -> None:
    results = Results()
    record_iceberg(results, 1_000_000, {
        "baseline_seconds": 10.0,
        "iceberg_phases": {"plan": 0.5, "read+write": 4.0, "verify": 0.1, "commit": 0.4},
        "parquet_phases": {"plan": 0.5, "read+write": 3.5, "verify": 0.0, "commit": 0.0},
        "iceberg_bytes": 200_000_000,
    })  # fmt: skip
    got = rows_of(results)
    assert got["sluice iceberg", "1,000,000 rows over 8 partitions"] == (200_000.0, "rows/s")
    assert got["sluice parquet (paired)", "1,000,000 rows over 8 partitions"] == (
        250_000.0, "rows/s")  # fmt: skip
    assert got["sluice iceberg", "phase commit"] == (0.4, "s")
    assert got["sluice iceberg", "parquet bytes"] == (200_000_000, "B")
    assert got["sluice iceberg/parquet", "rows/s"] == (0.8, "ratio")  # 4 s / 5 s
    assert got["sluice iceberg/in-memory", "rows/s"] == (2.0, "ratio")  # 10 s / 5 s
    assert {r.experiment for r in results.items} == {"nightly_load"}


def test_the_mkdir_probe_times_new_directories_and_leaves_none(tmp_path: Path) -> None:
    took = bench_load._mkdir_ms(tmp_path / "probe", count=20)
    assert 0 < took < 1000, f"expected a time per mkdir in ms, found {took}"
    assert not (tmp_path / "probe").exists()


def test_the_mkdir_probe_before_the_pairs_leaves_its_directories(tmp_path: Path) -> None:
    """Deleting them would slow the loads that follow (an unjournaled ext4 skips recently
    deleted inodes one by one); the bench's work directory goes at its end."""
    bench_load._mkdir_ms(tmp_path / "probe", count=20, remove=False)
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
        named, unnamed = bench_load.cpu_seconds(child.pid), bench_load.cpu_seconds(None)
        busy = time.process_time() + 0.3
        while time.process_time() < busy:
            pass
        assert child.stdout is not None and child.stdout.readline() == b"done\n"
        named_after, unnamed_after = bench_load.cpu_seconds(child.pid), bench_load.cpu_seconds(None)
        child.communicate(timeout=10)  # closes its stdin: it ends
    assert set(named_after) == set(bench_load.CPU_KINDS)
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
    waited, took = bench_load._settle_disk(tmp_path / "settle", limit_s=0.0, pause_s=1.0)
    assert 0 <= waited < 5 and 0 < took < 1000
    assert len(list((tmp_path / "settle").glob("attempt-0/topic=*/date=*"))) == 25
