"""Tests for sluice.pipeline.load.split_writer: one split's task, its files and its result.

The split reader is replaced by a model (``conftest.fake_reader``) that yields the batches a
split would (the reader has its own tests against a real broker; the load's tests run the two
together): what is checked here is the writer's side — the table layout, the UTC date of every
row, the columns, row groups, a retried task replacing its own files, and the result the driver
verifies.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sluice.common.gc_pause import CollectionPause
from sluice.pipeline.load import split_writer
from sluice.pipeline.load.split_writer import (
    PARTITION_ROWS_KEY,
    TEMPORARY_SUFFIX,
    SplitWriter,
    file_name,
    rows_by_partition,
)
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult
from tests.pipeline.load.conftest import model_batch

DAY_US = 86_400_000_000


def test_one_file_per_date_in_the_table_layout(
    fake_reader: dict[OffsetRange, list[int]], tmp_path: Path
) -> None:
    split = OffsetRange("page_views", 3, 100, 150)
    # Rows across three UTC dates, interleaved; -1 ms ("no timestamp") is 1969-12-31 as in Spark.
    fake_reader[split] = [
        [-1000, 10 * DAY_US + 5, 11 * DAY_US - 1][i % 3] for i in range(split.count)
    ]
    writer = SplitWriter(f"file://{tmp_path}", {}, row_group_rows=16)

    outcome = writer.write(split)

    assert (outcome.rows, outcome.errors, outcome.written) == (50, 0, 50)
    paths = sorted(p for p, _, _ in outcome.files)
    name = file_name(split)
    assert name == "part-page_views-3-100-150.parquet"
    assert paths == [
        f"topic=page_views/date=1969-12-31/{name}",
        f"topic=page_views/date=1970-01-11/{name}",
    ]
    for path, size, rows in outcome.files:
        assert (tmp_path / path).stat().st_size == size
        parquet = pq.ParquetFile(tmp_path / path)
        assert parquet.metadata.num_rows == rows
        assert "topic" not in parquet.schema_arrow.names  # the path holds it, as in Spark
        assert all(
            parquet.metadata.row_group(g).num_rows <= 16 + 6
            for g in range(parquet.metadata.num_row_groups)
        )
    assert not list(tmp_path.rglob(f"*{TEMPORARY_SUFFIX}"))
    read = duckdb.sql(
        'SELECT topic, partition, "offset", CAST(date AS VARCHAR) FROM read_parquet('
        f"'{tmp_path}/topic=*/date=*/*.parquet', hive_partitioning = true) ORDER BY 3"
    ).fetchall()
    expected_dates = ["1969-12-31", "1970-01-11", "1970-01-11"]
    assert read == [("page_views", 3, o, expected_dates[(o - 100) % 3]) for o in range(100, 150)]


def test_a_retried_task_replaces_its_own_files(
    fake_reader: dict[OffsetRange, list[int]], tmp_path: Path
) -> None:
    split = OffsetRange("t", 0, 0, 20)
    fake_reader[split] = [5 * DAY_US] * 20
    writer = SplitWriter(f"file://{tmp_path}", {})
    first = writer.write(split)
    again = writer.write(split)
    assert [p for p, _, _ in first.files] == [p for p, _, _ in again.files]
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        first.files[0][0]
    ]
    assert pq.read_table(tmp_path / first.files[0][0]).num_rows == 20


def test_a_failing_split_leaves_no_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    split = OffsetRange("t", 0, 0, 20)

    def read_split(_split: OffsetRange, _config: Any, **_kwargs: Any) -> Iterator[pa.RecordBatch]:
        yield model_batch(split, range(0, 7), [0] * 7)
        raise RuntimeError("broker went away")

    monkeypatch.setattr(split_writer, "read_split", read_split)
    with pytest.raises(RuntimeError, match="broker went away"):
        SplitWriter(f"file://{tmp_path}", {}, row_group_rows=4).write(split)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_the_task_and_its_results_travel_through_spark(
    fake_reader: dict[OffsetRange, list[int]], tmp_path: Path
) -> None:
    splits = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 0, 10, 25), OffsetRange("t", 1, 0, 3)]
    for s in splits:
        fake_reader[s] = [0] * s.count
    writer = SplitWriter(f"file://{tmp_path}", {"bootstrap.servers": "b:9092"})
    assert pickle.loads(pickle.dumps(writer)) == writer
    outcomes = [pickle.loads(pickle.dumps(o)) for o in writer(iter(splits))]
    assert all(isinstance(o, SplitResult) for o in outcomes)
    assert rows_by_partition(outcomes) == {("t", 0): 25, ("t", 1): 3}
    # One object from the reader's figures to the driver's, read by attribute.
    second = outcomes[1]
    assert second.split == splits[1]
    assert (second.rows, second.errors, second.written, second.lost) == (15, 0, 15, 0)
    assert second.bytes == sum(len(f"v{o}") for o in range(10, 25))
    assert second.schema_ids == [] and second.seconds > 0
    assert [p for p, _, _ in second.files] == [f"topic=t/date=1970-01-01/{file_name(splits[1])}"]


def test_a_packed_task_writes_one_file_per_topic_and_date(
    fake_reader: dict[OffsetRange, list[int]], tmp_path: Path
) -> None:
    """Eight small splits of two topics in one task: two files (one per topic; one date),
    eight results, each naming the file its rows went to; the files hold every row once."""
    splits = [OffsetRange(t, p, 0, 20) for t in ("a", "b") for p in range(4)]
    for split in splits:
        fake_reader[split] = [5 * DAY_US] * split.count
    writer = SplitWriter(f"file://{tmp_path}", {})

    outcomes = list(writer([splits]))  # what mapPartitions hands it: one packed task

    assert [o.split for o in outcomes] == splits
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet"))
    assert files == [
        "topic=a/date=1970-01-06/part-a-0-0-20.parquet",
        "topic=b/date=1970-01-06/part-b-0-0-20.parquet",
    ]
    for o in outcomes:
        assert o.written == 20
        [(path, size, rows)] = o.files
        assert path.startswith(f"topic={o.split.topic}/") and rows == 80
        assert (tmp_path / path).stat().st_size == size
    rows = duckdb.sql(
        f"SELECT partition, count(*) FROM read_parquet('{tmp_path}/topic=a/*/*.parquet') "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert rows == [(0, 20), (1, 20), (2, 20), (3, 20)]
    assert rows_by_partition(outcomes)[("b", 3)] == 20


def test_a_packed_task_s_splits_name_only_the_files_their_rows_went_to(
    fake_reader: dict[OffsetRange, list[int]], tmp_path: Path
) -> None:
    """Batches of one topic are routed together when they share a date, one by one when they
    do not: a split whose rows are all of one date names that date's file only."""
    splits = [OffsetRange("a", 0, 0, 20), OffsetRange("a", 1, 0, 20), OffsetRange("a", 2, 0, 9)]
    fake_reader[splits[0]] = [5 * DAY_US] * 20
    fake_reader[splits[1]] = [5 * DAY_US] * 10 + [6 * DAY_US] * 10
    fake_reader[splits[2]] = [6 * DAY_US] * 9
    writer = SplitWriter(f"file://{tmp_path}", {})

    outcomes = list(writer([splits]))

    day5 = "topic=a/date=1970-01-06/part-a-0-0-20.parquet"
    day6 = "topic=a/date=1970-01-07/part-a-0-0-20.parquet"
    assert [[p for p, _, _ in o.files] for o in outcomes] == [[day5], [day5, day6], [day6]]
    assert [[rows for _, _, rows in o.files] for o in outcomes] == [[30], [30, 19], [19]]
    footers = {
        p: pq.ParquetFile(tmp_path / p).metadata.metadata[PARTITION_ROWS_KEY.encode()]
        for p in (day5, day6)
    }
    assert footers == {day5: b'{"0":20,"1":10}', day6: b'{"1":10,"2":9}'}


