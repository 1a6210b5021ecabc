"""One load run's Iceberg tables, from plan to commit: what the nightly load calls.

The load's side of the protocol in ``sluice.pipeline.table.iceberg_commit``, for every table
of a run at once, in three calls::

    run = IcebergRun.begin(config, topics)          # plan: snapshots and offsets, read together
    run.committed / run.pinned                      #   where each partition resumes / must end
    writers = run.writers(arrow_schema, error_schema)   # tables created or their schema checked;
                                                    #   picklable, shipped to the executors
    run.commit(files, offsets, run_id)              # publish: one commit per table

* **begin** loads each topic's table (``IcebergConfig.identifier``) and its error table once:
  the snapshot each commit will be conditional on and the offsets of that snapshot's
  ancestry are read from the same metadata, so they always belong together. ``committed`` is
  every topic's resume position (``{}`` for a new table). ``pinned`` lists the topics whose
  error table is ahead of their data table — a crash fell between a run's two commits: for
  such a topic the run must read **exactly** ``[committed, pinned)`` for every partition
  (a partition ``pinned`` does not name: nothing), so that it reproduces the crashed run's
  ranges, finds their errors already committed and commits only the data.
* **writers** creates the tables that do not exist yet (``iceberg.tables.auto-create-enabled``;
  partitioned by ``iceberg.tables.default-partition-by`` or the topic's own), checks the run's
  Arrow schema against each existing one (an incompatible change fails here, naming the field,
  before anything is written) and returns ``{topic: TopicWriters}``.
* **commit** commits, per table, the error table first, then the data table, each with the
  files the executors reported under its location (checked against their footers) and the
  table's topics' resume offsets (the previous ones, updated by ``offsets``). A table whose
  offsets did not move and that got no file gets no snapshot. A conflict
  (``IcebergCommitConflictError``) publishes nothing of that table; tables committed before it
  stay committed — each carries only its own topics' offsets, so the rerun resumes each from
  its own.

Several topics may share a table (``iceberg.table.<topic>.name``): its commit carries all of
their offsets and files. Not thread-safe: one driver thread runs a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.catalog import Catalog

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_commit import (
    DataFileMismatchError,
    IcebergTable,
    Offsets,
    PlannedCommit,
    snapshot_offsets,
)

# TopicWriters lives with the writer, so that an executor unpickling it imports no catalog.
from sluice.pipeline.table.iceberg_data_file import IcebergFileWriter, TopicWriters, WrittenFile
from sluice.pipeline.table.partition_spec import DEFAULT_PARTITION_BY, PartitionBy

__all__ = ["IcebergRun", "TopicWriters"]


@dataclass
class _Table:
    """One table of the run: its topics and what ``begin`` read of it."""

    identifier: str
    topics: list[str]
    table: IcebergTable
    snapshot_id: int | None = None
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    planned: PlannedCommit | None = None


@dataclass
class IcebergRun:
    """One run's tables (module doc). Build with ``begin``."""

    config: IcebergConfig
    catalog: Catalog
    data: dict[str, _Table]  # identifier -> table
    errors: dict[str, _Table]  # identifier -> error table
    committed: dict[str, dict[int, int]]
    pinned: dict[str, dict[int, int]]

    @classmethod
    def begin(cls, config: IcebergConfig, topics: Sequence[str]) -> IcebergRun:
        """Open the catalog and read each table's snapshot and offsets (module doc). Raises
        ``CatalogUnavailableError`` when the catalog does not answer."""
        catalog = config.open_catalog()
        data = _group(catalog, topics, config.identifier)
        errors = _group(catalog, topics, config.errors_identifier)
        committed: dict[str, dict[int, int]] = {}
        for table in data.values():
            committed |= {t: dict(table.offsets.get(t, {})) for t in table.topics}
        pinned: dict[str, dict[int, int]] = {}
        for table in errors.values():
            for topic in table.topics:
                theirs = table.offsets.get(topic, {})
                mine = committed.get(topic, {})
                if any(o > mine.get(p, -1) for p, o in theirs.items()):
                    pinned[topic] = dict(theirs)
        return cls(config, catalog, data, errors, committed, pinned)

    def writers(
        self, arrow_schema: pa.Schema, error_schema: pa.Schema | None = None
    ) -> dict[str, TopicWriters]:
        """Create missing tables, check the schema against existing ones, and return each
        topic's writers (module doc). Raises ``IncompatibleTableSchemaError`` naming the
        field, ``TableMissingError``, ``InvalidPartitionByError``; nothing is written then."""
        data = self._prepare(self.data, arrow_schema)
        errors = (
            self._prepare(self.errors, error_schema, errors=True)
            if error_schema is not None
            else {}
        )
        return {
            topic: TopicWriters(data[topic], errors.get(topic))
            for table in self.data.values()
            for topic in table.topics
        }

    def _prepare(
        self, tables: dict[str, _Table], schema: pa.Schema, *, errors: bool = False
    ) -> dict[str, IcebergFileWriter]:
        writers: dict[str, IcebergFileWriter] = {}
        for table in tables.values():
            # The partition spec of a new table: its first topic's (topics sharing a table
            # share its spec; a conflicting per-topic spec is the configuration's problem).
            # An error table has no value fields to partition by (undecodable values): it is
            # partitioned by the day of the Kafka timestamp, whatever the data table's spec.
            partition_by = (
                PartitionBy.parse(DEFAULT_PARTITION_BY)
                if errors
                else self.config.partition_by(table.topics[0])
            )
            planned = table.table.plan(
                schema,
                partition_by,
                auto_create=self.config.auto_create,
                evolve_schema=self.config.evolve_schema,
                expected_snapshot=table.snapshot_id,
            )
            table.planned = planned
            writers |= {topic: planned.writer for topic in table.topics}
        return writers

    def commit(
        self,
        files: Sequence[WrittenFile],
        offsets: Offsets,
        run_id: str,
        *,
        between: Callable[[], None] | None = None,
    ) -> dict[str, int | None]:
        """Commit every table (module doc): ``files`` are every data and error file the
        executors reported, each committed to the table whose location holds it; ``offsets``
        the run's resume position per topic. Returns ``{identifier: new snapshot id, or None
        when the table got no snapshot}``. A file under no table of the run raises
        ``DataFileMismatchError`` before any commit. ``between`` runs after the error tables'
        commits and before the data tables' (the load's crash point there)."""
        tables = [t for t in (*self.errors.values(), *self.data.values()) if t.planned]
        assert len(tables) >= len(self.data), "writers() first"
        routed: dict[str, list[WrittenFile]] = {t.identifier: [] for t in tables}
        for written in files:
            owner = next((t for t in tables if _holds(t, written.path)), None)
            if owner is None:
                raise DataFileMismatchError(
                    f"data file {written.path}: expected it under a table of this run "
                    f"({', '.join(sorted(routed))}), found it under none"
                )
            routed[owner.identifier].append(written)
        done: dict[str, int | None] = {}
        for table in tables:  # the error tables first (module doc)
            if table.identifier in self.errors:
                done[table.identifier] = self._commit(table, routed[table.identifier], offsets,
                                                      run_id, errors=True)  # fmt: skip
        if between is not None:
            between()
        for table in tables:
            if table.identifier not in self.errors:
                done[table.identifier] = self._commit(table, routed[table.identifier], offsets,
                                                      run_id, errors=False)  # fmt: skip
        return done

    def _commit(
        self,
        table: _Table,
        mine: Sequence[WrittenFile],
        offsets: Offsets,
        run_id: str,
        *,
        errors: bool,
    ) -> int | None:
        assert table.planned is not None
        resume = {t: {**table.offsets.get(t, {}), **offsets.get(t, {})} for t in table.topics}
        if not mine and resume == {t: table.offsets.get(t, {}) for t in table.topics}:
            return None  # nothing read, nothing moved
        new: int | None = table.planned.commit(mine, resume, run_id, skip_if_committed=errors)
        return new


def _holds(table: _Table, path: str) -> bool:
    assert table.planned is not None
    return path.startswith(table.planned.writer.location + "/")


def _group(
    catalog: Catalog, topics: Sequence[str], name: Callable[[str], str]
) -> dict[str, _Table]:
    tables: dict[str, _Table] = {}
    for topic in topics:
        identifier = name(topic)
        if identifier not in tables:
            table = IcebergTable(catalog, identifier)
            loaded = table.load()
            snapshot_id, offsets = None, {}
            if loaded is not None:
                snapshot_id = loaded.metadata.current_snapshot_id
                offsets = snapshot_offsets(loaded)[1]
            tables[identifier] = _Table(identifier, [], table, snapshot_id, offsets)
        tables[identifier].topics.append(topic)
    return tables
