"""``partition-by`` text: Iceberg partition transforms over a table's fields, parsed once.

The syntax is Iceberg's Kafka Connect sink's ``iceberg.tables.default-partition-by`` (and
Spark SQL's ``PARTITIONED BY``): a comma list of terms, each a transform over a top-level
field of the table::

    day(event_time), bucket(16, user_id), identity(country)

Transforms: ``identity(f)`` or a bare ``f``, ``year(f)``, ``month(f)``, ``day(f)``,
``hour(f)``, ``bucket(N, f)`` and ``truncate(W, f)`` (N, W positive). The default is
``day(timestamp)``: the day of the Kafka record's timestamp (``DEFAULT_PARTITION_BY``); a
value field such as ``event_time`` partitions by event time, so a late record lands in its
own day.

``PartitionBy.parse`` checks the syntax only; ``PartitionBy.spec(schema)`` binds the terms to
an Iceberg schema and checks that each field exists and that the transform applies to its
type (``day`` needs a date or timestamp, ``bucket`` no float). Every failure is an
``InvalidPartitionByError`` saying what was expected and what was found. Instances are
immutable and thread-safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# pyiceberg only where a spec is built: a Parquet load parses its configuration (which
# declares partition-by) without paying pyiceberg's import (about a quarter of a second).
if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import Transform

__all__ = ["DEFAULT_PARTITION_BY", "InvalidPartitionByError", "PartitionBy", "PartitionTerm"]

DEFAULT_PARTITION_BY = "day(timestamp)"
"""The day (UTC) of the Kafka record timestamp."""

_TERM = re.compile(
    r"^\s*(?:(?P<fn>[a-z]+)\s*\(\s*(?:(?P<n>\d+)\s*,\s*)?(?P<arg>[A-Za-z_][\w.]*)\s*\)"
    r"|(?P<bare>[A-Za-z_][\w.]*))\s*$"
)
_UNARY = {"identity", "year", "month", "day", "hour"}
_WITH_WIDTH = {"bucket", "truncate"}
# Iceberg's partition field names for each transform (Spark's and Java's: ts_day, id_bucket).
_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour",
           "bucket": "bucket", "truncate": "trunc"}  # fmt: skip


class InvalidPartitionByError(ValueError):
    """A ``partition-by`` text that does not parse, or does not fit the table's schema."""


@dataclass(frozen=True)
class PartitionTerm:
    """One transform over one field: ``transform`` is ``identity``, ``day``, ``bucket``...;
    ``width`` the ``N`` of ``bucket(N, f)`` / ``truncate(N, f)``, else ``None``."""

    transform: str
    field: str
    width: int | None = None

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.field})"
        return f"{self.transform}({self.field})"

    def iceberg_transform(self) -> Transform[Any, Any]:
        """The pyiceberg transform object."""
        from pyiceberg.transforms import (
            BucketTransform,
            DayTransform,
            HourTransform,
            IdentityTransform,
            MonthTransform,
            TruncateTransform,
            YearTransform,
        )

        simple: dict[str, Transform[Any, Any]] = {
            "identity": IdentityTransform(),
            "year": YearTransform(),
            "month": MonthTransform(),
            "day": DayTransform(),
            "hour": HourTransform(),
        }
        if self.transform == "bucket":
            assert self.width is not None
            return BucketTransform(num_buckets=self.width)
        if self.transform == "truncate":
            assert self.width is not None
            return TruncateTransform(width=self.width)
        return simple[self.transform]

    @property
    def name(self) -> str:
        """The partition field's name: ``event_time_day``, ``user_id_bucket``; identity keeps
        the source name, as Iceberg's Java and Spark writers name them."""
        if self.transform == "identity":
            return self.field
        return f"{self.field}_{_SUFFIX[self.transform]}"


@dataclass(frozen=True)
class PartitionBy:
    """A parsed ``partition-by`` list; ``str()`` gives it back in canonical form."""

    terms: tuple[PartitionTerm, ...]

    @classmethod
    def parse(cls, text: str) -> PartitionBy:
        """Parse ``text`` (blank: unpartitioned). Raises ``InvalidPartitionByError``."""
        terms: list[PartitionTerm] = []
        for raw in _split_terms(text):
            match = _TERM.match(raw)
            if match is None:
                raise InvalidPartitionByError(
                    f"partition-by: expected transform(field) or bucket(N, field), found {raw!r}"
                )
            if match["bare"]:
                terms.append(PartitionTerm("identity", match["bare"]))
                continue
            fn, width, arg = match["fn"], match["n"], match["arg"]
            if fn in _UNARY and width is None:
                terms.append(PartitionTerm(fn, arg))
            elif fn in _WITH_WIDTH and width is not None and int(width) > 0:
                terms.append(PartitionTerm(fn, arg, int(width)))
            else:
                expected = (
                    "identity, year, month, day, hour (one field) or bucket, truncate "
                    "(a positive N and a field)"
                )
                raise InvalidPartitionByError(f"partition-by: expected {expected}, found {raw!r}")
        names = [t.name for t in terms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidPartitionByError(
                f"partition-by: expected each term once, found {', '.join(duplicates)} twice"
            )
        return cls(tuple(terms))

    def __str__(self) -> str:
        return ", ".join(str(t) for t in self.terms)

    def spec(self, schema: Schema) -> PartitionSpec:
        """The Iceberg partition spec of these terms over ``schema`` (field ids from 1000, as
        Iceberg assigns them). Raises ``InvalidPartitionByError`` for a field the schema lacks
        or a transform that does not apply to the field's type."""
        from pyiceberg.partitioning import PartitionField, PartitionSpec

        fields = []
        for i, term in enumerate(self.terms):
            try:
                source = schema.find_field(term.field, case_sensitive=True)
            except ValueError:
                names = ", ".join(f.name for f in schema.fields)
                raise InvalidPartitionByError(
                    f"partition-by {term}: expected a field of the table ({names}), "
                    f"found no {term.field!r}"
                ) from None
            transform = term.iceberg_transform()
            if not transform.can_transform(source.field_type):
                raise InvalidPartitionByError(
                    f"partition-by {term}: expected a field {term.transform} applies to, "
                    f"found {term.field} of type {source.field_type}"
                )
            fields.append(
                PartitionField(
                    source_id=source.field_id,
                    field_id=1000 + i,
                    transform=transform,
                    name=term.name,
                )
            )
        return PartitionSpec(*fields, spec_id=0)


def _split_terms(text: str) -> list[str]:
    """Split at the commas outside parentheses (``bucket(16, id)`` is one term)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]
