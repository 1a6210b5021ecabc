"""Maintenance of a topic's Iceberg table: describe, compact, expire snapshots, remove orphans.

* ``describe`` — the schema, the partition spec and every snapshot of the current ancestry with
  its operation, ``sluice.offsets``, run id, and the table's rows, files and bytes after it.
* ``compact`` — per partition, the data files smaller than ``target_bytes`` are read and
  rewritten into as few files as the target allows, all of them in **one snapshot** of
  Iceberg's operation ``replace`` (pyiceberg 0.12 has no rewrite API: ``_ReplaceFiles``; also
  marked ``sluice.compaction=true``) that deletes the small files and adds the new ones,
  carrying the newest
  ``sluice.offsets`` and ``sluice.run-id`` on (a replace changes no row, so the resume position
  is the same). It is conditional on the snapshot it planned from, exactly as a load's commit
  (``sluice.pipeline.table.iceberg_commit``): a load that commits meanwhile wins, the
  compaction's files become orphans, and the compaction re-plans from the new snapshot, up to
  ``attempts`` times, then fails with ``IcebergCommitConflictError``. A load never loses a
  file to it: a replace only deletes files of the snapshot it planned from.
* ``expire_snapshots`` — pyiceberg's ``ExpireSnapshots``: snapshots older than a time, never
  the current one; their files stay until no snapshot references them (then orphans).
* ``remove_orphans`` — files under the table's location that no metadata references (the
  current and logged ``metadata.json`` files, every snapshot's manifest list, manifests and data
  files): a crashed run's data files, a failed commit's manifests. Only files older than
  ``older_than`` go, so a run writing right now keeps its files (Iceberg's default is three
  days; the CLI's one).

Functions only; each call loads the table afresh. For one thread each.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Summary, ancestors_of
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import EMPTY_DICT

from sluice.pipeline.table.iceberg_commit import (
    MAIN,
    OFFSETS_PROPERTY,
    RUN_ID_PROPERTY,
    IcebergCommitConflictError,
    PlannedCommit,
    snapshot_offsets,
)
from sluice.pipeline.table.iceberg_data_file import (
    IcebergFileWriter,
    WrittenFile,
    describe_data_files,
)
from sluice.pipeline.table.iceberg_schema import SchemaChange

__all__ = [
    "CompactionResult",
    "compact",
    "describe",
    "expire_snapshots",
    "remove_orphans",
]

COMPACTION_PROPERTY = "sluice.compaction"
"""Set on a compaction's snapshot: it deleted and added the same rows."""

DEFAULT_TARGET_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: the snapshot it made (None: nothing to do), files before and
    after (of the partitions it rewrote) and the rows it rewrote."""

    snapshot_id: int | None
    files_before: int
    files_after: int
    rows: int
    attempts: int = 1
    partitions: list[str] = field(default_factory=list)


def describe(catalog: Catalog, identifier: str) -> dict[str, Any]:
    """The table's schema, spec and snapshots (newest first) as a JSON-able dict."""
    table = catalog.load_table(identifier)
    snapshots = []
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        get = summary.get if summary is not None else (lambda key, default=None: default)
        snapshots.append(
            {
                "snapshot_id": snapshot.snapshot_id,
                "parent_id": snapshot.parent_snapshot_id,
                "timestamp": dt.datetime.fromtimestamp(
                    snapshot.timestamp_ms / 1000, dt.UTC
                ).isoformat(timespec="seconds"),
                "operation": summary.operation.value if summary is not None else None,
                "offsets": get(OFFSETS_PROPERTY),
                "run_id": get(RUN_ID_PROPERTY),
                "rows": int(get("total-records", "0")),
                "files": int(get("total-data-files", "0")),
                "bytes": int(get("total-files-size", "0")),
            }
        )
    return {
        "table": identifier,
        "location": table.location(),
        "schema": str(table.schema()),
        "partition_spec": ", ".join(
            f"{f.name}: {f.transform}({table.schema().find_column_name(f.source_id)})"
            for f in table.spec().fields
        )
        or "unpartitioned",
        "snapshots": snapshots,
    }


def compact(
    catalog: Catalog,
    identifier: str,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    attempts: int = 3,
    run_id: str = "compact",
) -> CompactionResult:
    """Rewrite each partition's small files in one replace snapshot (module doc)."""
    for attempt in range(1, attempts + 1):
        try:
            result = _compact_once(catalog, identifier, target_bytes, run_id)
        except IcebergCommitConflictError:
            if attempt == attempts:
                raise
            continue
        return CompactionResult(
            result.snapshot_id,
            result.files_before,
            result.files_after,
            result.rows,
            attempt,
            result.partitions,
        )
    raise AssertionError("unreachable")


