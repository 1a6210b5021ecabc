"""Parsing registered schema text into an Avro schema and the key that identifies it.

Two registrations are "the same schema" when their *normalized form* is equal: the schema as
the ``avro`` package parsed it (``Schema.to_json()``: full names resolved, a named type written
once then referenced), serialized with sorted object keys and no whitespace. So whitespace and
the order of JSON attributes do not matter, while everything that changes meaning does: field
order, defaults, aliases, logical types, docs.

Why not Avro's Parsing Canonical Form: PCF drops ``default``, ``aliases`` and ``logicalType``,
so a schema that only adds a default (a change that decides BACKWARD compatibility) would map
onto the old id and the registry would hand readers the old text without the default. PCF is
the right key for *fingerprinting a writer's binary layout*, not for identifying a registered
document. Confluent does the same: it compares its canonical string, which keeps defaults.

The ``fingerprint`` is the SHA-256 of the normalized form, hex; stores index schemas by it
(:func:`~sluice.schemas.schema_type.fingerprint`).

Compatibility is the ``avro`` package's :class:`ReaderWriterCompatibilityChecker` (Avro's
schema-resolution rules: promotions, defaults, aliases, union branches).

The text is decoded with :func:`sluice.schemas.json_text.loads`: strict JSON (no ``NaN``, no
lone surrogates) nested at most :data:`~sluice.schemas.limits.MAX_SAFE_DEPTH` levels. Requests
are held to the tighter configured limit before they get here
(:meth:`~sluice.schemas.limits.RegistryLimits.check_schema`); this bound only keeps a stored
text, or a direct caller, from sending the recursive parser past Python's recursion limit.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import (
    ReaderWriterCompatibilityChecker,
    SchemaCompatibilityResult,
    SchemaCompatibilityType,
)

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.json_text import JsonSyntaxError, JsonTooDeepError, loads
from sluice.schemas.limits import MAX_SAFE_DEPTH
from sluice.schemas.schema_type import ParsedSchema, ResolvedReference, SchemaType

AVRO = SchemaType.AVRO.value


@dataclass(frozen=True)
class AvroSchema(ParsedSchema):
    """A parsed, valid Avro schema. ``text`` is the compact JSON that the registry stores and
    returns (the first registration's attribute order, whitespace removed)."""

    schema_type: ClassVar[SchemaType] = SchemaType.AVRO
    text: str
    normalized: str
    avro: avro.schema.Schema
    ignored: tuple[str, ...] = ()  # warnings from the parser (e.g. ignored logical types)

    def incompatibilities(
        self,
        writer: ParsedSchema,
        *,
        reader_role: str,
        writer_role: str,
        old_version: int,
        level: str,
    ) -> list[str]:
        assert isinstance(writer, AvroSchema)
        # A fresh checker per pair: it memoizes by (reader, writer) identity and its results
        # must not leak between unrelated checks.
        checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
        result: SchemaCompatibilityResult = checker.get_compatibility(self.avro, writer.avro)
        if result.compatibility is not SchemaCompatibilityType.incompatible:
            return []
        where = ", ".join(sorted(result.locations))
        kinds = ", ".join(sorted({i.name.upper() for i in result.incompatibilities}))
        details = "; ".join(sorted(result.messages))
        return [
            f"{{errorType:'{kinds}', description:'The {reader_role} schema (reader) cannot read "
            f"data written with the {writer_role} schema (writer) at '{where}': {details}', "
            f"oldSchemaVersion: {old_version}, compatibility: '{level}'}}"
        ]


def parse_schema(
    text: str, schema_type: str | None = AVRO, references: Sequence[ResolvedReference] = ()
) -> AvroSchema:
    """Parse schema text as sent in a request body; raise :class:`InvalidSchemaError`.

    ``schema_type`` must be ``AVRO`` (the default): the registry picks the parser of each
    type with :func:`sluice.schemas.schema_parser.parse_schema`. ``references`` are Avro
    schemas, dependencies first, whose named types ``text`` may use by name: they are parsed
    into one name table before ``text`` (a reference's own text names its dependencies' types
    the same way). The normalized form writes a referenced type out in full where it is first
    used, so it changes when a referenced type does.
    """
    if schema_type not in (None, AVRO):
        raise InvalidSchemaError(
            f"Unsupported schema type {schema_type!r}: the Avro parser reads AVRO only"
        )
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Invalid schema: expected Avro schema JSON text, found empty")
    try:
        document: Any = loads(text, MAX_SAFE_DEPTH)
    except JsonSyntaxError as e:
        raise InvalidSchemaError(f"Invalid schema: not JSON ({e})") from e
    except JsonTooDeepError as e:
        raise InvalidSchemaError(f"Invalid schema: {e}") from e
    # The parser reports ignored logical types as warnings; keep them as data instead, so a
    # registry running with warnings-as-errors (our tests) behaves like one in production.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            names = avro.name.Names()
            for ref in references:
                assert isinstance(ref.schema, AvroSchema)
                avro.schema.make_avsc_object(loads(ref.schema.text, MAX_SAFE_DEPTH), names)
            parsed = avro.schema.make_avsc_object(document, names)
            normalized = json.dumps(parsed.to_json(), sort_keys=True, separators=(",", ":"))
        except (avro.errors.AvroException, TypeError, ValueError, KeyError) as e:
            raise InvalidSchemaError(f"Invalid schema: {e}") from e
        except RecursionError as e:  # a schema within MAX_SAFE_DEPTH but costlier than measured
            raise InvalidSchemaError("Invalid schema: nested too deeply to parse") from e
    return AvroSchema(
        text=json.dumps(document, separators=(",", ":"), ensure_ascii=False),
        normalized=normalized,
        avro=parsed,
        ignored=tuple(str(w.message) for w in caught),
    )
