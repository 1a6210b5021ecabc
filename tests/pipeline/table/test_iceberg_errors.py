"""The error table's commit beside the data table's: committed first, with the same offsets;
a crash between the two commits neither loses nor doubles either on the rerun."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
from pyiceberg.catalog import Catalog

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import IcebergTable, snapshot_offsets
from sluice.pipeline.table.partition_spec import PartitionBy
from tests.pipeline.table.iceberg_rows import typed_rows

DATA, ERRORS = "sluice.orders", "sluice.orders_errors"
DAY = PartitionBy.parse("day(timestamp)")
ERROR_SCHEMA = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
     ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary()),
     ("schema_id", pa.int32()), ("error", pa.string()), ("reason", pa.string())]
)  # fmt: skip


def errors_at(offsets: list[int]) -> pa.Table:
    n = len(offsets)
    return pa.table(
        {
            "topic": ["orders"] * n,
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pa.array(
                [dt.datetime(2024, 3, 1, tzinfo=dt.UTC)] * n, pa.timestamp("us", tz="UTC")
            ),  # fmt: skip
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array([b"\x01garbage"] * n, pa.binary()),
            "schema_id": pa.array([None] * n, pa.int32()),
            "error": ["WrongMagicByteError"] * n,
            "reason": ["expected magic byte 0, found 1"] * n,
        },
        schema=ERROR_SCHEMA,
    )


def run(catalog: Catalog, start: int, end: int, *, crash_between: bool = False) -> None:
    """A run over ``[start, end)`` of partition 0: every tenth offset is undecodable."""
    data_table, error_table = IcebergTable(catalog, DATA), IcebergTable(catalog, ERRORS)
    pinned = data_table.pinned_offsets(error_table)
    if pinned:  # a crash fell between the two commits: read exactly up to the error table's
        end = pinned["orders"][0]
    bad = [o for o in range(start, end) if o % 10 == 0]
    good = typed_rows("orders", 1, start, end - start).filter(
        pa.compute.invert(pa.compute.is_in(pa.compute.field("offset"), pa.array(bad, pa.int64())))
    )
    data = data_table.plan(good.schema, DAY)
    errors = error_table.plan(ERROR_SCHEMA, DAY)
    offsets = {"orders": {0: end}}
    error_files = errors.writer.write(errors_at(bad), f"errors-{end}")
    data_files = data.writer.write(good, f"data-{end}")
    assert data.offsets == {} or data.offsets == {"orders": {0: start}}
    errors.commit(error_files, offsets, f"run-{end}", skip_if_committed=True)
    if crash_between:
        return
    data.commit(data_files, offsets, f"run-{end}")


def test_a_crash_between_the_error_and_the_data_commit(tmp_path: object) -> None:
    catalog = IcebergConfig.from_properties({}, f"{tmp_path}/wh").open_catalog()
    run(catalog, 0, 100)
    run(catalog, 100, 200, crash_between=True)  # the error table has 100..200, the data not
    assert snapshot_offsets(catalog.load_table(ERRORS))[1] == {"orders": {0: 200}}
    assert snapshot_offsets(catalog.load_table(DATA))[1] == {"orders": {0: 100}}
    assert IcebergTable(catalog, DATA).pinned_offsets(IcebergTable(catalog, ERRORS)) == {
        "orders": {0: 200}
    }
    run(catalog, 100, 250)  # the log grew meanwhile; the rerun reads exactly up to 200
    assert snapshot_offsets(catalog.load_table(DATA))[1] == {"orders": {0: 200}}
    assert len(catalog.load_table(ERRORS).metadata.snapshots) == 2  # no second error commit
    run(catalog, 200, 250)
    data = catalog.load_table(DATA).scan().to_arrow()["offset"].to_pylist()
    errors = catalog.load_table(ERRORS).scan().to_arrow()["offset"].to_pylist()
    assert Counter(data + errors) == Counter(range(250))  # every offset once, in one table
    assert sorted(errors) == list(range(0, 250, 10))
