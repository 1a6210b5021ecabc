"""The typed value formats on the read side: ``valueFormat=avro|json-schema|protobuf``.

The formats are named once, by ``ValueFormat`` (``sluice.pipeline.sink.wire_formats``,
re-exported here). Each has a module of its own for the type mapping and the per-value
decoding — ``avro_columns`` (AVRO), ``json_schema_columns`` (JSON), ``protobuf_columns``
(PROTOBUF) — over what they share in ``typed_columns`` (reader schema, layout, batch decoder,
error table). This module chooses a format's module: ``resolve_reader`` (the registry's
reader schema, of the format's type), ``output_schema`` (the columns) and ``batch_decoder``
(the executor's decoder). The source, the nightly load and the console tools go through it.

The format modules are imported when a read of theirs is planned or decoded, not with this
module: the options' parsers import it, and ``jsonschema`` / protobuf cost about half a
second each to import.

Immutable; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from sluice.pipeline.sink.wire_formats import BINARY, VALUE_FORMATS, ValueFormat

if TYPE_CHECKING:
    from sluice.pipeline.source.typed_columns import OutputLayout, ReaderSchema, TypedBatchDecoder

__all__ = [
    "BINARY",
    "VALUE_FORMATS",
    "ValueFormat",
    "batch_decoder",
    "output_schema",
    "plan_read",
    "resolve_reader",
]


def resolve_reader(
    value_format: ValueFormat,
    registry_url: str,
    topics: Iterable[str] | None,
    *,
    subject: str | None = None,
    version: str | None = None,
    schema_id: int | None = None,
) -> ReaderSchema:
    """The reader schema of a read (``typed_columns.resolve_reader_schema``), of the format's
    type: a JSON Schema read refuses an Avro subject on the driver, before any task runs."""
    from sluice.pipeline.source.typed_columns import resolve_reader_schema

    return resolve_reader_schema(
        registry_url,
        topics,
        subject=subject,
        version=version,
        schema_id=schema_id,
        schema_type=value_format.schema_type,
        value_format=value_format.value,
    )


def output_schema(
    value_format: ValueFormat,
    registry_url: str,
    reader: ReaderSchema,
    *,
    nested: bool,
    include_headers: bool,
    message: str | None = None,
) -> OutputLayout:
    """The columns of a read: the format's mapping of ``reader`` beside Kafka's columns
    (``message``: Protobuf's value message, default the file's first)."""
    from sluice.pipeline.source.typed_columns import layout_for

    if value_format is ValueFormat.AVRO:
        from sluice.pipeline.source.avro_columns import avro_value_type

        value = avro_value_type(reader)
    elif value_format is ValueFormat.JSON_SCHEMA:
        from sluice.pipeline.source.json_schema_columns import json_value_type

        value = json_value_type(reader, registry_url)
    else:
        from sluice.pipeline.source.protobuf_columns import protobuf_value_type

        value = protobuf_value_type(reader, registry_url, message)
    return layout_for(reader, value, nested=nested, include_headers=include_headers)


class TypedRead(Protocol):
    """What a typed read names (``options.ValueOptions``; a protocol, as ``options`` imports
    this module)."""

    @property
    def value_format(self) -> ValueFormat: ...
    @property
    def registry_url(self) -> str: ...
    @property
    def subject(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def schema_id(self) -> int | None: ...
    @property
    def nested(self) -> bool: ...
    @property
    def message(self) -> str | None: ...


def plan_read(
    typed: TypedRead, topics: Iterable[str] | None, *, include_headers: bool
) -> tuple[ReaderSchema, OutputLayout]:
    """The driver's half of a typed read of ``topics``: its reader schema and its columns, as
    ``typed`` (the read's or the load's value options) asks — what the source and the nightly
    load both plan before any task runs."""
    reader = resolve_reader(
        typed.value_format,
        typed.registry_url,
        topics,
        subject=typed.subject,
        version=typed.version,
        schema_id=typed.schema_id,
    )
    layout = output_schema(
        typed.value_format,
        typed.registry_url,
        reader,
        nested=typed.nested,
        include_headers=include_headers,
        message=typed.message,
    )
    return reader, layout


def batch_decoder(
    value_format: ValueFormat,
    registry_url: str,
    reader: ReaderSchema,
    layout: OutputLayout,
    *,
    fail: bool,
    message: str | None = None,
) -> TypedBatchDecoder:
    """The executor's decoder of one split: raw batches -> (typed, errors)."""
    from sluice.pipeline.source.typed_columns import TypedBatchDecoder

    if value_format is ValueFormat.AVRO:
        from sluice.pipeline.source.avro_columns import AvroBatchDecoder

        return AvroBatchDecoder(registry_url, reader, layout, fail=fail)
    if value_format is ValueFormat.JSON_SCHEMA:
        from sluice.pipeline.source.json_schema_columns import JsonSchemaValueDecoder

        return TypedBatchDecoder(JsonSchemaValueDecoder(registry_url, reader), layout, fail=fail)
    from sluice.pipeline.source.protobuf_columns import ProtobufValueDecoder

    return TypedBatchDecoder(ProtobufValueDecoder(registry_url, reader, message), layout, fail=fail)
