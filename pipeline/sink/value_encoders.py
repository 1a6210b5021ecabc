"""The executor's encoder of a write's value format: struct values -> Confluent-framed bytes.

``value_encoder`` chooses by the writer schema's type: ``avro_values.AvroValueEncoder``
(AVRO), ``json_values.JsonValueEncoder`` (JSON), ``protobuf_values.ProtobufValueEncoder``
(PROTOBUF). Each is built once per task, on the executor, and used by its thread.
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from sluice.pipeline.sink.wire_formats import ValueFormat
from sluice.pipeline.sink.writer_schema import WriterSchema

__all__ = ["ValueEncoder", "value_encoder"]


class ValueEncoder(Protocol):
    """Struct values (Arrow) -> Confluent-framed bytes of one format; one per task."""

    def encode_column(self, column: pa.Array) -> list[bytes | None]: ...


def value_encoder(schema: WriterSchema, value_type: pa.DataType) -> ValueEncoder:
    """The encoder of ``schema``'s format for values of Arrow type ``value_type``."""
    # Imported here: a write imports one format's dependencies (jsonschema, protobuf), not all.
    if schema.schema_type == ValueFormat.JSON_SCHEMA.schema_type:
        from sluice.pipeline.sink.json_values import JsonValueEncoder

        return JsonValueEncoder(schema, value_type)
    if schema.schema_type == ValueFormat.PROTOBUF.schema_type:
        from sluice.pipeline.sink.protobuf_values import ProtobufValueEncoder

        return ProtobufValueEncoder(schema, value_type)
    from sluice.pipeline.sink.avro_values import AvroValueEncoder

    return AvroValueEncoder(schema, value_type)
