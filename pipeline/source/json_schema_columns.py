"""JSON Schema values as typed columns: ``valueFormat=json-schema``.

A value is Confluent-framed JSON (magic 0, 4-byte schema id, the UTF-8 JSON document), as
confluent-kafka's ``JSONSerializer`` writes it. The reader schema gives the columns; each
record is parsed, **validated against its writer schema** (the header's id, fetched and parsed
once per executor process by ``registry_schemas``; ``jsonschema`` with the draft the schema
names, its references registered under their names: the sink's ``json_validator``) and then
projected onto the reader's columns: properties the reader lacks are dropped, columns the
record lacks are null.

Type mapping (``json_schema_type``)::

    JSON Schema                                        Spark
    object with properties                             struct (properties in order)
      property in required / not                       not nullable / nullable
    object without properties, additionalProperties S  map<string, S>
    array with items S                                 array<S>
    string                                             string
    string + format date-time / date                   timestamp / date
    integer / number / boolean                         bigint / double / boolean
    type [T, "null"], oneOf/anyOf [S, {type: null}]    T / S, nullable
    type [integer, number]                             double
    $ref (#/..., or a reference's name[#/...])         what it points to
    anything else: other unions, allOf, tuples, a
    bare {} or true, enum of mixed types, "null",
    a $ref back into itself (recursion)                string: the JSON text of the value

The fallback keeps every value (its JSON text, compact) rather than refuse the schema; a
property the reader declares with properties *and* ``additionalProperties`` keeps only the
declared ones. The top level must be an object with properties (``UnsupportedJsonSchemaError``
otherwise, on the driver).

An undecodable record, beside the framing errors of ``typed_columns``: a schema id of another
type (``WrongSchemaTypeError``), a body that is not UTF-8 JSON (``UndecodableJsonError``), a
document that fails its writer schema (``InvalidJsonValueError``, the validator's best match
as the reason) or does not fit the reader's columns (``JsonValueMismatchError``, naming the
path: a required column missing, a string where a number was expected).

Immutable mappings and per-process caches behind locks; a decoder is used by one thread.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice.pipeline.sink.json_values import best_error, json_documents, json_validator
from sluice.pipeline.sink.registry_schemas import RegisteredSchema, directory
from sluice.pipeline.source.typed_columns import (
    ReaderSchema,
    UnsupportedValueSchemaError,
    ValueDecodeError,
)

__all__ = [
    "InvalidJsonValueError",
    "JsonSchemaValueDecoder",
    "JsonValueMismatchError",
    "UndecodableJsonError",
    "UnsupportedJsonSchemaError",
    "WrongSchemaTypeError",
    "json_schema_type",
    "json_value_type",
]


class UnsupportedJsonSchemaError(UnsupportedValueSchemaError):
    """The reader schema's top level is not an object with properties."""


class WrongSchemaTypeError(ValueDecodeError):
    """The header's schema id names a schema of another type than the read's format."""


class UndecodableJsonError(ValueDecodeError):
    """The body is not UTF-8 JSON."""


class InvalidJsonValueError(ValueDecodeError):
    """The document is not valid against its writer schema."""


class JsonValueMismatchError(ValueDecodeError):
    """The document does not fit the reader's columns; the message names the path."""


Convert = Callable[[Any, str], Any]
"""A JSON value and its path -> what ``pyarrow.array`` takes for the column."""

_LONG = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class _Column:
    """One node of the mapping: the Spark type, whether null may land, and the conversion."""

    type: DataType
    nullable: bool
    convert: Convert


def _mismatch(path: str, expected: str, value: Any) -> JsonValueMismatchError:
    found = json.dumps(value)[:60]
    return JsonValueMismatchError(f"{path}: expected {expected}, found {found}")


