"""The schema a write's struct values are framed with, chosen once on the driver.

``WriterSchema.resolve`` asks the registry once per write, before any task runs: the
``valueSchema`` file registered under the subject with the format's ``schemaType`` (the
registry answers with the existing id when it has the schema already, so rewriting is
idempotent), or ``valueSchemaId``, or version ``valueSchemaVersion`` (default ``latest``) of
the subject; the schema must be of the format's type. ``WriterSchema.check_struct`` then
compares the ``value`` column's struct with the schema's top level — an Avro record's fields
(every struct field must be one; every record field the struct lacks must have a default or
admit null), a JSON Schema object's properties (every struct field must be one; every
required property must be a struct field), a Protobuf message's fields (every struct field
must be one) — ``ValueStructMismatchError`` before any write otherwise.

``sluice.pipeline.sink.value_encoders`` chooses the executor's encoder of its format. The
schema id is fixed on the driver, as the source
fixes its reader schema there: every task of one write frames its values with the same id, even
if a newer version is registered meanwhile.

``WriterSchema`` is immutable and picklable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.pipeline.sink.options import ValueSchemaOptions
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import RegistryConnectionError, RegistryError

__all__ = ["ValueStructMismatchError", "WriterSchema", "WriterSchemaError", "message_of"]


class WriterSchemaError(ValueError):
    """The writer schema cannot be had: unreadable file, unknown subject/version/id, not a
    schema of the format's type."""


class ValueStructMismatchError(ValueError):
    """The ``value`` struct's fields do not fit the writer schema's top level."""


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """The schema values are written with: its text, registry id and type; picklable.
    ``registry_url`` and ``message`` (Protobuf's value message, ``None``: the first) travel
    with it to the executors' encoders."""

    text: str
    schema_id: int
    subject: str | None = None
    schema_type: str = "AVRO"
    registry_url: str = ""
    message: str | None = None

    @classmethod
    def resolve(cls, options: ValueSchemaOptions) -> WriterSchema:
        """Ask the registry (driver side); see the module doc for the order."""
        client = RegistryClient(options.registry_url)
        schema_type = options.value_format.schema_type
        extra: dict[str, Any] = {"registry_url": options.registry_url, "message": options.message}
        try:
            if options.schema_path is not None:
                assert options.subject is not None  # options.py requires one
                try:
                    text = Path(options.schema_path).read_text(encoding="utf-8")
                except OSError as exc:
                    raise WriterSchemaError(
                        f"valueSchema: expected a readable schema file, found {exc}"
                    ) from exc
                if schema_type == "AVRO":
                    _avro_document(text, f"valueSchema {options.schema_path}")
                found_id = client.register(
                    options.subject,
                    text,
                    schema_type=None if schema_type == "AVRO" else schema_type,
                )
                return cls(text, found_id, options.subject, schema_type, **extra)
            if options.schema_id is not None:
                doc = client.request("GET", f"/schemas/ids/{options.schema_id}")
                subject = None
            else:
                assert options.subject is not None
                doc = client.get_version(options.subject, options.version)
                subject = options.subject
            found = str(doc.get("schemaType") or "AVRO")
            schema_id = int(doc.get("id", options.schema_id or 0))
        except (RegistryError, RegistryConnectionError) as exc:
            where = (
                f"valueSchemaId {options.schema_id}"
                if options.schema_id is not None
                else f"subject {options.subject!r}"
            )
            raise WriterSchemaError(f"{where}: the registry refused: {exc}") from exc
        finally:
            client.close()
        if found != schema_type:
            raise WriterSchemaError(
                f"valueFormat={options.value_format.value}: expected a {schema_type} writer "
                f"schema, found {found} schema id {schema_id}"
            )
        return cls(str(doc["schema"]), schema_id, subject, schema_type, **extra)

    def describe(self) -> str:
        return f"id {self.schema_id}" + (f" (subject {self.subject})" if self.subject else "")

    def check_struct(self, struct: Any) -> None:
        """Compare the ``value`` column's ``StructType`` with the schema's top level (names;
        see the module doc)."""
        fields, required = self._top_level()
        extra = [n for n in struct.names if n not in fields]
        if extra:
            raise ValueStructMismatchError(
                f"value struct: expected fields of writer schema {self.describe()} "
                f"({', '.join(fields)}), found {', '.join(extra)} not in it"
            )
        missing = [name for name in required if name not in struct.names]
        if missing:
            raise ValueStructMismatchError(
                f"value struct: expected every field of writer schema {self.describe()} without "
                f"a default, found {', '.join(missing)} missing"
            )

    def _top_level(self) -> tuple[list[str], list[str]]:
        """The top level's field names, and those a value must carry."""
        if self.schema_type == "AVRO":
            document = _avro_document(self.text, f"writer schema {self.describe()}")
            if not isinstance(document, dict) or document.get("type") != "record":
                raise ValueStructMismatchError(
                    f"writer schema {self.describe()}: expected a record for a struct value, "
                    f"found {json.dumps(document)[:200]}"
                )
            fields = {f["name"]: f for f in document["fields"]}
            required = [
                n for n, f in fields.items() if "default" not in f and not _nullable(f["type"])
            ]
            return list(fields), required
        if self.schema_type == "JSON":
            document = json.loads(self.text)
            props = document.get("properties") if isinstance(document, dict) else None
            if not isinstance(props, dict):
                raise ValueStructMismatchError(
                    f"writer schema {self.describe()}: expected an object with properties for "
                    "a struct value"
                )
            return list(props), [str(n) for n in document.get("required", [])]
        descriptor = message_of(self).DESCRIPTOR
        return [f.name for f in descriptor.fields], []


def _avro_document(text: str, what: str) -> Any:
    from fastavro import parse_schema

    try:
        document = json.loads(text)
        parse_schema(document)
    except Exception as exc:  # json or fastavro: both mean "not an Avro schema"
        raise WriterSchemaError(f"{what}: expected Avro schema JSON, found: {exc}") from exc
    return document


def _nullable(avro_type: Any) -> bool:
    return avro_type == "null" or (isinstance(avro_type, list) and "null" in avro_type)


def message_of(schema: WriterSchema) -> Any:
    """The Protobuf message class a write's values are (``schema.message``, or the first)."""
    from sluice.pipeline.sink.protobuf_descriptors import UnknownMessageError, message_class
    from sluice.pipeline.sink.registry_schemas import directory

    registered = directory(schema.registry_url).by_id(schema.schema_id)
    try:
        return message_class(registered, schema.message)
    except UnknownMessageError as exc:
        raise ValueStructMismatchError(str(exc)) from None