def test_a_task_runs_without_cyclic_collections(
    fake_reader: dict[OffsetRange, list[int]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The collector is off while a task reads and writes (its messages and open files are
    not garbage) and on again after it."""
    splits = [OffsetRange(t, p, 0, 50) for t in ("a", "b", "c") for p in range(4)]
    for split in splits:
        fake_reader[split] = [5 * DAY_US] * split.count
    collecting: list[bool] = []  # gc.isenabled() as each batch is handed to the writer
    read = split_writer.read_splits

    def watched(*args: Any, **kwargs: Any) -> Iterator[tuple[int, pa.RecordBatch]]:
        for item in read(*args, **kwargs):
            collecting.append(gc.isenabled())
            yield item

    monkeypatch.setattr(split_writer, "read_splits", watched)
    assert gc.isenabled()

    outcomes = SplitWriter(f"file://{tmp_path}", {}).write_task(splits)

    assert sum(o.written for o in outcomes) == 600
    assert collecting and not any(collecting)
    assert gc.isenabled()


def test_a_task_collects_between_batches_once_its_new_objects_pass_the_limit(
    fake_reader: dict[OffsetRange, list[int]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A long task's cycles stay bounded: with a limit of 0 new objects, the pause collects
    after every batch the writer handles (the fake reader's: 7 rows each)."""
    splits = [OffsetRange("a", p, 0, 21) for p in range(4)]
    for split in splits:
        fake_reader[split] = [5 * DAY_US] * split.count
    made: list[CollectionPause] = []

    def paused() -> CollectionPause:
        made.append(CollectionPause(limit=0))
        return made[-1]

    monkeypatch.setattr(split_writer, "collection_paused", paused)

    outcomes = SplitWriter(f"file://{tmp_path}", {}).write_task(splits)

    assert sum(o.written for o in outcomes) == 84
    assert [p.collections for p in made] == [12]  # 4 splits x 3 batches
