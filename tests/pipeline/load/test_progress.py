"""Tests for sluice.pipeline.load.progress: the figures, and a live watch of a real Spark job
group (local mode)."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest

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


def _root_level(spark: Any) -> str:
    jvm = spark.sparkContext._jvm
    return str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())


def test_a_stall_cancels_the_group_quietly_and_gives_the_log_level_back(spark: Any) -> None:
    """No task finishes within the deadline: the group is cancelled with Spark's log off
    (its complaints about the killed tasks are noise after the load's reason), the collect
    fails, and once the tasks are gone the log level is what it was."""
    context = spark.sparkContext
    before = _root_level(spark)
    context.setLogLevel("WARN")
    seen: list[str] = []
    watch = LoadProgress(spark, "sluice-stall-test", splits=2, offsets=2, say=lambda _l: None,
                         interval=0.1)  # fmt: skip

    def on_stall(waiting: list[int]) -> str:
        seen.append(_root_level(spark))
        return f"stuck: {waiting}"

    watch.configure_stall(0.5, on_stall)
    context.setJobGroup("sluice-stall-test", "test")
    watch.start()
    try:
        with pytest.raises(Exception, match="cancel"):
            context.parallelize(range(2), 2).map(lambda x: time.sleep(30) or x).collect()
        assert watch.stalled is not None and watch.stalled.startswith("stuck: ")
        assert _root_level(spark) == "OFF"
        began = time.monotonic()
        watch.await_cancelled()
        assert time.monotonic() - began < 10
        assert _root_level(spark) == "WARN"
        assert seen == ["WARN"]
        tracker = context.statusTracker()
        assert not any(
            (stage := tracker.getStageInfo(s)) is not None and stage.numActiveTasks
            for j in tracker.getJobIdsForGroup("sluice-stall-test")
            for s in (tracker.getJobInfo(j).stageIds if tracker.getJobInfo(j) else ())
        )
    finally:
        watch.stop(finished=False)
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLogLevel(before)
