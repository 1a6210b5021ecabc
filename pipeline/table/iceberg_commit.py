"""The Iceberg commit protocol: a run's data files and its offsets in one catalog commit.

Iceberg's own commit, as pyiceberg's ``Transaction`` makes it: **stage** (data files, then a
manifest, a manifest list and a new ``metadata.json``, none referenced yet), **validate the
requirements** against the table's current metadata ("expected X, found Y"), **swap one
pointer conditionally** (the SQL catalog's ``UPDATE ... WHERE metadata_location = <old>``).

One run of one table::

    planned = IcebergTable(catalog, "sluice.page_views").plan(arrow_schema, partition_by)
        # the current snapshot S (or none), the previous offsets, the schema change checked
    files   = planned.writer.write(rows, prefix)      # on executors: Iceberg-ready Parquet
    planned.commit(paths, offsets, run_id)             # on the driver: one snapshot, or nothing

* **Previous offsets** are the ``sluice.offsets`` of the newest snapshot *in the current
  snapshot's ancestry* that carries them — not the newest snapshot of the table (a rolled-back
  or expired branch does not count; a compaction's replace snapshot carries them on).
* **The commit** adds exactly the files the driver names (after it verified them) in one
  ``append`` snapshot whose summary holds ``sluice.offsets`` (Spark's offsets JSON, the full
  resume position of the table's topic) and ``sluice.run-id``; a new optional column or a
  widened type goes into the same commit (``sluice.pipeline.table.iceberg_schema``). It is
  **conditional on S**: ``AssertRefSnapshotId(main, S)``, checked by the catalog under its
  swap. If another writer committed in between, nothing is published and
  ``IcebergCommitConflictError`` names the expected and the found snapshot. The offsets
  recorded never go backwards (checked before staging) and no two snapshots cover the same
  offsets: a snapshot can only follow the one its run planned from.
* **Why not pyiceberg's ``commit_transaction``**: since 0.12 it retries a failed commit by
  rebuilding the snapshot on top of the *new* current one, dropping the ``AssertRefSnapshotId``
  it was built with — for appends that is what one wants, for a load whose offsets follow S
  it would publish the same offsets twice (the failure Iceberg's Kafka Connect sink has after
  a coordinator failover, apache/iceberg#16282). So the staged updates and requirements go to
  ``catalog.commit_table`` once, with the explicit requirement, and a failure is final.
* **Compared with Iceberg's Kafka Connect sink** (``Coordinator.commitToTable``): it too reads
  the offsets of the newest snapshot in the branch's ancestry carrying them
  (``lastCommittedOffsetsForTable``), but uses them to *filter* the workers' file reports
  (control-topic offset >= committed) and then appends unconditionally — ``AppendFiles``
  retries on top of whatever snapshot is current. Validation there is a filter before the
  commit; here it is the commit's own requirement, checked by the catalog under its swap, so
  a second writer cannot slip in between the check and the swap.
* **Crashes**: before the swap nothing is referenced; a file of a crashed run is an orphan,
  which ``remove-orphans`` deletes (``sluice.pipeline.table.iceberg_maintenance``). After the
  swap the snapshot holds the offsets: the rerun resumes after them.

The error table (``<table>_errors``) is committed by the same protocol, first, with the same
``sluice.offsets``: when a crash falls between the two commits, the error table's offsets are
ahead of the data table's, and ``IcebergTable.pinned_offsets`` tells the next run's plan to
read exactly up to them, so that run reproduces the same ranges, finds its error commit
already made (``commit`` with ``skip_if_committed``) and commits only the data.

An ``IcebergTable`` and its ``PlannedCommit`` are for one thread (the driver's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot, ancestors_of
from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

from sluice.pipeline.table.iceberg_data_file import (
    CODEC_PROPERTY,
    DataFileDescriber,
    IcebergFileWriter,
    WrittenFile,
)
from sluice.pipeline.table.iceberg_schema import (
    IncompatibleTableSchemaError,
    SchemaChange,
    TableSchema,
)
from sluice.pipeline.table.partition_spec import PartitionBy

__all__ = [
    "OFFSETS_PROPERTY",
    "Offsets",
    "RUN_ID_PROPERTY",
    "DataFileMismatchError",
    "IcebergCommitConflictError",
    "IcebergTable",
    "OffsetsRegressionError",
    "PlannedCommit",
    "TableMissingError",
    "offsets_from_json",
    "offsets_to_json",
    "snapshot_offsets",
]

OFFSETS_PROPERTY = "sluice.offsets"
RUN_ID_PROPERTY = "sluice.run-id"
MAIN = "main"

Offsets = Mapping[str, Mapping[int, int]]


class IcebergCommitConflictError(RuntimeError):
    """Another writer committed after the snapshot the run planned from; nothing published."""

    def __init__(self, table: str, expected: int | None, found: int | None) -> None:
        super().__init__(
            f"table {table}: expected the current snapshot to be {_name(expected)} (the one "
            f"this run planned from), found {_name(found)}: another writer committed "
            "meanwhile; nothing was published, rerun to load from the new offsets"
        )
        self.table = table
        self.expected = expected
        self.found = found


class DataFileMismatchError(RuntimeError):
    """A data file to commit is missing where the driver reads it, or differs from what its
    writer reported (size, rows): an executor wrote where the driver cannot see, or a file was
    replaced. Nothing is published."""


class OffsetsRegressionError(ValueError):
    """A commit whose offsets go back behind the previous snapshot's."""


