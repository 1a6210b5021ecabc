"""The seam every schema type (AVRO, JSON, PROTOBUF) fits: a parsed schema and its identity.

A parsed schema carries three strings:

* ``text`` — what the registry stores and serves (the first registration's form);
* ``normalized`` — the type's canonical form: two texts of the same schema have the same one,
  so they find the same id (whitespace, key order and, for Protobuf, the ``.proto`` text vs the
  base64 ``FileDescriptorProto`` a client sends do not matter);
* ``fingerprint`` — the SHA-256 of the normalized form, hex, which stores index schemas by.
  For AVRO it is the hash of the normalized form alone (the stores written before the other
  types keep their keys); for the other types the type name is hashed in front of it, so a
  text that is valid as two types (``{"type": "string"}`` is both Avro and JSON Schema) gets
  two ids, as in Confluent's registry.

Compatibility is asked of the *reader*: :meth:`ParsedSchema.incompatibilities` lists why the
reader cannot read what the writer wrote, each message already worded for the 409 body.

Parsed schemas are immutable and thread-safe.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import functools
import hashlib
from typing import ClassVar

from sluice.schemas.errors import InvalidSchemaError


class SchemaType(enum.StrEnum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"

    @classmethod
    def parse(cls, value: object) -> SchemaType:
        """The type named by a request's ``schemaType`` (``None``: AVRO); 42201 otherwise.

        Confluent matches the name exactly; so does Sluice (``"avro"`` is refused)."""
        if value is None:
            return cls.AVRO
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        allowed = ", ".join(t.value for t in cls)
        raise InvalidSchemaError(
            f"Invalid schema: unsupported schema type {value!r}, expected one of {allowed}"
        )


def fingerprint(schema_type: SchemaType, normalized: str) -> str:
    """The store key of a schema of ``schema_type`` whose canonical form is ``normalized``."""
    key = normalized if schema_type is SchemaType.AVRO else f"{schema_type.value}:{normalized}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class ParsedSchema(abc.ABC):
    """A valid schema of one type; see the module docstring for ``text`` and ``normalized``."""

    schema_type: ClassVar[SchemaType]
    text: str
    normalized: str

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.schema_type, self.normalized)

    def formatted(self, fmt: str | None) -> str:
        """The text in the format a client asked for (``GET /schemas/ids/{id}?format=``).

        The default is ``text``; a type that has other formats overrides this."""
        return self.text

    @abc.abstractmethod
    def incompatibilities(
        self,
        writer: ParsedSchema,
        *,
        reader_role: str,
        writer_role: str,
        old_version: int,
        level: str,
    ) -> list[str]:
        """Why this schema, as reader, cannot read data written with ``writer``; ``[]`` if it
        can. ``writer`` has the same type. ``reader_role``/``writer_role`` are ``"new"`` or
        ``"old"``; ``old_version`` and ``level`` go into the messages as Confluent puts them."""


def verdict_trailer(old_version: int, level: str) -> list[str]:
    """The two lines Confluent ends every non-Avro 409 message list with, naming the version
    checked against and the compatibility level (Avro puts both inside its one message)."""
    return [f"{{oldSchemaVersion: {old_version}}}", f"{{compatibility: '{level}'}}"]


@dataclasses.dataclass(frozen=True)
class ResolvedReference:
    """A schema reference with the schema it names: ``schema`` is known to the referring
    schema as ``name`` (an Avro full name, a JSON ``$ref``, a ``.proto`` import path)."""

    name: str
    schema: ParsedSchema
