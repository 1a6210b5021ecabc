"""A table's Iceberg schema from the load's Arrow schema, and the check of each change to it.

The columns of a topic's table are the load's Arrow columns — the typed Avro fields (or
``value``) plus the Kafka ones (``key``, ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType``, ``headers``) — with Iceberg field ids. ``TableSchema.for_new_table`` gives a
new table's schema (ids assigned from 1 in order, nested ones after, by pyiceberg's
``assign_fresh_schema_ids``); ``SchemaChange.between`` compares a table's current schema with
a run's Arrow schema *by name*, before anything is written, and says what the commit does:

* a field only in the run's schema is **added** as an optional column in the same commit as
  the data (``UpdateSchema.union_by_name``), with a new id. Old data files do not hold that
  id, so readers project **null** for their rows — not the Avro default: an Iceberg v2 table
  has no per-column default for rows written before the column existed (v3's
  ``initial-default`` is that, and pyiceberg cannot yet write v3 tables), so the only value
  every reader (Spark, Trino, DuckDB, pyiceberg) agrees on for old rows is null;
* a type Iceberg may **widen** to the run's type (``int`` → ``long``, ``float`` → ``double``,
  a decimal's precision up) is promoted; the field keeps its id; a run whose type the
  table's widens (an ``int`` into a column already ``long``) changes nothing: the writer casts;
* anything else — another type, a required field added to a table with rows, a required
  field the run no longer writes — is **incompatible**: ``IncompatibleTableSchemaError`` names the
  field, the table's type and the run's, and nothing has been written yet.

Nested struct fields are compared the same way, by dotted name; list and map element types
must be equal. Instances are immutable and thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ResolveError
from pyiceberg.schema import Schema, assign_fresh_schema_ids, promote
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

__all__ = ["IncompatibleTableSchemaError", "SchemaChange", "TableSchema"]


class IncompatibleTableSchemaError(ValueError):
    """A run's columns cannot be written to the table: the message names the field."""


@dataclass(frozen=True)
class TableSchema:
    """Conversions between a load's Arrow schema and an Iceberg schema."""

    @staticmethod
    def from_arrow(arrow: pa.Schema) -> Schema:
        """``arrow`` as an Iceberg schema without meaningful ids (for comparison by name)."""
        return Catalog._convert_schema_if_needed(arrow)  # noqa: SLF001 — pyiceberg's own converter

    @staticmethod
    def for_new_table(arrow: pa.Schema) -> Schema:
        """A new table's schema: ``arrow``'s columns with fresh Iceberg field ids."""
        return assign_fresh_schema_ids(TableSchema.from_arrow(arrow))


@dataclass(frozen=True)
class SchemaChange:
    """What a commit of data with the run's schema does to the table's schema: the dotted
    names of the ``added`` columns and the ``promoted`` ones (``name: int -> long``)."""

    added: tuple[str, ...] = ()
    promoted: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.added and not self.promoted

    @classmethod
    def between(cls, table: Schema, arrow: pa.Schema, *, table_has_rows: bool) -> SchemaChange:
        """The change from the table's ``table`` schema to the run's ``arrow`` columns.

        Raises ``IncompatibleTableSchemaError`` naming the first field that cannot be written."""
        added: list[str] = []
        promoted: list[str] = []
        _compare(
            table.as_struct(),
            TableSchema.from_arrow(arrow).as_struct(),
            "",
            table_has_rows,
            added,
            promoted,
        )
        return cls(tuple(added), tuple(promoted))

    def describe(self) -> str:
        parts = [f"adds {', '.join(self.added)}"] if self.added else []
        parts += [f"widens {', '.join(self.promoted)}"] if self.promoted else []
        return "; ".join(parts) or "no change"


def _compare(
    table: StructType,
    run: StructType,
    prefix: str,
    has_rows: bool,
    added: list[str],
    promoted: list[str],
) -> None:
    run_names = {f.name for f in run.fields}
    for old in table.fields:
        if old.name not in run_names and old.required:
            raise IncompatibleTableSchemaError(
                f"field {prefix}{old.name}: the table requires it ({old.field_type}), "
                "the run's schema has no such field"
            )
    by_name = {f.name: f for f in table.fields}
    for new in run.fields:
        name = prefix + new.name
        old_field = by_name.get(new.name)
        if old_field is None:
            if new.required and has_rows:
                raise IncompatibleTableSchemaError(
                    f"field {name}: expected a new field to be optional (the table's rows "
                    f"have no value for it), found a required {new.field_type}"
                )
            added.append(name)
            continue
        _compare_field(old_field, new, name, has_rows, added, promoted)


def _compare_field(
    old: NestedField,
    new: NestedField,
    name: str,
    has_rows: bool,
    added: list[str],
    promoted: list[str],
) -> None:
    if new.required and not old.required and has_rows:
        raise IncompatibleTableSchemaError(
            f"field {name}: the table's column is optional (rows may be null), "
            "the run's schema requires it"
        )
    if isinstance(old.field_type, StructType) and isinstance(new.field_type, StructType):
        _compare(old.field_type, new.field_type, name + ".", has_rows, added, promoted)
        return
    if _same_type(old.field_type, new.field_type):
        return
    if _widens_to(new.field_type, old.field_type):
        return  # the run's type is narrower (an int into a column widened to long): cast up
    try:
        promote(old.field_type, new.field_type)
    except ResolveError:
        raise IncompatibleTableSchemaError(
            f"field {name}: the table's type is {old.field_type}, the run's is "
            f"{new.field_type}, which Iceberg cannot widen it to"
        ) from None
    promoted.append(f"{name}: {old.field_type} -> {new.field_type}")


def _widens_to(narrow: IcebergType, wide: IcebergType) -> bool:
    if not (narrow.is_primitive and wide.is_primitive):
        return False
    try:
        promote(narrow, wide)
    except ResolveError:
        return False
    return True


def _same_type(old: IcebergType, new: IcebergType) -> bool:
    """Equal types, ignoring the field ids of nested types (the run's are not assigned)."""
    if old.is_primitive or new.is_primitive:
        return old == new
    old_fields = _children(old)
    new_fields = _children(new)
    return (
        type(old) is type(new)
        and len(old_fields) == len(new_fields)
        and all(
            a.name == b.name and a.required == b.required and _same_type(a.field_type, b.field_type)
            for a, b in zip(old_fields, new_fields, strict=True)
        )
    )


def _children(kind: IcebergType) -> list[NestedField]:
    if isinstance(kind, StructType):
        return list(kind.fields)
    if isinstance(kind, ListType):
        return [kind.element_field]
    if isinstance(kind, MapType):
        return [kind.key_field, kind.value_field]
    return []
