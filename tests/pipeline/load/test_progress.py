"""Tests for sluice.pipeline.load.progress: the figures, and a live watch of a real Spark job
group (local mode)."""

from __future__ import annotations

import io
import time
from typing import Any

from sluice.pipeline.load.progress import LoadProgress, ProgressFigures


def test_figures_give_rate_eta_and_a_line() -> None:
    figures = ProgressFigures(3, 12, 3_000, 12_000, 6.0)
    assert figures.rows_per_second == 500
    assert figures.eta_seconds == 18.0
    assert figures.line() == (
        "read+write: 3/12 splits, ~3,000 of 12,000 offsets, 500 rows/s, ETA 0:00:18, "
        "0:00:06 elapsed"
    )
    assert ProgressFigures(0, 12, 0, 12_000, 6.0).eta_seconds is None
    assert figures.to_json()["splits_total"] == 12


def test_it_follows_the_tasks_of_a_job_group(spark: Any) -> None:
    lines: list[str] = []
    live = io.StringIO()
    watch = LoadProgress(
        spark, "sluice-progress-test", splits=4, offsets=400, say=lines.append, interval=0.2
    )
    shown = LoadProgress(
        spark, "sluice-progress-test", splits=4, offsets=400, say=lines.append, live=True,
        stream=live,
    )  # fmt: skip
    context = spark.sparkContext
    context.setJobGroup("sluice-progress-test", "test")
    watch.start()
    shown.start()
    try:
        context.parallelize(range(4), 4).map(lambda x: time.sleep(0.7) or x).collect()
        time.sleep(1.2)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    figures = watch.stop(finished=True)
    shown.stop(finished=True)
    assert figures.splits_done == 4 and figures.offsets_done == 400
    assert lines and all(line.startswith("read+write: ") for line in lines)
    assert any("4/4 splits" in line for line in lines)
    assert "\r" in live.getvalue() and "splits" in live.getvalue()