class TableMissingError(LookupError):
    """The table does not exist and ``iceberg.tables.auto-create-enabled`` is false."""


class _Unset:
    """The type of ``UNSET``: no expected snapshot given."""


UNSET = _Unset()


def _name(snapshot_id: int | None) -> str:
    return "none (an empty table)" if snapshot_id is None else f"snapshot {snapshot_id}"


def offsets_to_json(offsets: Offsets) -> str:
    """Spark's offsets JSON (``{"t":{"0":23}}``), sorted."""
    return json.dumps(
        {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())},
        separators=(",", ":"),
    )


def offsets_from_json(text: str) -> dict[str, dict[int, int]]:
    """The inverse of ``offsets_to_json``."""
    return {t: {int(p): int(o) for p, o in ps.items()} for t, ps in json.loads(text).items()}


def snapshot_offsets(table: Table) -> tuple[Snapshot | None, dict[str, dict[int, int]]]:
    """The newest snapshot in the current ancestry carrying ``sluice.offsets``, and those
    offsets (``(None, {})`` when none does)."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        text = snapshot.summary.get(OFFSETS_PROPERTY) if snapshot.summary else None
        if text is not None:
            return snapshot, offsets_from_json(text)
    return None, {}


@dataclass
class PlannedCommit:
    """What a run planned for one table: the snapshot it planned from (``snapshot_id``, None
    for an empty table), the previous ``offsets``, the schema ``change`` the commit makes and
    the executors' ``writer`` (the table's schema after that change). ``table`` is the table as
    loaded at planning, the base of the commit."""

    identifier: str
    table: Table
    snapshot_id: int | None
    offsets: dict[str, dict[int, int]]
    arrow_schema: pa.Schema
    change: SchemaChange
    writer: IcebergFileWriter
    committed: list[int] = field(default_factory=list)

    def commit(
        self,
        files: Sequence[WrittenFile],
        offsets: Offsets,
        run_id: str,
        *,
        skip_if_committed: bool = False,
    ) -> int | None:
        """Add exactly ``files`` in one snapshot carrying ``offsets`` and ``run_id``,
        conditional on ``snapshot_id``; returns the new snapshot id. Each file must be where
        the driver reads it, with the size and rows its writer reported
        (``DataFileMismatchError`` otherwise, before anything is staged).

        With ``skip_if_committed`` a table whose newest offsets already equal ``offsets``
        (the error table after a crash between the two commits) gets no second snapshot:
        returns ``None``. Raises ``IcebergCommitConflictError`` (nothing published),
        ``OffsetsRegressionError``, ``DataFileMismatchError`` before staging."""
        if skip_if_committed and self.offsets == _plain(offsets):
            return None
        _check_forward(self.identifier, self.offsets, offsets)
        catalog = self.table.catalog
        current = catalog.load_table(self.identifier)
        found = current.metadata.current_snapshot_id
        if found != self.snapshot_id:  # the early, cheap check; the swap checks again
            raise IcebergCommitConflictError(self.identifier, self.snapshot_id, found)
        txn = self.table.transaction()
        if not self.change.empty:
            with txn.update_schema() as update:
                update.union_by_name(self.arrow_schema)
        summary = {OFFSETS_PROPERTY: offsets_to_json(offsets), RUN_ID_PROPERTY: run_id}
        data_files = _verified(self.table.io, txn.table_metadata, files)
        with txn.update_snapshot(snapshot_properties=summary).fast_append() as append:
            for data_file in data_files:
                append.append_data_file(data_file)
            new_id = append.snapshot_id
        self._swap(txn)
        self.committed.append(new_id)
        return new_id

    def _swap(self, txn: object) -> None:
        """One conditional commit: the transaction's staged updates, its requirements with
        ``AssertRefSnapshotId(main, planned)`` made explicit, to the catalog, once."""
        updates = txn._updates  # type: ignore[attr-defined]  # noqa: SLF001 — see module doc
        kept = tuple(
            r
            for r in txn._requirements  # type: ignore[attr-defined]  # noqa: SLF001
            if not isinstance(r, AssertRefSnapshotId)
        )
        requirements = (
            *kept,
            AssertRefSnapshotId(ref=MAIN, snapshot_id=self.snapshot_id),  # type: ignore[call-arg]
            AssertTableUUID(uuid=self.table.metadata.table_uuid),
        )
        try:
            self.table.catalog.commit_table(self.table, requirements, updates)
        except CommitFailedException:
            found = self.table.catalog.load_table(self.identifier).metadata.current_snapshot_id
            raise IcebergCommitConflictError(self.identifier, self.snapshot_id, found) from None


class IcebergTable:
    """One topic's table in a catalog: planning a run's commit, creating it if allowed."""

    def __init__(self, catalog: Catalog, identifier: str) -> None:
        self.catalog = catalog
        self.identifier = identifier

    def load(self) -> Table | None:
        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def plan(
        self,
        arrow_schema: pa.Schema,
        partition_by: PartitionBy,
        *,
        auto_create: bool = True,
        evolve_schema: bool = True,
        expected_snapshot: int | None | _Unset = UNSET,
    ) -> PlannedCommit:
        """Load (or create) the table, read its previous offsets and check the run's schema
        against it; nothing is written to the table. Raises ``IncompatibleTableSchemaError``
        naming the field, ``TableMissingError``, ``InvalidPartitionByError``; and
        ``IcebergCommitConflictError`` when ``expected_snapshot`` (the snapshot whose offsets
        the caller planned its ranges from) is given and is no longer the current one."""
        table = self.load()
        if table is None:
            if not auto_create:
                raise TableMissingError(
                    f"table {self.identifier}: expected it to exist "
                    "(iceberg.tables.auto-create-enabled=false), found none"
                )
            table = self._create(arrow_schema, partition_by)
        snapshot = table.current_snapshot()
        found = snapshot.snapshot_id if snapshot else None
        if not isinstance(expected_snapshot, _Unset) and found != expected_snapshot:
            raise IcebergCommitConflictError(self.identifier, expected_snapshot, found)
        _, offsets = snapshot_offsets(table)
        has_rows = (
            snapshot is not None
            and snapshot.summary is not None
            and int(snapshot.summary.get("total-records", "0")) > 0
        )
        change = SchemaChange.between(table.schema(), arrow_schema, table_has_rows=has_rows)
        if not change.empty and not evolve_schema:
            raise IncompatibleTableSchemaError(
                f"table {self.identifier}: the run's schema {change.describe()} and "
                "iceberg.tables.evolve-schema-enabled=false"
            )
        schema = table.schema()
        if not change.empty:  # the schema after the change, as the commit will make it
            txn = table.transaction()
            with txn.update_schema() as update:
                update.union_by_name(arrow_schema)
            schema = txn.table_metadata.schema()
        writer = IcebergFileWriter.for_table(
            schema, table.spec(), table.location(), dict(table.io.properties), table.properties
        )
        return PlannedCommit(
            self.identifier,
            table,
            snapshot.snapshot_id if snapshot else None,
            offsets,
            arrow_schema,
            change,
            writer,
        )

    def pinned_offsets(self, errors: IcebergTable) -> dict[str, dict[int, int]]:
        """The error table's newest offsets where they are ahead of this table's (a crash
        fell between the two commits): the next run must read exactly up to them."""
        data = self.load()
        error_table = errors.load()
        if data is None or error_table is None:
            return {}
        _, mine = snapshot_offsets(data)
        _, theirs = snapshot_offsets(error_table)
        return {
            t: {p: o for p, o in ps.items() if o > mine.get(t, {}).get(p, -1)}
            for t, ps in theirs.items()
            if any(o > mine.get(t, {}).get(p, -1) for p, o in ps.items())
        }

    def _create(self, arrow_schema: pa.Schema, partition_by: PartitionBy) -> Table:
        namespace = self.identifier.rsplit(".", 1)[0]
        self.catalog.create_namespace_if_not_exists(namespace)
        schema = TableSchema.for_new_table(arrow_schema)
        spec = partition_by.spec(schema)
        self.catalog.create_table_if_not_exists(
            self.identifier,
            schema=schema,
            partition_spec=spec,
            # Sluice commits once and never retries on pyiceberg's behalf (module doc).
            # Snappy, as the Parquet layout and Spark's Parquet writer: Iceberg's default zstd
            # made the load's write a third slower (bench_load's Iceberg rows); the property
            # tells every later writer (Spark's, a compaction) to keep it.
            properties={
                "commit.retry.num-retries": "0",
                "format-version": "2",
                CODEC_PROPERTY: "snappy",
            },
        )
        return self.catalog.load_table(self.identifier)

    def arrow_schema(self) -> pa.Schema | None:
        table = self.load()
        return None if table is None else schema_to_pyarrow(table.schema())


def _verified(io: FileIO, metadata: TableMetadata, files: Sequence[WrittenFile]) -> list[DataFile]:
    """The ``DataFile`` entries of ``files``, each checked against what its writer reported."""
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        twice = sorted({p for p in paths if paths.count(p) > 1})
        raise DataFileMismatchError(f"expected each file once, found {twice[0]} twice")
    entries = []
    describer = DataFileDescriber(io, metadata)
    for written in files:
        try:
            entry = describer.describe(written.path)
        except FileNotFoundError:
            raise DataFileMismatchError(
                f"expected data file {written.path} ({written.size} bytes, {written.rows} rows) "
                "where the driver commits, found none: did the executors write to a disk "
                "the driver cannot see?"
            ) from None
        if (entry.file_size_in_bytes, entry.record_count) != (written.size, written.rows):
            raise DataFileMismatchError(
                f"data file {written.path}: expected {written.size} bytes and {written.rows} "
                f"rows (its writer's report), found {entry.file_size_in_bytes} bytes and "
                f"{entry.record_count} rows"
            )
        entries.append(entry)
    return entries


def _plain(offsets: Offsets) -> dict[str, dict[int, int]]:
    return {t: dict(ps) for t, ps in offsets.items()}


def _check_forward(identifier: str, previous: Offsets, offsets: Offsets) -> None:
    for topic, partitions in previous.items():
        for partition, before in partitions.items():
            after = offsets.get(topic, {}).get(partition)
            if after is None or after < before:
                raise OffsetsRegressionError(
                    f"table {identifier}: expected {topic}-{partition} to resume at or after "
                    f"{before} (the previous snapshot's), found {after}"
                )
