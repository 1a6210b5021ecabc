"""Which parser reads a schema: the request's ``schemaType`` → the type's parsed schema.

``AVRO`` (the default) → :mod:`sluice.schemas.avro_schema`, ``JSON`` →
:mod:`sluice.schemas.json_schema`, ``PROTOBUF`` → :mod:`sluice.schemas.protobuf_schema`; any
other name is refused with 42201. Thread-safe.

References: an Avro schema sees the named types of the schemas it references (parsed first,
into the same name table); a JSON Schema's ``$ref`` to a reference name is kept as written (as
every non-local ``$ref``); a Protobuf schema imports each reference by its name.

The JSON Schema and Protobuf modules are imported the first time a schema of their type is
parsed, not with the registry: ``jsonschema`` takes about 0.55 s to import and protobuf with
protoc about 0.3 s (measured), which a registry serving only Avro, and every start of the
registry, would otherwise pay.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.schemas.avro_schema import parse_schema as parse_avro_schema
from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.schema_type import ParsedSchema, ResolvedReference, SchemaType


def parse_schema(
    text: str, schema_type: object = None, references: Sequence[ResolvedReference] = ()
) -> ParsedSchema:
    """Parse ``text`` as a schema of ``schema_type``; raise :class:`InvalidSchemaError`.

    ``references`` are the schemas ``text`` refers to, with theirs, dependencies first (the
    registry resolves them); each must be of the same type."""
    parsed_type = SchemaType.parse(schema_type)
    for ref in references:
        if ref.schema.schema_type is not parsed_type:
            raise InvalidSchemaError(
                f"Invalid schema: reference '{ref.name}' is a {ref.schema.schema_type.value} "
                f"schema, expected {parsed_type.value}"
            )
    if parsed_type is SchemaType.JSON:
        from sluice.schemas.json_schema import parse_json_schema

        return parse_json_schema(text)
    if parsed_type is SchemaType.PROTOBUF:
        from sluice.schemas.protobuf_schema import parse_protobuf_schema

        return parse_protobuf_schema(text, references)
    return parse_avro_schema(text, references=references)
