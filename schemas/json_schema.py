"""Parsing registered JSON Schema text, and the identity of a JSON Schema.

The text is decoded like Avro's (:func:`sluice.schemas.json_text.loads`: strict JSON nested at
most :data:`~sluice.schemas.limits.MAX_SAFE_DEPTH` levels) and must be a JSON Schema: an object
or a boolean that is valid against its draft's metaschema, checked by the ``jsonschema``
library. The draft is the one ``$schema`` names; without one, draft-07, Confluent's default.
Nothing is fetched: a ``$ref`` is kept as written, and only local ones (``#/...``) are followed
by the compatibility rules (:mod:`sluice.schemas.json_schema_diff`).

Identity: the normalized form is the document serialized with sorted object keys and no
whitespace (key order never changes what a JSON Schema means, array order may and is kept).
``text`` is the compact JSON of the first registration, key order kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import jsonschema.exceptions
import jsonschema.validators

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.json_schema_diff import diff
from sluice.schemas.json_text import JsonSyntaxError, JsonTooDeepError, loads
from sluice.schemas.limits import MAX_SAFE_DEPTH
from sluice.schemas.schema_type import ParsedSchema, SchemaType, verdict_trailer


@dataclass(frozen=True)
class JsonSchema(ParsedSchema):
    """A parsed, valid JSON Schema; ``document`` is the decoded schema (not to be mutated)."""

    schema_type: ClassVar[SchemaType] = SchemaType.JSON
    text: str
    normalized: str
    document: Any

    def incompatibilities(
        self,
        writer: ParsedSchema,
        *,
        reader_role: str,
        writer_role: str,
        old_version: int,
        level: str,
    ) -> list[str]:
        assert isinstance(writer, JsonSchema)
        # Confluent diffs (original = what wrote the data, update = what reads it) and keeps
        # the differences that are not in its list of compatible changes.
        found = [d for d in diff(writer.document, self.document) if not d.compatible]
        if not found:
            return []
        messages = [d.message(update_role=reader_role, original_role=writer_role) for d in found]
        return messages + verdict_trailer(old_version, level)


def parse_json_schema(text: str) -> JsonSchema:
    """Parse JSON Schema text as sent in a request body; raise :class:`InvalidSchemaError`."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Invalid schema: expected JSON Schema text, found empty")
    try:
        document: Any = loads(text, MAX_SAFE_DEPTH)
    except JsonSyntaxError as e:
        raise InvalidSchemaError(f"Invalid schema: not JSON ({e})") from e
    except JsonTooDeepError as e:
        raise InvalidSchemaError(f"Invalid schema: {e}") from e
    if not isinstance(document, dict | bool):
        raise InvalidSchemaError(
            "Invalid schema: a JSON Schema is an object or a boolean, found "
            f"{type(document).__name__}"
        )
    try:
        validator = jsonschema.validators.validator_for(
            document, default=jsonschema.validators.Draft7Validator
        )
        validator.check_schema(document)  # type: ignore[arg-type]  # booleans are schemas too
    except jsonschema.exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        raise InvalidSchemaError(f"Invalid schema: at '#/{where}': {e.message}") from e
    except RecursionError as e:  # within MAX_SAFE_DEPTH, but the metaschema walk recursed more
        raise InvalidSchemaError("Invalid schema: nested too deeply to validate") from e
    return JsonSchema(
        text=json.dumps(document, separators=(",", ":"), ensure_ascii=False),
        normalized=json.dumps(document, sort_keys=True, separators=(",", ":")),
        document=document,
    )
