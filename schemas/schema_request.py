"""A schema as a request gives it, and as the registry checks it before deciding anything.

:class:`SchemaRequest` is the body of a register, lookup or compatibility request, unchecked:
the text, ``schemaType``, ``references``, ``metadata``, ``ruleSet`` and, for an import,
``id`` and ``version``. The helpers below check each part (42201 with what was expected and
what was found); :class:`Candidate` is the result: the parsed schema with its references and
extras, and the key the stores index it by.

Immutable values; thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sluice.schemas.avro_schema import AVRO
from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.schema_type import ParsedSchema
from sluice.schemas.store import Reference

MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class SchemaRequest:
    """A schema as a request body gives it (register, lookup, compatibility): the text, the
    ``schemaType``, the raw ``references``, ``metadata`` and ``ruleSet``, and for an import the
    ``id`` and ``version``. Checked by the registry, not here."""

    text: str
    schema_type: object = AVRO
    references: object = None
    metadata: object = None
    rule_set: object = None
    id: object = None
    version: object = None


@dataclass(frozen=True)
class Candidate:
    """A request's schema, parsed, with its references and extras checked."""

    parsed: ParsedSchema
    references: tuple[Reference, ...]
    metadata: str | None
    rule_set: str | None

    @property
    def key(self) -> str:
        """The store's fingerprint: the parsed schema's, or for a schema with references,
        metadata or a rule set, the hash of all of them (so plain schemas keep their keys)."""
        if not (self.references or self.metadata is not None or self.rule_set is not None):
            return self.parsed.fingerprint
        extras = json.dumps(
            [[r.to_json() for r in self.references], self.metadata, self.rule_set],
            sort_keys=True,
        )
        return hashlib.sha256(f"{self.parsed.fingerprint}|{extras}".encode()).hexdigest()


def json_object_text(value: object, field: str) -> str | None:
    """A request's ``metadata``/``ruleSet``: an object (kept as compact JSON) or absent."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidSchemaError(
            f"Invalid schema: expected {field} to be an object, found {type(value).__name__}"
        )
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def references_of(value: object) -> tuple[Reference, ...]:
    """A request's ``references``: a list of ``{name, subject, version}``; 42201 otherwise."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidSchemaError(
            f"Invalid schema: expected references to be a list, found {type(value).__name__}"
        )
    result = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else None
        subject = item.get("subject") if isinstance(item, dict) else None
        version = item.get("version") if isinstance(item, dict) else None
        if not (isinstance(name, str) and name and isinstance(subject, str) and subject):
            raise InvalidSchemaError(
                f"Invalid schema: a reference needs a non-empty name and subject, found {item!r}"
            )
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidSchemaError(
                f"Invalid schema: reference '{name}' needs an integer version, found {version!r}"
            )
        result.append(Reference(name, subject, version))
    if len({r.name for r in result}) != len(result):
        raise InvalidSchemaError("Invalid schema: two references have the same name")
    return tuple(result)


def optional_int(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value > MAX_INT:
        raise InvalidSchemaError(f"Invalid schema: expected {field} to be an int, found {value!r}")
    return value if value > 0 else None  # Confluent's clients send 0 or -1 for "none"
