"""How the load packs its splits into Spark tasks (``run._pack``): about ``rowsPerTask``
offsets per task, every core given work, ``maxRecordsPerPartition`` and ``minPartitions``
honoured, every split in exactly one task."""

from __future__ import annotations

from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.run import _pack
from sluice.pipeline.source.ranges import OffsetRange

BASE = {"kafka.bootstrap.servers": "h:1", "topics": "t", "warehouse.path": "/tmp/w"}


def _config(**extra: str) -> LoadConfig:
    return LoadConfig.from_properties({**BASE, **extra})


def _flat(tasks: list[list[OffsetRange]]) -> list[OffsetRange]:
    return [s for t in tasks for s in t]


def test_the_wide_shape_packs_into_one_task_per_core() -> None:
    wide = [OffsetRange(f"t{i:03d}", p, 0, 100) for i in range(200) for p in range(4)]
    tasks = _pack(_config(), wide, parallelism=2)
    assert [sum(s.count for s in t) for t in tasks] == [40_000, 40_000]
    assert _flat(tasks) == wide


def test_rows_per_task_and_max_records_cap_a_task() -> None:
    splits = [OffsetRange("t", p, 0, 1000) for p in range(10)]
    assert len(_pack(_config(rowsPerTask="3000"), splits, parallelism=1)) == 4
    capped = _pack(_config(maxRecordsPerPartition="1000"), splits, parallelism=1)
    assert capped == [[s] for s in splits]


def test_min_partitions_is_still_a_lower_bound_on_tasks() -> None:
    splits = [OffsetRange("t", p, 0, 1 + p) for p in range(5)]  # 15 offsets
    tasks = _pack(_config(minPartitions="4"), splits, parallelism=1)
    assert len(tasks) >= 4 and _flat(tasks) == splits
