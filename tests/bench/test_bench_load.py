"""bench.bench_load without Spark: the rows a run's figures become, the profile's parsing, and
the cluster run left out (with a note) where no cluster can start."""

from __future__ import annotations

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
