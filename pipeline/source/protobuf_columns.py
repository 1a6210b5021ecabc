"""Protobuf values as typed columns: ``valueFormat=protobuf``.

A value is Confluent-framed Protobuf, as confluent-kafka's ``ProtobufSerializer`` writes it::

    offset  size  field
    0       1     magic byte, 0
    1       4     schema id, big-endian (the writer schema: a .proto file)
    5       ...   the message indexes: a zigzag varint count n, then n zigzag varints, the
                  path from the file's top-level messages through nested ones to the value's
                  message type; a count of 0 alone means [0], the file's first message
    ...           the message, Protobuf binary

The framing (message indexes) and the message classes are
``sluice.pipeline.sink.protobuf_descriptors``'s, shared with the sink. The reader schema (a
``.proto`` file, parsed by ``sluice.schemas.protobuf_schema`` through ``registry_schemas``)
and the message named by ``valueSchemaMessage`` (its full name; default the file's first
message, as Confluent's default) give the columns. Each record's header names
its writer schema and message: the id must be a Protobuf schema the registry knows and the
indexes a message of it with the reader message's full name; the body is then parsed with the
*reader's* message class — Protobuf's own evolution rule (fields match by number; fields the
reader does not know are skipped, fields the writer did not set get their defaults).

Type mapping (``message_type``; Spark's ``from_protobuf`` where it has one)::

    Protobuf                                    Spark
    message                                     struct (fields in declaration order)
    repeated T                                  array<T>, not null (empty when unset)
    map<K, V>                                   map<K, V>, not null
    int32, sint32, sfixed32                     int
    int64, sint64, sfixed64, uint32, fixed32    bigint
    uint64, fixed64                             decimal(20,0): every value fits, none wraps
    float / double / bool / string / bytes      float / double / boolean / string / binary
    enum                                        string: the value's name (its number when the
                                                reader's enum does not name it)
    google.protobuf.Timestamp                   timestamp
    google.protobuf.*Value wrappers             the wrapped scalar, nullable
    google.protobuf.Struct, Value, ListValue    string: the JSON text
    a message inside itself (recursion)         UnsupportedProtobufSchemaError on the driver

Nullability: a field with presence (a message, ``optional``, a oneof member, proto2's
optional) is nullable and null when unset; a proto3 scalar without presence is its value
(0, "", false when unset), never null. Each oneof member is a column of its own.

An undecodable record, beside the framing errors of ``typed_columns``: a schema id of another
type (``WrongSchemaTypeError``), message indexes that are cut short or name no message
(``MessageIndexError``), a message other than the reader's (``WrongMessageTypeError``), or a
body that does not parse (``UndecodableProtobufError``).

Per-process caches behind locks; a decoder is used by one thread.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice.pipeline.sink.protobuf_descriptors import (
    UnknownMessageError,
    message_class,
    message_indexes,
    message_name,
)
from sluice.pipeline.sink.registry_schemas import directory
from sluice.pipeline.source.json_schema_columns import WrongSchemaTypeError
from sluice.pipeline.source.typed_columns import (
    ReaderSchema,
    UnsupportedValueSchemaError,
    ValueDecodeError,
)

__all__ = [
    "ProtobufValueDecoder",
    "UndecodableProtobufError",
    "UnsupportedProtobufSchemaError",
    "WrongMessageTypeError",
    "message_indexes",
    "message_type",
    "protobuf_value_type",
    "reader_message",
]


class UnsupportedProtobufSchemaError(UnsupportedValueSchemaError):
    """The reader message has no column type (recursion) or is not in the reader schema."""


class WrongMessageTypeError(ValueDecodeError):
    """The record's message is not the reader's."""


class UndecodableProtobufError(ValueDecodeError):
    """The body does not parse as the reader's message."""


def reader_message(reader: ReaderSchema, registry_url: str, message: str | None) -> Descriptor:
    """The descriptor of the reader's message (``message``, or the first of the file)."""
    return _reader_class(reader, registry_url, message).DESCRIPTOR  # type: ignore[no-any-return]


def _reader_class(reader: ReaderSchema, registry_url: str, message: str | None) -> Any:
    registered = directory(registry_url).by_id(reader.schema_id)
    try:
        return message_class(registered, message)
    except UnknownMessageError as exc:
        raise UnsupportedProtobufSchemaError(str(exc)) from None


# -- the type mapping ---------------------------------------------------------------------------

Convert = Callable[[Any], Any]
"""A Python protobuf value -> what ``pyarrow.array`` takes for the column."""

_T = FieldDescriptor
_SCALARS: dict[int, DataType] = {
    _T.TYPE_INT32: IntegerType(),
    _T.TYPE_SINT32: IntegerType(),
    _T.TYPE_SFIXED32: IntegerType(),
    _T.TYPE_INT64: LongType(),
    _T.TYPE_SINT64: LongType(),
    _T.TYPE_SFIXED64: LongType(),
    _T.TYPE_UINT32: LongType(),
    _T.TYPE_FIXED32: LongType(),
    _T.TYPE_UINT64: DecimalType(20, 0),
    _T.TYPE_FIXED64: DecimalType(20, 0),
    _T.TYPE_FLOAT: FloatType(),
    _T.TYPE_DOUBLE: DoubleType(),
    _T.TYPE_BOOL: BooleanType(),
    _T.TYPE_STRING: StringType(),
    _T.TYPE_BYTES: BinaryType(),
}
_UNSIGNED64 = (_T.TYPE_UINT64, _T.TYPE_FIXED64)
_WRAPPERS = {
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}
_JSON_MESSAGES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


