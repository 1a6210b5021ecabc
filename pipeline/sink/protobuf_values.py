"""Struct values as Confluent-framed Protobuf: the sink's ``valueFormat=protobuf``.

The other direction of ``sluice.pipeline.source.protobuf_columns``. The writer schema's
message (``valueSchemaMessage``, default the file's first; ``protobuf_descriptors.
message_class``) is filled from each struct value and framed as confluent-kafka's
``ProtobufSerializer`` frames it: magic byte 0, the 4-byte schema id, the message's indexes
(``[0]`` as the single byte 0), the message's bytes.

Arrow's values fill fields by name, the inverse of the source's mapping: a struct a message, a
list a repeated field, a map a map, a string an enum (by its value's name), a timestamp a
``google.protobuf.Timestamp``, a value a wrapper (``google.protobuf.Int64Value`` ...), a
decimal a 64-bit unsigned field, JSON text a ``google.protobuf.Struct`` / ``Value`` /
``ListValue``. A null field is left unset. A value that does not fit (a field the message
lacks, a number out of range, an enum name it does not know) raises
``sluice.schemas.errors.UnencodableRecordError`` and fails the task.

A ``ProtobufValueEncoder`` is used by one task thread.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor

from sluice.pipeline.sink.avro_values import arrow_to_python
from sluice.pipeline.sink.protobuf_descriptors import encode_message_indexes, indexes_of
from sluice.pipeline.sink.writer_schema import WriterSchema, message_of
from sluice.schemas.errors import UnencodableRecordError
from sluice.schemas.serde import encode_header

__all__ = ["ProtobufValueEncoder", "fill_message"]

_JSON_MESSAGES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    """``value`` as ``field`` (not a message) takes it: an enum by name, a decimal as int."""
    if field.enum_type is not None and isinstance(value, str):
        found = field.enum_type.values_by_name.get(value)
        if found is None:
            raise ValueError(f"{field.full_name}: expected a value of the enum, found {value!r}")
        return found.number
    return int(value) if isinstance(value, decimal.Decimal) else value


def _fill_nested(target: Any, value: Any) -> None:
    """Fill ``target`` (a message) from ``value``: a dict, or a well-known type's value."""
    name = target.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp" and isinstance(value, dt.datetime):
        target.FromDatetime(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
    elif name in _JSON_MESSAGES and isinstance(value, str):
        from google.protobuf import json_format

        json_format.Parse(value, target)
    elif name.startswith("google.protobuf.") and not isinstance(value, dict):  # a wrapper
        field = target.DESCRIPTOR.fields_by_name["value"]
        target.value = _scalar(field, value)
    else:
        fill_message(target, value)


def fill_message(message: Any, value: dict[str, Any]) -> Any:
    """Set ``message``'s fields from ``value`` (field name -> Python value; see the module
    doc); a null leaves the field unset. Returns ``message``."""
    fields = message.DESCRIPTOR.fields_by_name
    for name, item in value.items():
        if item is None:
            continue
        field = fields.get(name)
        if field is None:
            raise ValueError(f"{message.DESCRIPTOR.full_name} has no field {name!r}")
        target: Any = getattr(message, name) if field.is_repeated else None
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            for key, element in item.items():
                if value_field.message_type is not None:
                    _fill_nested(target[key], element)
                else:
                    target[key] = _scalar(value_field, element)
        elif field.is_repeated:
            for element in item:
                if entry is not None:
                    _fill_nested(target.add(), element)
                else:
                    target.append(_scalar(field, element))
        elif entry is not None:
            _fill_nested(getattr(message, name), item)
        else:
            setattr(message, name, _scalar(field, item))
    return message


class ProtobufValueEncoder:
    """Struct values (Arrow) -> Confluent-framed Protobuf; one per task, on the executor."""

    def __init__(self, schema: WriterSchema, value_type: pa.DataType) -> None:
        self.schema = schema
        self._class = message_of(schema)
        indexes = indexes_of(self._class.DESCRIPTOR)
        self._header = encode_header(schema.schema_id) + encode_message_indexes(indexes)
        self._convert = arrow_to_python(value_type)

    def encode_column(self, column: pa.Array) -> list[bytes | None]:
        """Every value of ``column`` framed; a null value stays null (a tombstone)."""
        values = column.to_pylist()
        if self._convert is not None:
            values = [self._convert(v) for v in values]
        return [None if v is None else self.encode(v) for v in values]

    def encode(self, record: dict[str, Any]) -> bytes:
        try:
            message = fill_message(self._class(), record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise UnencodableRecordError(
                f"value does not match writer schema {self.schema.describe()} message "
                f"{self._class.DESCRIPTOR.full_name}: {exc}"
            ) from exc
        return self._header + bytes(message.SerializeToString())
