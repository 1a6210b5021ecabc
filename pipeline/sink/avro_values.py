"""Struct values as Confluent-framed Avro: the sink's ``valueFormat=avro``.

The other direction of ``sluice.pipeline.source.avro_columns`` (which decodes framed values
into typed columns). The writer schema is chosen on the driver (``writer_schema``);
``AvroValueEncoder.encode`` writes one value as the Confluent wire format
(``sluice.schemas.serde``: magic byte 0, the 4-byte schema id, the Avro binary). Values come
from Arrow's ``to_pylist``; Arrow gives a map as a list of ``(key, value)`` pairs, which Avro
wants as a dict, so maps are converted (recursively, following the Arrow type; the JSON and
Protobuf encoders use the same conversion). Timestamps arrive as timezone-aware
``datetime``s, dates as ``date``s, decimals as ``Decimal``s — what fastavro takes for the
logical types. A value that does not fit the schema raises
``sluice.schemas.errors.UnencodableRecordError`` and fails the task.

An ``AvroValueEncoder`` is used by one task thread.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from fastavro import parse_schema, schemaless_writer

from sluice.pipeline.sink.writer_schema import WriterSchema
from sluice.schemas.errors import UnencodableRecordError
from sluice.schemas.serde import encode_header

__all__ = ["AvroValueEncoder", "arrow_to_python"]


Converter = Callable[[Any], Any]


def arrow_to_python(arrow_type: pa.DataType) -> Converter | None:
    """A function turning ``to_pylist``'s value of ``arrow_type`` into what fastavro takes (a
    map as a dict, not ``(key, value)`` pairs), or ``None`` when it is fine as is."""
    if pa.types.is_map(arrow_type):
        inner = arrow_to_python(arrow_type.item_type)
        if inner is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: inner(x) for k, x in v}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        item = arrow_to_python(arrow_type.value_type)
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    if pa.types.is_struct(arrow_type):
        fixes = [
            (arrow_type.field(i).name, c)
            for i in range(arrow_type.num_fields)
            if (c := arrow_to_python(arrow_type.field(i).type)) is not None
        ]
        if not fixes:
            return None

        def record(v: Any) -> Any:
            if v is None:
                return None
            out = dict(v)
            for name, conv in fixes:
                out[name] = conv(out.get(name))
            return out

        return record
    return None


class AvroValueEncoder:
    """Struct values (Arrow) -> Confluent-framed Avro bytes; one per task, on the executor."""

    def __init__(self, schema: WriterSchema, value_type: pa.DataType) -> None:
        self.schema = schema
        self._parsed = parse_schema(json.loads(schema.text))
        self._header = encode_header(schema.schema_id)
        self._convert = arrow_to_python(value_type)

    def encode_column(self, column: pa.Array) -> list[bytes | None]:
        """Every value of ``column`` framed; a null value stays null (a tombstone)."""
        values = column.to_pylist()
        if self._convert is not None:
            values = [self._convert(v) for v in values]
        return [None if v is None else self.encode(v) for v in values]

    def encode(self, record: Any) -> bytes:
        out = io.BytesIO()
        out.write(self._header)
        try:
            schemaless_writer(out, self._parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise UnencodableRecordError(
                f"value does not match writer schema {self.schema.describe()}: {exc}"
            ) from exc
        return out.getvalue()
