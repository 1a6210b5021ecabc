"""The executors' side through Spark itself: the run's writers, pickled to the Python workers,
write each split's Iceberg files there; their reports come back through ``collect()`` and the
driver commits exactly those."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_data_file import WrittenFile
from sluice.pipeline.table.iceberg_run import IcebergRun, TopicWriters
from tests.pipeline.table.iceberg_rows import typed_rows


def test_spark_tasks_write_and_the_driver_commits(spark: Any, tmp_path: Path) -> None:
    config = IcebergConfig.from_properties(
        {"iceberg.tables.default-partition-by": "day(event_time)"}, (tmp_path / "wh").as_uri()
    )
    run = IcebergRun.begin(config, ["views"])
    writers = run.writers(typed_rows("views", 1, 0, 1).schema)
    splits = [(p, start, start + 2500) for p in range(2) for start in range(0, 10_000, 2500)]

    def task(rows: Iterator[tuple[int, int, int]]) -> Iterator[WrittenFile]:
        for partition, start, end in rows:  # what a split writer fetches: here, made up
            n = end - start
            base = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
            batch = pa.table(
                {
                    "event_time": pa.array(
                        [base + dt.timedelta(seconds=(start + i) * 25) for i in range(n)],
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "user_id": pa.array([i % 7 for i in range(n)], pa.int32()),
                    "topic": pa.array(["views"] * n),
                    "partition": pa.array([partition] * n, pa.int32()),
                    "offset": pa.array(range(start, end), pa.int64()),
                }
            )
            shipped: TopicWriters = writers["views"]
            appender = shipped.data.open(f"run-views-{partition}-{start}-{end}")
            for chunk in batch.to_batches(max_chunksize=1000):
                appender.add(chunk)
            yield from appender.close()

    reported: list[WrittenFile] = (
        spark.sparkContext.parallelize(splits, len(splits)).mapPartitions(task).collect()
    )
    assert sum(f.rows for f in reported) == 20_000
    run.commit(reported, {"views": {0: 10_000, 1: 10_000}}, "spark-run")
    table = config.open_catalog().load_table("sluice.views")
    read = table.scan().to_arrow()
    pairs = Counter(zip(read["partition"].to_pylist(), read["offset"].to_pylist(), strict=True))
    assert set(pairs) == {(p, o) for p in range(2) for o in range(10_000)}
    assert set(pairs.values()) == {1}
    assert read["page"].null_count == read.num_rows  # a column the rows lacked: null
    days = {task.file.partition[0] for task in table.scan().plan_files()}
    assert len(days) == 3  # 250,000 s of event time: three UTC days
