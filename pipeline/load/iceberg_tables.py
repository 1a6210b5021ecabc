"""The nightly load's Iceberg side (``table.format=iceberg``): the run's tables, from the
driver's point of view, in the load's terms.

``sluice.pipeline.table.iceberg_run.IcebergRun`` does the protocol (plan from each table's
snapshot, write, one conditional commit per table); this module adapts it to the load:

* **topics**: the tables are the topics assigned at plan time (``topics``, or those
  ``subscribePattern`` matches now), so a run resumes every topic it is about to read;
* **pinning**: a topic whose error table got ahead of its data table (a crash between a
  run's two commits) reads exactly the crashed run's ranges, ``[committed, pinned)``;
* **schemas**: the run's Arrow schema — the typed layout's (``to_arrow_schema``) or the
  source's Kafka columns — and, for a typed load, the error table's;
* **errors**: a catalog that does not answer — at the plan, while the tables are created or
  checked, or at the commit — becomes an ``UnreachableError`` (exit 3) naming the catalog and
  its URI (password hidden); a PostgreSQL catalog gives up a connection after libpq's
  ``connect_timeout`` (``iceberg_catalog.CONNECT_TIMEOUT_S``, 10 s, unless the URI sets
  one). A table that is missing or incompatible, or a conflicting commit, becomes a
  ``LoadError`` (exit 1), naming what the table layer named. A catalog that stops answering
  *during* a commit leaves the outcome to the catalog (its swap is one conditional update):
  the rerun resumes from whatever snapshot is current, so nothing lands twice.

Functions only; for the driver's one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pyarrow as pa

from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.errors import LoadError, UnreachableError
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import ARROW_SCHEMA
from sluice.pipeline.source.typed_columns import ERROR_ARROW_SCHEMA, OutputLayout, ReaderSchema
from sluice.pipeline.table.iceberg_catalog import (
    CatalogUnavailableError,
    IcebergConfig,
    is_unavailable,
    one_line,
    redacted,
)
from sluice.pipeline.table.iceberg_commit import (
    DataFileMismatchError,
    IcebergCommitConflictError,
    TableMissingError,
)
from sluice.pipeline.table.iceberg_data_file import WrittenFile
from sluice.pipeline.table.iceberg_run import IcebergRun, TopicWriters
from sluice.pipeline.table.iceberg_schema import IncompatibleTableSchemaError
from sluice.pipeline.table.partition_spec import InvalidPartitionByError

__all__ = ["arrow_schemas", "begin", "check_catalog", "commit", "pin", "writers"]


@contextmanager
def _catalog_answering(config: IcebergConfig, doing: str) -> Iterator[None]:
    """Turn "the catalog did not answer" (at ``open_catalog`` or any later query) into an
    ``UnreachableError`` naming the catalog; anything else passes."""
    try:
        yield
    except CatalogUnavailableError as exc:
        raise UnreachableError(f"iceberg catalog, {doing}: {exc}") from None
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        uri = config.catalog_properties.get("uri", "")
        raise UnreachableError(
            f"iceberg catalog, {doing}: catalog {config.catalog_name} ({redacted(uri)}) "
            f"stopped answering: {one_line(exc)}"
        ) from None


def check_catalog(config: IcebergConfig) -> None:
    """Open the catalog once (what the preflight can do before Spark starts): an
    ``UnreachableError`` naming it when it does not answer within its connect timeout."""
    with _catalog_answering(config, "before the load"):
        config.open_catalog()


def begin(config: LoadConfig, consumer: Mapping[str, Any]) -> IcebergRun:
    """The run's tables for the topics assigned now (module doc): their snapshots and
    offsets. A catalog that does not answer is a ``LoadError``."""
    assert config.iceberg is not None
    if config.subscribe_pattern is None:
        topics = sorted(set(config.topics))
    else:
        with KafkaMetadata(consumer) as metadata:
            assigned, _ = metadata.assigned_bounds(config.strategy)
        topics = sorted({tp.topic for tp in assigned})
    with _catalog_answering(config.iceberg, "planning"):
        return IcebergRun.begin(config.iceberg, topics)


def pin(
    ranges: Sequence[OffsetRange],
    tables: Mapping[str, object],
    pinned: Mapping[str, Mapping[int, int]],
) -> list[OffsetRange]:
    """``ranges`` of the topics the run has tables for (``tables``: a topic that appeared
    since ``begin`` waits for the next run), each pinned topic's partitions ending where the
    crashed run ended (a partition its error table does not name: nothing to read), so the
    rerun reproduces the crashed run's ranges (``IcebergRun``)."""
    out = []
    for r in ranges:
        if r.topic not in tables:
            continue
        if r.topic in pinned:
            end = pinned[r.topic].get(r.partition, r.start)
            if not r.start <= end <= r.end:
                raise LoadError(
                    f"{r.topic}-{r.partition}: expected the error table's offset {end} within "
                    f"[{r.start}, {r.end}] (the data table's to the log end), found it outside"
                )
            r = replace(r, end=end)
        out.append(r)
    return out


def arrow_schemas(
    typed: tuple[ReaderSchema, OutputLayout] | None,
) -> tuple[pa.Schema, pa.Schema | None]:
    """The run's Arrow schema and, for a typed load (Avro, JSON Schema, Protobuf), its error
    table's."""
    if typed is None:
        return ARROW_SCHEMA, None
    from pyspark.sql.pandas.types import to_arrow_schema  # the driver has Spark

    return to_arrow_schema(typed[1].schema, timezone="UTC"), ERROR_ARROW_SCHEMA


def writers(
    run: IcebergRun, typed: tuple[ReaderSchema, OutputLayout] | None
) -> dict[str, TopicWriters]:
    """Create or check the tables (``IcebergRun.writers``); a refusal is a ``LoadError``
    before anything is read."""
    data, errors = arrow_schemas(typed)
    try:
        with _catalog_answering(run.config, "creating or checking the tables"):
            return run.writers(data, errors)
    except (
        IncompatibleTableSchemaError,
        TableMissingError,
        InvalidPartitionByError,
        IcebergCommitConflictError,
    ) as exc:
        raise LoadError(f"{type(exc).__name__}: {exc}") from None


def commit(
    run: IcebergRun,
    files: Sequence[tuple[str, int, int]],
    offsets: Mapping[str, Mapping[int, int]],
    run_id: str,
    between: Callable[[], None],
) -> dict[str, int | None]:
    """Commit every table (``IcebergRun.commit``; ``between`` runs between the error tables'
    commits and the data tables'). A conflict (its message names both snapshots) or a file
    that does not match its footer is a ``LoadError``."""
    written = [WrittenFile(path, size, rows) for path, size, rows in files]
    try:
        with _catalog_answering(run.config, "committing"):
            return run.commit(written, offsets, run_id, between=between)
    except (IcebergCommitConflictError, DataFileMismatchError) as exc:
        raise LoadError(f"{type(exc).__name__}: {exc}") from None
