"""Struct values as Confluent-framed JSON: the sink's ``valueFormat=json-schema``.

The other direction of ``sluice.pipeline.source.json_schema_columns``. One value is framed as
confluent-kafka's ``JSONSerializer`` frames it — magic byte 0, the 4-byte schema id, the UTF-8
JSON document — after the document is **validated against the writer schema** (as the
serializer does by default): ``jsonschema`` with the draft the schema names, its references
registered under their names (``json_validator``, built once per schema per process; the
source validates records with the same validator). A value that fails raises
``sluice.schemas.errors.UnencodableRecordError``, naming the path, and fails the task.

Arrow's values become JSON as a JSON Schema producer writes them: a struct is an object whose
null fields are left out (an optional property is absent, not null), a map an object, a list
an array, a timestamp an RFC 3339 date-time, a date a full-date, a decimal a number, bytes
their base64 text.

A ``JsonValueEncoder`` is used by one task thread; the validator cache is guarded by a lock.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import threading
from typing import Any

import pyarrow as pa

from sluice.pipeline.sink.avro_values import arrow_to_python
from sluice.pipeline.sink.registry_schemas import RegisteredSchema, directory
from sluice.pipeline.sink.writer_schema import WriterSchema
from sluice.schemas.errors import UnencodableRecordError
from sluice.schemas.serde import encode_header

__all__ = ["JsonValueEncoder", "best_error", "json_documents", "json_validator"]


def json_documents(registered: RegisteredSchema) -> tuple[Any, dict[str, Any]]:
    """A registered JSON Schema's document and its references' documents by name."""
    from sluice.schemas.json_schema import JsonSchema

    assert isinstance(registered.schema, JsonSchema)
    refs = {}
    for ref in registered.references:
        assert isinstance(ref.schema, JsonSchema)
        refs[ref.name] = ref.schema.document
    return registered.schema.document, refs


_VALIDATORS: dict[int, tuple[RegisteredSchema, Any]] = {}
_VALIDATORS_LOCK = threading.Lock()


def json_validator(registered: RegisteredSchema) -> Any:
    """The ``jsonschema`` validator of a registered JSON Schema, built once per process."""
    key = id(registered)  # the directory keeps ``registered`` for good; kept here beside it
    with _VALIDATORS_LOCK:
        found = _VALIDATORS.get(key)
        if found is not None:
            return found[1]
        import jsonschema.validators
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        root, refs = json_documents(registered)
        resources = [
            (name, Resource.from_contents(doc, default_specification=DRAFT7))
            for name, doc in refs.items()
        ]
        registry: Any = Registry().with_resources(resources)
        default = jsonschema.validators.Draft7Validator
        validator = jsonschema.validators.validator_for(root, default=default)(
            root, registry=registry
        )
        _VALIDATORS[key] = (registered, validator)
        return validator


def best_error(validator: Any, document: Any) -> str | None:
    """Why ``document`` is not valid (the validator's best match, with its path), or ``None``."""
    import jsonschema.exceptions

    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"at '#/{where}': {error.message}"


def _json_value(value: Any) -> Any:
    """A Python value from Arrow (maps already dicts) as JSON takes it; see the module doc."""
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


class JsonValueEncoder:
    """Struct values (Arrow) -> Confluent-framed JSON bytes; one per task, on the executor."""

    def __init__(self, schema: WriterSchema, value_type: pa.DataType) -> None:
        self.schema = schema
        self._header = encode_header(schema.schema_id)
        self._validator = json_validator(directory(schema.registry_url).by_id(schema.schema_id))
        self._convert = arrow_to_python(value_type)

    def encode_column(self, column: pa.Array) -> list[bytes | None]:
        """Every value of ``column`` framed; a null value stays null (a tombstone)."""
        values = column.to_pylist()
        if self._convert is not None:
            values = [self._convert(v) for v in values]
        return [None if v is None else self.encode(v) for v in values]

    def encode(self, record: Any) -> bytes:
        document = _json_value(record)
        error = best_error(self._validator, document)
        if error is not None:
            raise UnencodableRecordError(
                f"value does not match writer schema {self.schema.describe()}: {error}"
            )
        body = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        return self._header + body.encode("utf-8")
