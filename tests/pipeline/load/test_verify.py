"""Tests for sluice.pipeline.load.verify: the task results against the driver's own listing.

Files are written by the real ``SplitWriter`` (its reader replaced by the model of
``conftest.fake_reader``) into a real staging directory; the results are what Spark's
``collect()`` would hand the driver.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sluice.pipeline.load.errors import LoadError, StrandedFilesError
from sluice.pipeline.load.report import LoadReport, PartitionReport
from sluice.pipeline.load.split_writer import PARTITION_ROWS_KEY, SplitWriter
from sluice.pipeline.load.verify import account, scan_staged
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import SplitResult
from sluice.pipeline.table.commit import StagedRun, TableWriter

PLAN = [OffsetRange("t", 0, 0, 30), OffsetRange("t", 1, 5, 12)]
SPLITS = [OffsetRange("t", 0, 0, 15), OffsetRange("t", 0, 15, 30), PLAN[1]]


@pytest.fixture
def staged(tmp_path: Path) -> StagedRun:
    return TableWriter(f"file://{tmp_path}/warehouse/events").begin("run-1", None)


def _write(staged: StagedRun, stamps: dict[OffsetRange, list[int]]) -> list[SplitResult]:
    for split in SPLITS:
        stamps[split] = [0] * split.count
    writer = SplitWriter(staged.uri, {})
    return list(writer(iter(SPLITS)))


def _report() -> LoadReport:
    report = LoadReport(run_id="run-1", table="t")
    report.partitions = [PartitionReport(r) for r in PLAN]
    return report


def test_results_that_tile_the_plan_and_files_the_driver_sees_pass(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _write(staged, fake_reader)
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    report = _report()
    account(report, PLAN, outcomes, scan, staged.uri)
    assert [(p.range.partition, p.rows) for p in report.partitions] == [(0, 30), (1, 7)]
    assert sum(c.rows for c in report.dates) == 37 and scan.removed == []


def test_leftovers_of_failed_attempts_are_removed_before_counting(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _write(staged, fake_reader)
    directory = Path(staged.path) / "topic=t" / "date=1970-01-01"
    stale = directory / "part-t-0-0-15.parquet"
    # A failed attempt's file of another date, and a killed attempt's temporary file.
    other = Path(staged.path) / "topic=t" / "date=1970-01-02"
    other.mkdir(parents=True)
    pq.write_table(pq.read_table(stale), other / "part-t-0-0-15.parquet")
    (directory / ".part-t-0-0-15.parquet.0123456789ab.tmp").write_bytes(b"torn")
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    assert sorted(scan.removed) == [
        "topic=t/date=1970-01-01/.part-t-0-0-15.parquet.0123456789ab.tmp",
        "topic=t/date=1970-01-02/part-t-0-0-15.parquet",
    ]
    account(_report(), PLAN, outcomes, scan, staged.uri)
    assert not other.joinpath("part-t-0-0-15.parquet").exists()


def test_a_file_the_driver_cannot_see_strands_its_range(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _write(staged, fake_reader)
    gone = Path(staged.path) / outcomes[1].files[0][0]
    gone.unlink()  # as if written on a worker's own disk
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    with pytest.raises(StrandedFilesError) as info:
        account(_report(), PLAN, outcomes, scan, staged.uri)
    message = str(info.value)
    assert "1 of 2 planned ranges are not accounted for" in message
    assert "t-0 [0, 30): Spark's tasks wrote 30 rows, the driver finds 15" in message
    assert "1 files its tasks wrote are not there" in message
    assert "a path the driver cannot see" in message


def test_results_that_do_not_tile_the_plan_strand_it(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _write(staged, fake_reader)
    named = {p for o in outcomes for p, _, _ in o.files}
    scan = scan_staged(staged, named)
    with pytest.raises(StrandedFilesError, match=r"t-0 \[0, 30\): .*cover 15 of its 30"):
        account(_report(), PLAN, outcomes[1:], scan, staged.uri)


def test_a_file_of_another_size_is_not_accepted(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _write(staged, fake_reader)
    path = Path(staged.path) / outcomes[2].files[0][0]
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table]), path)  # a different file, more rows
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    with pytest.raises(LoadError, match=r"t-1 \[5, 12\): .*not there with their sizes"):
        account(_report(), PLAN, outcomes, scan, staged.uri)


def _packed(staged: StagedRun, stamps: dict[OffsetRange, list[int]]) -> list[SplitResult]:
    """The three splits as one packed task: one file holding partitions 0 and 1."""
    for split in SPLITS:
        stamps[split] = [0] * split.count
    return list(SplitWriter(staged.uri, {})([SPLITS]))


def _refooter(staged: StagedRun, outcomes: list[SplitResult], footer: str | None) -> None:
    """Write the packed file again with the same rows and ``footer`` as its partition-rows
    entry (none: a file of another writer), and name its new size in the results, as if the
    task had written it so."""
    [relative] = {p for o in outcomes for p, _, _ in o.files}
    path = Path(staged.path) / relative
    table = pq.read_table(path)
    writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table)
    if footer is not None:
        writer.add_key_value_metadata({PARTITION_ROWS_KEY: footer})
    writer.close()
    size = path.stat().st_size
    for o in outcomes:
        o.files = [(p, size, rows) for p, _, rows in o.files]


def test_a_packed_file_is_counted_from_its_footer(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _packed(staged, fake_reader)
    [relative] = {p for o in outcomes for p, _, _ in o.files}
    parquet = pq.ParquetFile(Path(staged.path) / relative)
    assert parquet.metadata.num_row_groups == 1  # both partitions in one row group
    assert parquet.metadata.metadata[PARTITION_ROWS_KEY.encode()] == b'{"0":30,"1":7}'
    scan = scan_staged(staged, {relative})
    assert scan.landed() == {("t", 0): 30, ("t", 1): 7}
    report = _report()
    account(report, PLAN, outcomes, scan, staged.uri)
    assert [(p.range.partition, p.rows) for p in report.partitions] == [(0, 30), (1, 7)]


def test_a_file_without_the_footer_entry_is_counted_from_its_column(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    outcomes = _packed(staged, fake_reader)
    _refooter(staged, outcomes, None)  # as an older table's file or another writer's
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    assert scan.landed() == {("t", 0): 30, ("t", 1): 7}
    account(_report(), PLAN, outcomes, scan, staged.uri)


def test_a_footer_that_disagrees_with_the_plan_is_refused(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
) -> None:
    """The footer is what the driver counts (the column holds 30 and 7 rows): one row moved
    from partition 1 to partition 0 leaves t-1 short of what its task wrote."""
    outcomes = _packed(staged, fake_reader)
    _refooter(staged, outcomes, '{"0":31,"1":6}')
    scan = scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})
    assert scan.landed() == {("t", 0): 31, ("t", 1): 6}
    with pytest.raises(LoadError, match=r"t-1 \[5, 12\): Spark's tasks wrote 7 rows, the driver"):
        account(_report(), PLAN, outcomes, scan, staged.uri)


@pytest.mark.parametrize(
    ("footer", "found"),
    [
        ('{"0":30,"1":8}', r"expected rows adding up to the file's 37, found 38"),
        ('{"0":30,"2":7}', r"expected partitions within the column's \[0, 1\], found \[0, 2\]"),
        ('{"0":30,"1":-7}', r"expected \{partition: rows\}, found b'\{\"0\":30,\"1\":-7\}'"),
        ("[30, 7]", r"expected \{partition: rows\}, found b'\[30, 7\]'"),
        ("not json", r"expected \{partition: rows\}, found b'not json'"),
    ],
)
def test_a_footer_inconsistent_with_its_file_is_refused(
    staged: StagedRun,
    fake_reader: dict[OffsetRange, list[int]],
    footer: str,
    found: str,
) -> None:
    outcomes = _packed(staged, fake_reader)
    _refooter(staged, outcomes, footer)
    with pytest.raises(
        LoadError, match=rf"topic=t/date=1970-01-01/.*{PARTITION_ROWS_KEY}: {found}"
    ):
        scan_staged(staged, {p for o in outcomes for p, _, _ in o.files})


@pytest.mark.parametrize("footer", ['{"1":7}', None])
def test_partition_statistics_are_found_past_a_nested_column(
    staged: StagedRun, footer: str | None
) -> None:
    """A typed layout's struct column before ``partition`` has several leaf columns: the
    statistics read are ``partition``'s (here ``value.b`` is a constant 5 that would pass
    for a partition), with the footer entry and without."""
    value = pa.array([{"a": i, "b": 5} for i in range(7)])
    table = pa.table({"value": value, "partition": pa.array([1] * 7, pa.int32())})
    directory = Path(staged.path) / "topic=t" / "date=1970-01-01"
    directory.mkdir(parents=True)
    writer = pq.ParquetWriter(directory / "part-t-1-5-12.parquet", table.schema)
    writer.write_table(table)
    if footer is not None:
        writer.add_key_value_metadata({PARTITION_ROWS_KEY: footer})
    writer.close()
    assert scan_staged(staged).landed() == {("t", 1): 7}