def _json_text(value: Any, path: str) -> Any:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _string(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return value
    raise _mismatch(path, "a string", value)


def _long(value: Any, path: str) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and _LONG[0] <= value <= _LONG[1]:
        return value
    raise _mismatch(path, "an integer within a bigint", value)


def _double(value: Any, path: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _mismatch(path, "a number", value)


def _boolean(value: Any, path: str) -> Any:
    if isinstance(value, bool):
        return value
    raise _mismatch(path, "true or false", value)


def _timestamp(value: Any, path: str) -> Any:
    try:
        parsed = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise _mismatch(path, "an RFC 3339 date-time", value) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _date(value: Any, path: str) -> Any:
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise _mismatch(path, "an RFC 3339 full-date", value) from None


_SCALARS: dict[str, tuple[DataType, Convert]] = {
    "string": (StringType(), _string),
    "integer": (LongType(), _long),
    "number": (DoubleType(), _double),
    "boolean": (BooleanType(), _boolean),
}
_FORMATS: dict[str, tuple[DataType, Convert]] = {
    "date-time": (TimestampType(), _timestamp),
    "date": (DateType(), _date),
}
_FALLBACK = _Column(StringType(), True, _json_text)


def _nullable(column: _Column) -> _Column:
    return column if column.nullable else _Column(column.type, True, column.convert)


def _guarded(convert: Convert, nullable: bool) -> Convert:
    """``convert`` with JSON null (or a missing value) handled: null when nullable, else a
    mismatch."""

    def guarded(value: Any, path: str) -> Any:
        if value is None:
            if nullable:
                return None
            raise JsonValueMismatchError(f"{path}: expected a value, found null or nothing")
        return convert(value, path)

    return guarded


class _Mapper:
    """The mapping of one reader schema (its document and its references' documents)."""

    def __init__(self, root: Any, references: Mapping[str, Any]) -> None:
        self.root = root
        self.references = references

    def column(self, schema: Any, doc: Any, path: str, refs: tuple[str, ...]) -> _Column:
        found = self._column(schema, doc, path, refs)
        return _Column(found.type, found.nullable, _guarded(found.convert, found.nullable))

    def _column(self, schema: Any, doc: Any, path: str, refs: tuple[str, ...]) -> _Column:
        if not isinstance(schema, dict):
            return _FALLBACK  # true, false
        if "$ref" in schema:
            return self._ref(str(schema["$ref"]), doc, path, refs)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self._union(schema[key], doc, path, refs)
        if "allOf" in schema and len(schema["allOf"]) == 1:
            return self._column(schema["allOf"][0], doc, path, refs)
        kind = schema.get("type")
        if kind is None and "properties" in schema:
            kind = "object"
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if sorted(kinds) == ["integer", "number"]:
                kinds = ["number"]
            if len(kinds) != 1:
                return _FALLBACK
            return _nullable(self._typed(kinds[0], schema, doc, path, refs))
        if isinstance(kind, str) and "allOf" not in schema:
            return self._typed(kind, schema, doc, path, refs)
        return _FALLBACK

    def _typed(
        self, kind: str, schema: dict[str, Any], doc: Any, path: str, refs: tuple[str, ...]
    ) -> _Column:
        if kind == "string" and schema.get("format") in _FORMATS:
            spark, convert = _FORMATS[schema["format"]]
            return _Column(spark, False, convert)
        if kind in _SCALARS:
            spark, convert = _SCALARS[kind]
            return _Column(spark, False, convert)
        if kind == "array":
            items = schema.get("items")
            if not isinstance(items, dict) or "prefixItems" in schema:
                return _FALLBACK
            return self._array(self.column(items, doc, f"{path}[]", refs))
        if kind == "object":
            props = schema.get("properties")
            if isinstance(props, dict) and props:
                return self._struct(props, set(schema.get("required", ())), doc, path, refs)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return self._map(self.column(extra, doc, f"{path}{{}}", refs))
        return _FALLBACK

    def _struct(
        self,
        props: dict[str, Any],
        required: set[str],
        doc: Any,
        path: str,
        refs: tuple[str, ...],
    ) -> _Column:
        names = list(props)
        columns = []
        for name in names:
            found = self.column(props[name], doc, f"{path}.{name}", refs)
            if name not in required:
                found = _Column(found.type, True, _guarded(found.convert, True))
            columns.append(found)
        spark = StructType(
            [StructField(n, c.type, c.nullable) for n, c in zip(names, columns, strict=True)]
        )
        pairs = list(zip(names, [c.convert for c in columns], strict=True))

        def struct(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise _mismatch(where, "an object", value)
            return {n: convert(value.get(n), f"{where}.{n}") for n, convert in pairs}

        return _Column(spark, False, struct)

    @staticmethod
    def _array(item: _Column) -> _Column:
        def array(value: Any, where: str) -> Any:
            if not isinstance(value, list):
                raise _mismatch(where, "an array", value)
            return [item.convert(x, f"{where}[{i}]") for i, x in enumerate(value)]

        return _Column(ArrayType(item.type, item.nullable), False, array)

    @staticmethod
    def _map(values: _Column) -> _Column:
        def mapping(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise _mismatch(where, "an object", value)
            return {k: values.convert(v, f"{where}.{k}") for k, v in value.items()}

        return _Column(MapType(StringType(), values.type, values.nullable), False, mapping)

    def _union(self, branches: Any, doc: Any, path: str, refs: tuple[str, ...]) -> _Column:
        if not isinstance(branches, list):
            return _FALLBACK
        others = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(others) != 1:
            return _FALLBACK
        found = self._column(others[0], doc, path, refs)
        return _nullable(found) if len(others) < len(branches) else found

    def _ref(self, ref: str, doc: Any, path: str, refs: tuple[str, ...]) -> _Column:
        base, _, pointer = ref.partition("#")
        key = f"{base}#{pointer}" if base else f"{id(doc)}#{pointer}"
        if key in refs:
            return _FALLBACK  # recursion: the JSON text from here down
        target_doc = doc if not base else self.references.get(base)
        if target_doc is None:
            return _FALLBACK  # a $ref to nothing the registry gave: the text, not a refusal
        target = _pointer(target_doc, pointer)
        if target is None:
            return _FALLBACK
        return self._column(target, target_doc, path, (*refs, key))


def _pointer(doc: Any, pointer: str) -> Any:
    """The part of ``doc`` at JSON pointer ``pointer`` (``""``: the whole); ``None`` if none."""
    node = doc
    for raw in [p for p in pointer.split("/") if p]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _top(root: Any, references: Mapping[str, Any], what: str) -> _Column:
    column = _Mapper(root, references).column(root, root, "value", ())
    if not isinstance(column.type, StructType):
        raise UnsupportedJsonSchemaError(
            f"reader schema {what}: expected an object with properties, found a schema "
            f"mapped to {column.type.simpleString()}"
        )
    return column


def json_schema_type(document: Any, references: Mapping[str, Any] | None = None) -> DataType:
    """The Spark type of a JSON Schema document (module doc); ``references`` are the documents
    of its references by name."""
    return _Mapper(document, references or {}).column(document, document, "value", ()).type


def json_value_type(reader: ReaderSchema, registry_url: str) -> StructType:
    """The value's struct for a JSON Schema reader schema (fetched by id with its references)."""
    root, refs = json_documents(directory(registry_url).by_id(reader.schema_id))
    value = _top(root, refs, reader.describe()).type
    assert isinstance(value, StructType)
    return value


class JsonSchemaValueDecoder:
    """``ValueDecoder`` of JSON Schema values (module doc); one per split."""

    what = "JSON"

    def __init__(self, registry_url: str, reader: ReaderSchema) -> None:
        self.schemas = directory(registry_url)
        root, refs = json_documents(self.schemas.by_id(reader.schema_id))
        self._convert = _top(root, refs, reader.describe()).convert

    def decode(self, data: bytes) -> dict[str, Any]:
        from sluice.schemas.serde import decode_header

        schema_id, body = decode_header(data)
        validator = _validator(self.schemas.by_id(schema_id))
        try:
            document = json.loads(bytes(body).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UndecodableJsonError(
                f"JSON body of {len(body)} bytes does not parse (schema id {schema_id}): {exc}"
            ) from None
        error = best_error(validator, document)
        if error is not None:
            raise InvalidJsonValueError(
                f"not valid against its writer schema id {schema_id}: {error}"
            )
        converted = self._convert(document, "value")
        assert isinstance(converted, dict)
        return converted


def _validator(registered: RegisteredSchema) -> Any:
    """The writer schema's validator (``sluice.pipeline.sink.json_values``, shared with the
    sink), once its type is checked."""
    if registered.schema_type != "JSON":
        raise WrongSchemaTypeError(
            f"schema id {registered.schema_id} is a {registered.schema_type} schema, expected "
            "JSON (valueFormat=json-schema)"
        )
    return json_validator(registered)
