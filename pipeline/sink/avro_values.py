"""Struct values as Confluent-framed Avro: the sink's ``valueFormat=avro``.

The other direction of ``sluice.pipeline.source.avro_columns`` (which decodes framed values
into typed columns):

* **driver** — ``WriterSchema.resolve`` chooses the writer schema once per write, before any
  task runs: the ``valueSchema`` file registered under the subject (the registry answers with
  the existing id when it has the schema already, so rewriting is idempotent), or
  ``valueSchemaId``, or version ``valueSchemaVersion`` (default ``latest``) of the subject.
  ``WriterSchema.check_struct`` then compares the ``value`` column's struct with the schema's
  record: every struct field must be a record field, and every record field the struct lacks
  must have a default or admit null — otherwise ``ValueStructMismatchError`` before any write.
* **executor** — ``AvroValueEncoder.encode`` writes one value as the Confluent wire format
  (``sluice.schemas.serde``: magic byte 0, the 4-byte schema id, the Avro binary). Values come
  from Arrow's ``to_pylist``; Arrow gives a map as a list of ``(key, value)`` pairs, which
  Avro wants as a dict, so maps are converted (recursively, following the Arrow type).
  Timestamps arrive as timezone-aware ``datetime``s, dates as ``date``s, decimals as
  ``Decimal``s — what fastavro takes for the logical types. A value that does not fit the
  schema raises ``sluice.schemas.errors.UnencodableRecordError`` and fails the task.

The schema id is fixed on the driver, as the source fixes its reader schema there: every task
of one write frames its values with the same id, even if a newer version is registered
meanwhile.

``WriterSchema`` is immutable; an ``AvroValueEncoder`` is used by one task thread.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from fastavro import parse_schema, schemaless_writer

from sluice.pipeline.sink.options import AvroValueOptions
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import RegistryConnectionError, RegistryError, UnencodableRecordError
from sluice.schemas.serde import encode_header

__all__ = ["AvroValueEncoder", "ValueStructMismatchError", "WriterSchema", "WriterSchemaError"]


class WriterSchemaError(ValueError):
    """The writer schema cannot be had: unreadable file, unknown subject/version/id, not JSON."""


class ValueStructMismatchError(ValueError):
    """The ``value`` struct's fields do not fit the writer schema's record."""


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """The schema values are written with: its text and registry id; picklable."""

    text: str
    schema_id: int
    subject: str | None = None

    @classmethod
    def resolve(cls, options: AvroValueOptions) -> WriterSchema:
        """Ask the registry (driver side); see the module doc for the order."""
        client = RegistryClient(options.registry_url)
        try:
            if options.schema_path is not None:
                assert options.subject is not None  # options.py requires one
                try:
                    text = Path(options.schema_path).read_text(encoding="utf-8")
                except OSError as exc:
                    raise WriterSchemaError(
                        f"valueSchema: expected a readable .avsc file, found {exc}"
                    ) from exc
                _parsed(text, f"valueSchema {options.schema_path}")
                return cls(text, client.register(options.subject, text), options.subject)
            if options.schema_id is not None:
                return cls(client.get_schema(options.schema_id), options.schema_id, None)
            assert options.subject is not None
            doc = client.get_version(options.subject, options.version)
            return cls(str(doc["schema"]), int(doc["id"]), options.subject)
        except (RegistryError, RegistryConnectionError) as exc:
            where = (
                f"valueSchemaId {options.schema_id}"
                if options.schema_id is not None
                else f"subject {options.subject!r}"
            )
            raise WriterSchemaError(f"{where}: the registry refused: {exc}") from exc
        finally:
            client.close()

    def describe(self) -> str:
        return f"id {self.schema_id}" + (f" (subject {self.subject})" if self.subject else "")

    def check_struct(self, struct: Any) -> None:
        """Compare the ``value`` column's ``StructType`` with the schema's record (names)."""
        document = _parsed(self.text, f"writer schema {self.describe()}")
        if not isinstance(document, dict) or document.get("type") != "record":
            raise ValueStructMismatchError(
                f"writer schema {self.describe()}: expected a record for a struct value, found "
                f"{json.dumps(document)[:200]}"
            )
        fields = {f["name"]: f for f in document["fields"]}
        extra = [n for n in struct.names if n not in fields]
        if extra:
            raise ValueStructMismatchError(
                f"value struct: expected fields of writer schema {self.describe()} "
                f"({', '.join(fields)}), found {', '.join(extra)} not in it"
            )
        missing = [
            name
            for name, f in fields.items()
            if name not in struct.names and "default" not in f and not _nullable(f["type"])
        ]
        if missing:
            raise ValueStructMismatchError(
                f"value struct: expected every field of writer schema {self.describe()} without "
                f"a default, found {', '.join(missing)} missing"
            )


def _parsed(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
        parse_schema(document)
    except Exception as exc:  # json or fastavro: both mean "not an Avro schema"
        raise WriterSchemaError(f"{what}: expected Avro schema JSON, found: {exc}") from exc
    return document


def _nullable(avro_type: Any) -> bool:
    return avro_type == "null" or (isinstance(avro_type, list) and "null" in avro_type)


Converter = Callable[[Any], Any]


def _converter(arrow_type: pa.DataType) -> Converter | None:
    """A function turning ``to_pylist``'s value of ``arrow_type`` into what fastavro takes, or
    ``None`` when it is fine as is."""
    if pa.types.is_map(arrow_type):
        inner = _converter(arrow_type.item_type)
        if inner is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: inner(x) for k, x in v}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        item = _converter(arrow_type.value_type)
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    if pa.types.is_struct(arrow_type):
        fixes = [
            (arrow_type.field(i).name, c)
            for i in range(arrow_type.num_fields)
            if (c := _converter(arrow_type.field(i).type)) is not None
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
        self._convert = _converter(value_type)

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
