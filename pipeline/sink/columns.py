"""The columns a DataFrame gives the ``sluice`` sink, checked on the driver before any write.

Spark's Kafka sink contract (``KafkaWriter.validateQuery``), column by column; a column is
found by its exact name, and any other column is ignored::

    column      type                                      when absent
    value       string or binary (a struct with           error: MissingValueColumnError
                a typed valueFormat); null = a tombstone
    key         string or binary                          null keys
    topic       string                                    the topic option; with neither,
                                                          MissingTopicError
    partition   int                                       the producer's partitioner
    headers     array<struct<key:string,value:binary>>    no headers
    timestamp   timestamp or double (seconds)             the producer's clock

The ``topic`` option wins over a ``topic`` column, whose type is then not checked (Spark uses
the option as a literal and never looks at the column). Types are compared as Spark's
``DataTypeUtils.sameType`` does: nullability and field names aside, except that a header
struct's fields must be ``key`` and ``value`` (the executor reads them by name). A wrong type
raises ``ColumnTypeError`` naming the column, the type found and the types accepted, as Spark's
"<name> attribute unsupported type <found>. <name> must be a(n) <types>".

Immutable values; pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "HEADERS_TYPE",
    "ColumnTypeError",
    "MissingTopicError",
    "MissingValueColumnError",
    "SinkColumns",
    "SinkColumnsError",
]

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
"""Spark's ``KafkaRecordToRowConverter.headersType``."""


class SinkColumnsError(ValueError):
    """The DataFrame's columns do not fit the Kafka sink contract (see the module doc)."""


class MissingValueColumnError(SinkColumnsError):
    """The DataFrame has no ``value`` column."""


class ColumnTypeError(SinkColumnsError):
    """A sink column has a type the sink cannot write; the message names column and type."""


class MissingTopicError(SinkColumnsError):
    """Neither the ``topic`` option nor a ``topic`` column says where rows go."""


def _same(a: DataType, b: DataType) -> bool:
    """Spark's ``sameType``: equal up to nullability (and, for structs, field names)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same(a.elementType, b.elementType)
    return type(a) is type(b)


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which sink columns a DataFrame has, and how to read each; picklable.

    ``value`` / ``key`` are ``"string"``, ``"binary"``, ``"struct"`` (value only, a typed format) or
    ``None`` (absent key); ``timestamp`` is ``"timestamp"``, ``"double"`` or ``None``.
    ``topic_column`` is whether rows take their topic from a ``topic`` column (no option).
    """

    value: str
    key: str | None
    topic_column: bool
    partition: bool
    headers: bool
    timestamp: str | None

    @classmethod
    def of(cls, schema: Any, *, topic_option: str | None, typed: bool) -> SinkColumns:
        """Check ``schema`` (a ``StructType``) against the contract; the columns to write.

        ``typed``: a typed ``valueFormat`` (avro, json-schema, protobuf), where ``value`` must
        be a struct.
        """
        if not isinstance(schema, StructType):
            raise SinkColumnsError(f"expected a StructType schema, found {type(schema).__name__}")
        fields = {f.name: f.dataType for f in schema.fields}
        if "value" not in fields:
            listed = ", ".join(schema.names) or "none"
            raise MissingValueColumnError(
                f"Required attribute 'value' not found: expected a column named value "
                f"({'struct' if typed else 'string or binary'}), found columns {listed}"
            )
        if typed:
            value = _kind(fields, "value", {"struct": StructType()}, "struct (typed valueFormat)")
        else:
            value = _kind(fields, "value", {"string": StringType(), "binary": BinaryType()})
        key = _kind(fields, "key", {"string": StringType(), "binary": BinaryType()})
        topic_column = False
        if topic_option is None:
            if "topic" not in fields:
                raise MissingTopicError(
                    "topic option required when no 'topic' attribute is present: expected the "
                    "topic option or a topic column (string), found neither"
                )
            _kind(fields, "topic", {"string": StringType()})
            topic_column = True
        partition = _kind(fields, "partition", {"int": IntegerType()}) is not None
        headers = _kind(fields, "headers", {"headers": HEADERS_TYPE}, HEADERS_TYPE.simpleString())
        timestamp = _kind(
            fields, "timestamp", {"timestamp": TimestampType(), "double": DoubleType()}
        )
        return cls(value or "binary", key, topic_column, partition, headers is not None, timestamp)


def _kind(
    fields: dict[str, DataType],
    name: str,
    accepted: dict[str, DataType],
    described: str | None = None,
) -> str | None:
    """Which of ``accepted`` column ``name`` is (``None`` when absent), or ``ColumnTypeError``."""
    found = fields.get(name)
    if found is None:
        return None
    for kind, wanted in accepted.items():
        if isinstance(wanted, StructType) and not wanted.fields:  # any struct
            if isinstance(found, StructType):
                return kind
        elif _same(found, wanted):
            return kind
    expected = described or " or ".join(t.simpleString() for t in accepted.values())
    raise ColumnTypeError(
        f"{name} attribute unsupported type {found.simpleString()}: expected {name} to be "
        f"{expected}, found {found.simpleString()}"
    )
