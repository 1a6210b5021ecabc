"""The table's data on ``s3://`` (moto's S3 server on 127.0.0.1), the catalog in SQLite."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pyarrow.fs as pafs

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import IcebergTable, snapshot_offsets
from sluice.pipeline.table.iceberg_maintenance import compact, remove_orphans
from sluice.pipeline.table.partition_spec import PartitionBy
from sluice.testing.s3 import S3Server
from tests.pipeline.table.iceberg_rows import typed_rows


def test_s3_round_trip(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket("warehouse-round-trip")
    props = {f"iceberg.catalog.{k}": v for k, v in s3_server.iceberg_properties().items()}
    props["iceberg.catalog.uri"] = "sqlite:///" + str(tmp_path / "catalog.db")
    config = IcebergConfig.from_properties(props, bucket + "/tables")
    catalog = config.open_catalog()
    rows = typed_rows("clicks", 2, 0, 500)
    planned = IcebergTable(catalog, "sluice.clicks").plan(
        rows.schema, PartitionBy.parse("day(event_time)")
    )
    files = planned.writer.write(rows, "s3-run")
    assert all(f.path.startswith(bucket + "/tables/") for f in files)
    planned.commit(files, {"clicks": {0: 500, 1: 500}}, "s3-run")
    # Written on the S3 server, nothing in the local directory but the catalog.
    listed = s3_server.filesystem().get_file_info(
        pafs.FileSelector("warehouse-round-trip/tables", recursive=True)
    )
    objects = [i.path for i in listed if i.type == pafs.FileType.File]
    assert sum(p.endswith(".parquet") for p in objects) == 3
    assert any(p.endswith(".metadata.json") for p in objects)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db"]
    table = config.open_catalog().load_table("sluice.clicks")
    read = table.scan().to_arrow()
    pairs = Counter(zip(read["partition"].to_pylist(), read["offset"].to_pylist(), strict=True))
    assert set(pairs) == {(p, o) for p in range(2) for o in range(500)}
    assert set(pairs.values()) == {1}
    assert snapshot_offsets(table)[1] == {"clicks": {0: 500, 1: 500}}


def test_s3_compaction_and_orphans(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket("warehouse-maintenance")
    props = {f"iceberg.catalog.{k}": v for k, v in s3_server.iceberg_properties().items()}
    props["iceberg.catalog.uri"] = "sqlite:///" + str(tmp_path / "catalog.db")
    config = IcebergConfig.from_properties(props, bucket)
    catalog = config.open_catalog()
    day = PartitionBy.parse("day(event_time)")
    for run in range(3):
        rows = typed_rows("clicks", 1, run * 50, 50)
        planned = IcebergTable(catalog, "sluice.clicks").plan(rows.schema, day)
        planned.commit(
            planned.writer.write(rows, f"r{run}"), {"clicks": {0: run * 50 + 50}}, f"r{run}"
        )
    rows = typed_rows("clicks", 1, 150, 50)
    crashed = IcebergTable(catalog, "sluice.clicks").plan(rows.schema, day)
    stranded = sorted(f.path for f in crashed.writer.write(rows, "crashed"))
    result = compact(catalog, "sluice.clicks")
    assert (result.files_before, result.files_after) == (9, 3)
    table = catalog.load_table("sluice.clicks")
    assert sorted(table.scan().to_arrow()["offset"].to_pylist()) == list(range(150))
    assert snapshot_offsets(table)[1] == {"clicks": {0: 150}}
    assert remove_orphans(catalog, "sluice.clicks", dt.timedelta(0)) == stranded
    listed = s3_server.filesystem().get_file_info(
        pafs.FileSelector("warehouse-maintenance", recursive=True)
    )
    assert not {f"s3://{i.path}" for i in listed} & set(stranded)