@dataclass(frozen=True)
class _Column:
    type: DataType
    nullable: bool
    convert: Convert


def _identity(value: Any) -> Any:
    return value


def _timestamp(message: Any) -> Any:
    micros = message.seconds * 1_000_000 + message.nanos // 1000
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)


def _json(message: Any) -> Any:
    from google.protobuf import json_format

    return json_format.MessageToJson(message, indent=None)


def _enum(field: FieldDescriptor) -> Convert:
    enum = field.enum_type
    assert enum is not None

    def convert(number: Any) -> Any:
        value = enum.values_by_number.get(number)
        return value.name if value is not None else str(number)

    return convert


def _single(field: FieldDescriptor, path: str, seen: tuple[str, ...]) -> tuple[DataType, Convert]:
    """The type and conversion of one value of ``field`` (an element, for repeated ones)."""
    if field.type == _T.TYPE_ENUM:
        return StringType(), _enum(field)
    if field.type in (_T.TYPE_MESSAGE, _T.TYPE_GROUP):
        assert field.message_type is not None
        return _message(field.message_type, path, seen)
    if field.type in _UNSIGNED64:
        return _SCALARS[field.type], decimal.Decimal
    return _SCALARS[field.type], _identity


def _message(message: Descriptor, path: str, seen: tuple[str, ...]) -> tuple[DataType, Convert]:
    name = message.full_name
    if name == "google.protobuf.Timestamp":
        return TimestampType(), _timestamp
    if name in _WRAPPERS:
        kind, inner = _single(message.fields_by_name["value"], path, seen)
        return kind, lambda m: inner(m.value)
    if name in _JSON_MESSAGES:
        return StringType(), _json
    if name in seen:
        raise UnsupportedProtobufSchemaError(
            f"{path}: expected a non-recursive message, found {name} inside itself "
            f"({' > '.join(seen)})"
        )
    columns = [(f, _field(f, f"{path}.{f.name}", (*seen, name))) for f in message.fields]
    spark = StructType([StructField(f.name, c.type, c.nullable) for f, c in columns])

    def struct(value: Any) -> Any:
        out: dict[str, Any] = {}
        for f, column in columns:
            if column.nullable and not value.HasField(f.name):
                out[f.name] = None
            else:
                out[f.name] = column.convert(getattr(value, f.name))
        return out

    return spark, struct


def _field(field: FieldDescriptor, path: str, seen: tuple[str, ...]) -> _Column:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        key_type, key = _single(message.fields_by_name["key"], f"{path}{{}}", seen)
        value_type, value = _single(message.fields_by_name["value"], f"{path}{{}}", seen)
        return _Column(
            MapType(key_type, value_type, False),
            False,
            lambda m: {key(k): value(v) for k, v in m.items()},
        )
    kind, convert = _single(field, path, seen)
    if field.is_repeated:
        return _Column(ArrayType(kind, False), False, lambda items: [convert(x) for x in items])
    return _Column(kind, field.has_presence, convert)


def message_type(message: Descriptor) -> tuple[StructType, Convert]:
    """The Spark struct of ``message`` and the conversion of a parsed message to its dict."""
    spark, convert = _message(message, "value", ())
    if not isinstance(spark, StructType):
        raise UnsupportedProtobufSchemaError(
            f"value: expected a message of fields, found {message.full_name}"
        )
    return spark, convert


def protobuf_value_type(reader: ReaderSchema, registry_url: str, message: str | None) -> StructType:
    """The value's struct for a Protobuf reader schema and message (module doc)."""
    return message_type(reader_message(reader, registry_url, message))[0]


# -- decoding -----------------------------------------------------------------------------------


class ProtobufValueDecoder:
    """``ValueDecoder`` of Protobuf values (module doc); one per split."""

    what = "Protobuf"

    def __init__(self, registry_url: str, reader: ReaderSchema, message: str | None) -> None:
        self.schemas = directory(registry_url)
        self._class = _reader_class(reader, registry_url, message)
        self._name = self._class.DESCRIPTOR.full_name
        self._convert = message_type(self._class.DESCRIPTOR)[1]
        self._names: dict[tuple[int, tuple[int, ...]], str] = {}

    def _writer_message(self, schema_id: int, indexes: list[int]) -> str:
        key = (schema_id, tuple(indexes))
        name = self._names.get(key)
        if name is None:
            registered = self.schemas.by_id(schema_id)
            if registered.schema_type != "PROTOBUF":
                raise WrongSchemaTypeError(
                    f"schema id {schema_id} is a {registered.schema_type} schema, expected "
                    "PROTOBUF (valueFormat=protobuf)"
                )
            name = self._names[key] = message_name(registered, indexes)
        return name

    def decode(self, data: bytes) -> dict[str, Any]:
        from google.protobuf.message import DecodeError

        from sluice.schemas.serde import decode_header

        schema_id, rest = decode_header(data)
        indexes, body = message_indexes(rest)
        written = self._writer_message(schema_id, indexes)
        if written != self._name:
            raise WrongMessageTypeError(
                f"expected message {self._name} (the reader's), found {written} (schema id "
                f"{schema_id}, message indexes {indexes})"
            )
        message = self._class()
        try:
            message.ParseFromString(bytes(body))
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise UndecodableProtobufError(
                f"Protobuf body of {len(body)} bytes does not parse as {self._name} (schema id "
                f"{schema_id}): {exc}"
            ) from None
        converted = self._convert(message)
        assert isinstance(converted, dict)
        return converted