def _compact_once(
    catalog: Catalog, identifier: str, target_bytes: int, run_id: str
) -> CompactionResult:
    table = catalog.load_table(identifier)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return CompactionResult(None, 0, 0, 0)
    by_partition: dict[str, list[DataFile]] = defaultdict(list)
    for task in table.scan().plan_files():
        data_file = task.file
        if data_file.file_size_in_bytes < target_bytes:
            path = table.specs()[data_file.spec_id].partition_to_path(
                data_file.partition, table.schema()
            )
            by_partition[path].append(data_file)
    small = {p: files for p, files in by_partition.items() if len(files) > 1}
    if not small:
        return CompactionResult(None, 0, 0, 0)
    _, offsets = snapshot_offsets(table)
    writer = IcebergFileWriter.for_table(
        table.schema(), table.spec(), table.location(), dict(table.io.properties),
        table.properties,
    )  # fmt: skip
    new_files: list[WrittenFile] = []
    rows = 0
    for n, (_partition, files) in enumerate(sorted(small.items())):
        for group_number, group in enumerate(_groups(files, target_bytes)):
            parts = [_read(table, f.file_path) for f in group]
            merged = pa.concat_tables(parts)
            rows += merged.num_rows
            prefix = f"compact-{snapshot.snapshot_id}-{n:04d}-{group_number:03d}"
            new_files += writer.write(merged, prefix)
    planned = PlannedCommit(
        identifier,
        table,
        snapshot.snapshot_id,
        offsets,
        pa.schema([]),
        SchemaChange(),
        writer,
    )
    txn = table.transaction()
    summary = {RUN_ID_PROPERTY: run_id, COMPACTION_PROPERTY: "true"}
    if offsets:
        summary[OFFSETS_PROPERTY] = _newest_offsets_text(table)
    added = describe_data_files(table.io, table.metadata, [f.path for f in new_files])
    with _ReplaceFiles(
        operation=Operation.OVERWRITE,  # its totals are summed as an overwrite's (_ReplaceFiles)
        transaction=txn,
        io=table.io,
        branch=MAIN,
        snapshot_properties=summary,
    ) as rewrite:
        for files in small.values():
            for data_file in files:
                rewrite.delete_data_file(data_file)
        for data_file in added:
            rewrite.append_data_file(data_file)
        new_id = rewrite.snapshot_id
    planned._swap(txn)  # noqa: SLF001 — the one conditional swap of iceberg_commit
    before = sum(len(files) for files in small.values())
    return CompactionResult(new_id, before, len(added), rows, 1, sorted(small))


class _ReplaceFiles(_OverwriteFiles):
    """pyiceberg's delete-and-add snapshot producer, committing Iceberg's ``replace``: what
    Java's ``RewriteFiles`` writes, a snapshot that changes no row, which readers and
    incremental scans skip. pyiceberg 0.12 has no rewrite API and its summary code refuses
    ``replace`` (``update_snapshot_summaries``: "Operation not implemented"), though the
    totals of a replace are summed exactly as an overwrite's (previous totals, plus the added
    files, minus the deleted ones). So the producer runs as an overwrite and only its summary's
    operation is swapped, after the totals are computed; the manifests it writes (the deleted
    entries, the added ones, the untouched manifests kept) are an overwrite's, which are a
    replace's."""

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        summary = super()._summary(snapshot_properties)
        return Summary(Operation.REPLACE, **summary.additional_properties)


def _newest_offsets_text(table: Table) -> str:
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        text = snapshot.summary.get(OFFSETS_PROPERTY) if snapshot.summary else None
        if text is not None:
            return text
    return "{}"


def _groups(files: list[DataFile], target_bytes: int) -> list[list[DataFile]]:
    """``files`` in groups of about ``target_bytes`` (first fit, in path order)."""
    groups: list[list[DataFile]] = []
    size = 0
    for data_file in sorted(files, key=lambda f: f.file_path):
        if not groups or size + data_file.file_size_in_bytes > target_bytes:
            groups.append([])
            size = 0
        groups[-1].append(data_file)
        size += data_file.file_size_in_bytes
    return [g for g in groups if g]


def _read(table: Table, uri: str) -> pa.Table:
    """A data file's rows, through the table's own FileIO (its S3 endpoint and keys)."""
    with table.io.new_input(uri).open() as stream:
        rows: pa.Table = pq.read_table(stream)
    return rows


def expire_snapshots(catalog: Catalog, identifier: str, older_than: dt.datetime) -> list[int]:
    """Expire the snapshots older than ``older_than`` but the current one; returns their ids."""
    table = catalog.load_table(identifier)
    current = table.metadata.current_snapshot_id
    doomed = [
        s.snapshot_id
        for s in table.metadata.snapshots
        if s.snapshot_id != current and s.timestamp_ms < older_than.timestamp() * 1000
    ]
    if doomed:
        table.maintenance.expire_snapshots().by_ids(doomed).commit()
    return doomed


def remove_orphans(
    catalog: Catalog, identifier: str, older_than: dt.timedelta = dt.timedelta(days=1)
) -> list[str]:
    """Delete the files under the table's location no metadata references and older than
    ``older_than``; returns their URIs (module doc)."""
    table = catalog.load_table(identifier)
    referenced = _referenced(table)
    scheme, netloc, root = PyArrowFileIO.parse_location(table.location())
    # The table's own FileIO's filesystem: an S3 warehouse's endpoint and keys are its.
    io = table.io if isinstance(table.io, PyArrowFileIO) else PyArrowFileIO(table.io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    cutoff = dt.datetime.now(dt.UTC) - older_than
    removed = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        uri = f"{scheme}://{info.path}" if scheme != "file" else f"file://{info.path}"
        if (scheme, info.path) in referenced:
            continue
        mtime = info.mtime
        if mtime is not None and mtime.replace(tzinfo=mtime.tzinfo or dt.UTC) > cutoff:
            continue
        fs.delete_file(info.path)
        removed.append(uri)
    return sorted(removed)


def _referenced(table: Table) -> set[tuple[str, str]]:
    metadata = table.metadata
    paths = {table.metadata_location}
    paths |= {entry.metadata_file for entry in metadata.metadata_log}
    for snapshot in metadata.snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            paths.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path)
    for statistics in metadata.statistics:
        paths.add(statistics.statistics_path)
    return {_key(p) for p in paths}


def _key(uri: str) -> tuple[str, str]:
    """``(scheme, path)``: ``file:///x`` and ``/x`` alike, ``s3://b/k`` as ``("s3", "b/k")``."""
    scheme, _, path = PyArrowFileIO.parse_location(uri)
    return scheme, path
