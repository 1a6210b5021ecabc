"""The Iceberg commit protocol against real catalogs (SQLite, PostgreSQL): data and offsets in
one conditional commit, races, crashes, schema evolution, compaction, reads back."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table.snapshots import Operation

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import (
    OFFSETS_PROPERTY,
    RUN_ID_PROPERTY,
    DataFileMismatchError,
    IcebergCommitConflictError,
    IcebergTable,
    OffsetsRegressionError,
    snapshot_offsets,
)
from sluice.pipeline.table.iceberg_data_file import WrittenFile
from sluice.pipeline.table.iceberg_maintenance import compact, describe, remove_orphans
from sluice.pipeline.table.iceberg_schema import IncompatibleTableSchemaError
from sluice.pipeline.table.partition_spec import PartitionBy
from tests.pipeline.table.iceberg_rows import BASE, typed_rows

TABLE = "sluice.page_views"
EVENT_DAY = PartitionBy.parse("day(event_time)")


def sqlite_catalog(warehouse: str) -> Catalog:
    catalog: Catalog = IcebergConfig.from_properties({}, warehouse).open_catalog()
    return catalog


def load(catalog: Catalog, rows: pa.Table, offsets: dict[str, dict[int, int]], run_id: str,
         *, split_rows: int = 5000) -> int | None:  # fmt: skip
    """One run as the load makes it: plan, executors write split by split, one commit."""
    planned = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    written: list[WrittenFile] = []
    for n, start in enumerate(range(0, rows.num_rows, split_rows)):
        files = planned.writer.write(rows.slice(start, split_rows), f"{run_id}-split{n}")
        written += files
    snapshot_id: int | None = planned.commit(written, offsets, run_id)
    return snapshot_id


def check_twenty_thousand(catalog: Catalog) -> None:
    rows = typed_rows("page_views", 4, 0, 5000)
    snapshot_id = load(catalog, rows, {"page_views": {p: 5000 for p in range(4)}}, "run-1")
    table = catalog.load_table(TABLE)
    assert table.metadata.current_snapshot_id == snapshot_id
    read = table.scan().to_arrow()
    pairs = Counter(zip(read["partition"].to_pylist(), read["offset"].to_pylist(), strict=True))
    assert read.num_rows == 20_000
    assert set(pairs) == {(p, o) for p in range(4) for o in range(5000)}
    assert set(pairs.values()) == {1}
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary[OFFSETS_PROPERTY] == (
        '{"page_views":{"0":5000,"1":5000,"2":5000,"3":5000}}'
    )
    assert snapshot.summary[RUN_ID_PROPERTY] == "run-1"
    assert str(table.spec()) == "[\n  1000: event_time_day: day(1)\n]"
    # Each day's rows sit in that day's partition, and only there.
    days: Counter[int] = Counter()
    for task in table.scan().plan_files():
        day: int = task.file.partition[0]
        data = pa.parquet.read_table(task.file.file_path.removeprefix("file://"))
        event_days = pc.unique(
            pc.cast(pc.divide(pc.cast(data["event_time"], pa.int64()), 86_400_000_000), pa.int32())
        ).to_pylist()
        assert event_days == [day]
        days[day] += task.file.record_count
    first = (BASE.date() - dt.date(1970, 1, 1)).days
    assert sorted(days) == [first, first + 1, first + 2]
    assert sum(days.values()) == 20_000


def test_twenty_thousand_records_over_three_days_sqlite(warehouse: str) -> None:
    check_twenty_thousand(sqlite_catalog(warehouse))


def test_twenty_thousand_records_over_three_days_postgres(
    warehouse: str, postgres_url: str
) -> None:
    config = IcebergConfig.from_properties({"iceberg.catalog.uri": postgres_url}, warehouse)
    check_twenty_thousand(config.open_catalog())


def test_resume_offsets_are_the_newest_in_the_ancestry(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    load(catalog, typed_rows("page_views", 2, 0, 100), {"page_views": {0: 100, 1: 100}}, "r1")
    load(catalog, typed_rows("page_views", 2, 100, 50), {"page_views": {0: 150, 1: 150}}, "r2")
    planned = IcebergTable(catalog, TABLE).plan(typed_rows("page_views", 1, 0, 1).schema, EVENT_DAY)
    assert planned.offsets == {"page_views": {0: 150, 1: 150}}
    with pytest.raises(OffsetsRegressionError, match="page_views-0 to resume at or after 150"):
        planned.commit([], {"page_views": {0: 149, 1: 150}}, "r3")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_racing_commits_from_one_planned_snapshot(
    warehouse: str, backend: str, request: pytest.FixtureRequest
) -> None:
    props = (
        {}
        if backend == "sqlite"
        else {"iceberg.catalog.uri": request.getfixturevalue("postgres_url")}
    )
    config = IcebergConfig.from_properties(props, warehouse)
    catalog = config.open_catalog()
    load(catalog, typed_rows("page_views", 2, 0, 100), {"page_views": {0: 100, 1: 100}}, "r0")
    rows = typed_rows("page_views", 2, 100, 100)
    offsets = {"page_views": {0: 200, 1: 200}}
    # Both plan from the same snapshot and both stage their files; then they race to commit,
    # each through its own catalog (its own connection), past the early check at once.
    plans = [
        IcebergTable(config.open_catalog(), TABLE).plan(rows.schema, EVENT_DAY) for _ in range(2)
    ]
    staged = [p.writer.write(rows, f"racer{i}") for i, p in enumerate(plans)]
    barrier = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def commit(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = plans[i].commit(staged[i], offsets, f"racer{i}")
        except IcebergCommitConflictError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [o for o in outcomes if isinstance(o, IcebergCommitConflictError)]
    winners = [o for o in outcomes if isinstance(o, int)]
    assert len(errors) == 1 and len(winners) == 1, outcomes
    planned_from = plans[0].snapshot_id
    assert errors[0].expected == planned_from and errors[0].found == winners[0]
    assert f"expected the current snapshot to be snapshot {planned_from}" in str(errors[0])
    assert f"found snapshot {winners[0]}" in str(errors[0])
    read = catalog.load_table(TABLE).scan().to_arrow()
    pairs = Counter(zip(read["partition"].to_pylist(), read["offset"].to_pylist(), strict=True))
    assert read.num_rows == 400 and set(pairs.values()) == {1}
    assert set(pairs) == {(p, o) for p in range(2) for o in range(200)}
    # Never two snapshots covering the same offsets.
    covered = [s["offsets"] for s in describe(catalog, TABLE)["snapshots"]]
    assert len(covered) == len(set(covered)) == 2


def test_a_crash_between_staging_and_commit_leaves_orphans_remove_orphans_deletes(
    warehouse: str,
) -> None:
    catalog = sqlite_catalog(warehouse)
    load(catalog, typed_rows("page_views", 2, 0, 100), {"page_views": {0: 100, 1: 100}}, "r1")
    rows = typed_rows("page_views", 2, 100, 100)
    crashed = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    stranded = [f.path for f in crashed.writer.write(rows, "crashed-run")]
    assert stranded  # staged, never committed: the "driver" died here
    before = catalog.load_table(TABLE).scan().to_arrow().num_rows
    assert before == 200
    # The rerun loads the same range again: exactly once.
    load(catalog, rows, {"page_views": {0: 200, 1: 200}}, "rerun")
    assert catalog.load_table(TABLE).scan().to_arrow().num_rows == 400
    removed = remove_orphans(catalog, TABLE, older_than=dt.timedelta(0))
    assert sorted(removed) == sorted(stranded)
    for uri in stranded:
        assert not Path(uri.removeprefix("file://")).exists()
    assert catalog.load_table(TABLE).scan().to_arrow().num_rows == 400
    assert remove_orphans(catalog, TABLE, older_than=dt.timedelta(0)) == []


def test_recent_orphans_are_kept(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    load(catalog, typed_rows("page_views", 1, 0, 10), {"page_views": {0: 10}}, "r1")
    rows = typed_rows("page_views", 1, 10, 10)
    planned = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    planned.writer.write(rows, "in-flight")
    assert remove_orphans(catalog, TABLE, older_than=dt.timedelta(hours=1)) == []


def test_a_new_optional_field_adds_a_column_in_the_data_commit(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    load(catalog, typed_rows("page_views", 2, 0, 1000), {"page_views": {0: 1000, 1: 1000}}, "v1")
    snapshots = len(catalog.load_table(TABLE).metadata.snapshots)
    v2 = typed_rows("page_views", 2, 1000, 500, extra=True)
    planned = IcebergTable(catalog, TABLE).plan(v2.schema, EVENT_DAY)
    assert planned.change.added == ("referrer",)
    load(catalog, v2, {"page_views": {0: 1500, 1: 1500}}, "v2")
    table = catalog.load_table(TABLE)
    assert len(table.metadata.snapshots) == snapshots + 1  # schema and data: one commit
    assert "referrer" in table.schema().column_names
    read = table.scan().to_arrow()
    assert read.num_rows == 3000
    old = read.filter(pc.less(read["offset"], 1000))
    new = read.filter(pc.greater_equal(read["offset"], 1000))
    assert old["referrer"].null_count == old.num_rows == 2000
    assert new["referrer"].null_count == 0


def test_a_widening_promotes_and_an_incompatible_change_fails_before_writing(
    warehouse: str,
) -> None:
    catalog = sqlite_catalog(warehouse)
    rows = typed_rows("page_views", 1, 0, 100)
    load(catalog, rows, {"page_views": {0: 100}}, "v1")
    wider = typed_rows("page_views", 1, 100, 100)
    wider = wider.set_column(1, "user_id", pc.cast(wider["user_id"], pa.int64()))
    planned = IcebergTable(catalog, TABLE).plan(wider.schema, EVENT_DAY)
    assert planned.change.promoted == ("user_id: int -> long",)
    load(catalog, wider, {"page_views": {0: 200}}, "v2")
    table = catalog.load_table(TABLE)
    assert str(table.schema().find_field("user_id").field_type) == "long"
    assert table.scan().to_arrow().num_rows == 200
    v3 = typed_rows("page_views", 1, 200, 100)
    v3 = v3.set_column(1, "user_id", pc.cast(v3["user_id"], pa.string()))
    files_before = sorted(
        p for p in Path(warehouse.removeprefix("file://")).rglob("*") if p.is_file()
    )
    with pytest.raises(
        IncompatibleTableSchemaError, match="field user_id: the table's type is long"
    ):
        IcebergTable(catalog, TABLE).plan(v3.schema, EVENT_DAY)
    files_after = sorted(
        p for p in Path(warehouse.removeprefix("file://")).rglob("*") if p.is_file()
    )
    assert files_after == files_before


def test_compact_keeps_rows_and_offsets_with_fewer_files(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    end = 0
    for run in range(10):  # ten small loads: ten files per day
        load(
            catalog, typed_rows("page_views", 1, end, 60), {"page_views": {0: end + 60}}, f"r{run}"
        )
        end += 60
    table = catalog.load_table(TABLE)
    files_before = len(list(table.scan().plan_files()))
    offsets_before = snapshot_offsets(table)[1]
    rows_before = table.scan().to_arrow().sort_by("offset")
    result = compact(catalog, TABLE, target_bytes=64 * 1024 * 1024)
    table = catalog.load_table(TABLE)
    files_after = len(list(table.scan().plan_files()))
    assert files_after < files_before and files_after == 3  # one per day
    assert result.files_before == files_before and result.files_after == files_after
    assert table.scan().to_arrow().sort_by("offset").equals(rows_before)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary[OFFSETS_PROPERTY] == '{"page_views":{"0":600}}'
    assert snapshot_offsets(table)[1] == offsets_before
    # Iceberg's replace (no row changed), its totals those of the table after it.
    assert snapshot.summary.operation == Operation.REPLACE
    assert snapshot.summary["total-records"] == "600"
    assert snapshot.summary["total-data-files"] == str(files_after)
    assert snapshot.summary["deleted-data-files"] == str(files_before)


def test_a_load_committing_during_compaction_loses_nothing(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    for run in range(3):
        load(
            catalog,
            typed_rows("page_views", 1, run * 10, 10),
            {"page_views": {0: run * 10 + 10}},
            f"r{run}",
        )
    rows = typed_rows("page_views", 1, 30, 10)
    planned = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    staged = planned.writer.write(rows, "late-load")
    compact(catalog, TABLE)  # commits first: the load planned before it now conflicts
    with pytest.raises(IcebergCommitConflictError):
        planned.commit(staged, {"page_views": {0: 40}}, "late-load")
    compacted = catalog.load_table(TABLE).current_snapshot()
    assert compacted is not None and compacted.summary is not None
    assert compacted.summary.operation == Operation.REPLACE
    load(catalog, rows, {"page_views": {0: 40}}, "late-load-rerun")
    table = catalog.load_table(TABLE)
    read = table.scan().to_arrow()
    assert sorted(read["offset"].to_pylist()) == list(range(40))
    after = table.current_snapshot()
    assert after is not None and after.summary is not None
    assert after.parent_snapshot_id == compacted.snapshot_id  # the append after a replace
    assert (after.summary.operation, after.summary["total-records"]) == (Operation.APPEND, "40")


def test_read_back_with_pyiceberg_to_arrow_and_duckdb(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    load(catalog, typed_rows("page_views", 2, 0, 300), {"page_views": {0: 300, 1: 300}}, "r1")
    table = catalog.load_table(TABLE)
    arrow = table.scan(row_filter="partition == 1", selected_fields=("offset", "page")).to_arrow()
    assert arrow.num_rows == 300 and arrow.column_names == ["page", "offset"]  # table order
    connection = table.scan().to_duckdb(table_name="page_views")
    assert isinstance(connection, duckdb.DuckDBPyConnection)
    answer = connection.execute(
        'SELECT count(*), min("offset"), max("offset") FROM page_views'
    ).fetchone()
    assert answer == (600, 0, 299)


def test_only_files_as_their_writers_reported_them_are_committed(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    rows = typed_rows("page_views", 1, 0, 300)
    planned = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    files = planned.writer.write(rows, "r1")
    missing = WrittenFile(files[0].path.replace("r1-", "elsewhere-"), 10, 10)
    with pytest.raises(DataFileMismatchError, match="found none: did the executors write"):
        planned.commit([*files, missing], {"page_views": {0: 300}}, "r1")
    lying = WrittenFile(files[0].path, files[0].size, files[0].rows + 1)
    with pytest.raises(DataFileMismatchError, match=f"expected {files[0].size} bytes and "):
        planned.commit([lying, *files[1:]], {"page_views": {0: 300}}, "r1")
    with pytest.raises(DataFileMismatchError, match="found .* twice"):
        planned.commit([*files, files[0]], {"page_views": {0: 300}}, "r1")
    assert catalog.load_table(TABLE).current_snapshot() is None  # nothing was published
    planned.commit(files, {"page_views": {0: 300}}, "r1")
    assert catalog.load_table(TABLE).scan().to_arrow().num_rows == 300


def test_an_appender_streams_batches_into_one_file_per_partition(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    rows = typed_rows("page_views", 2, 0, 3000)
    planned = IcebergTable(catalog, TABLE).plan(rows.schema, EVENT_DAY)
    appender = planned.writer.open("split-0", row_group_rows=500)
    for batch in rows.to_batches(max_chunksize=700):
        appender.add(batch)
    files = appender.close()
    assert len(files) == 3 and sum(f.rows for f in files) == 6000
    planned.commit(files, {"page_views": {0: 3000, 1: 3000}}, "r1")
    table = catalog.load_table(TABLE)
    assert sorted(table.scan().to_arrow()["offset"].to_pylist()) == sorted(
        rows["offset"].to_pylist()
    )
    discarded = planned.writer.open("split-1")
    discarded.add(rows.slice(0, 10))
    discarded.discard()
    assert remove_orphans(catalog, TABLE, older_than=dt.timedelta(0)) == []


def test_a_narrower_type_than_the_tables_is_written_cast_up(warehouse: str) -> None:
    catalog = sqlite_catalog(warehouse)
    wide = typed_rows("page_views", 1, 0, 10)
    wide = wide.set_column(1, "user_id", pc.cast(wide["user_id"], pa.int64()))
    load(catalog, wide, {"page_views": {0: 10}}, "v2")
    narrow = typed_rows("page_views", 1, 10, 10)  # user_id int, as an older reader schema
    planned = IcebergTable(catalog, TABLE).plan(narrow.schema, EVENT_DAY)
    assert planned.change.empty
    load(catalog, narrow, {"page_views": {0: 20}}, "v1-again")
    read = catalog.load_table(TABLE).scan().to_arrow()
    assert read.schema.field("user_id").type == pa.int64() and read.num_rows == 20


def test_new_tables_name_snappy_and_their_files_use_the_table_s_codec(tmp_path: Path) -> None:
    """A table Sluice creates names ``write.parquet.compression-codec=snappy`` (the Parquet
    layout's codec) and its writer writes snappy; a table naming another codec (or none:
    Iceberg's zstd) gets that one; row groups hold the writer's ``row_group_rows``."""
    import pyarrow.parquet as pq

    from sluice.pipeline.table.iceberg_data_file import CODEC_PROPERTY, IcebergFileWriter

    catalog = IcebergConfig.from_properties({}, (tmp_path / "wh").as_uri()).open_catalog()
    rows = typed_rows("clicks", 1, 0, 3_000, days=1)
    planned = IcebergTable(catalog, "sluice.clicks").plan(rows.schema, EVENT_DAY)
    assert planned.table.properties[CODEC_PROPERTY] == "snappy"
    appender = planned.writer.open("codec", row_group_rows=1_000)
    for batch in rows.to_batches(max_chunksize=256):
        appender.add(batch)
    (written,) = appender.close()
    footer = pq.ParquetFile(written.path.removeprefix("file://")).metadata
    assert footer.row_group(0).column(0).compression == "SNAPPY"
    assert [footer.row_group(i).num_rows for i in range(footer.num_row_groups)] == [1_024] * 2 + [
        952
    ]
    table = planned.table
    for named, expected in (({CODEC_PROPERTY: "gzip"}, "GZIP"), ({}, "ZSTD")):
        writer = IcebergFileWriter.for_table(
            table.schema(), table.spec(), table.location(), {}, named
        )
        (other,) = writer.write(rows, f"codec-{expected}")
        footer = pq.ParquetFile(other.path.removeprefix("file://")).metadata
        assert footer.row_group(0).column(0).compression == expected
