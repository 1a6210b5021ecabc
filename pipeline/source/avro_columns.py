"""Avro values as typed columns: reader schema -> Spark/Arrow types, framed bytes -> values.

The ``sluice`` source's ``valueFormat=avro`` (``sluice.pipeline.source.data_source``); what every
typed format shares — the reader schema, the Kafka columns beside the value's, the batch
decoder and the error table — is ``sluice.pipeline.source.typed_columns``:

* **driver** — ``avro_value_type`` maps the reader schema (a record) to the value's struct and
  ``output_schema`` puts it beside Kafka's columns.
* **executor** — ``AvroValueDecoder`` decodes one Confluent-framed value (magic 0, 4-byte
  schema id, Avro binary) with its *writer* schema and resolves it to the *reader* schema
  (Avro schema resolution: fields added with a default get it, removed ones are skipped), so
  records written under several compatible versions land in one set of columns. Writer schemas
  are fetched once per id and cached per executor process (``sluice.schemas.serde.AvroDeserializer``
  kept in a module-level cache: Spark reuses its Python workers). ``AvroBatchDecoder`` is the
  ``TypedBatchDecoder`` over it.

Type mapping (Spark's ``SchemaConverters`` for ``from_avro``; every column nullable)::

    Avro                                   Spark                    Arrow
    boolean                                boolean                  bool
    int / long                             int / bigint             int32 / int64
    float / double                         float / double           float32 / float64
    string, enum, string+uuid              string                   string
    bytes, fixed                           binary                   binary
    bytes|fixed + decimal(p, s)            decimal(p, s)            decimal128(p, s)
    int + date                             date                     date32
    int + time-millis, long + time-micros  int / bigint (ms / us)   int32 / int64
    long + timestamp-millis|micros         timestamp                timestamp[us, UTC]
    long + local-timestamp-millis|micros   timestamp_ntz            timestamp[us]
    record                                 struct                   struct
    array / map (string keys)              array / map              list / map
    [null, T] (either order)               T, nullable              T
    [int, long] / [float, double]          bigint / double          int64 / float64

Other unions (``[string, int]``, two records) and recursive records have no column type and
raise ``UnsupportedAvroSchemaError`` on the driver, before any task runs.

Besides the framing errors every format has (``typed_columns``), an Avro value is undecodable
when its body does not decode with its writer schema or resolve to the reader schema
(``UndecodableAvroError``).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sluice.pipeline.source.typed_columns import (
    OutputLayout,
    ReaderSchema,
    TypedBatchDecoder,
    UnsupportedValueSchemaError,
    ValueSchemaError,
    layout_for,
)

__all__ = [
    "AvroBatchDecoder",
    "AvroValueDecoder",
    "UnsupportedAvroSchemaError",
    "avro_to_spark",
    "avro_value_type",
    "output_schema",
]


class UnsupportedAvroSchemaError(UnsupportedValueSchemaError):
    """The reader schema has a construct without a column type; the message names its path."""


# -- Avro -> Spark types ------------------------------------------------------------------------

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


def _expanded(schema_text: str) -> Any:
    from fastavro import parse_schema

    try:
        document = json.loads(schema_text)
        # expand=True inlines every named type except recursive references (left as names).
        return parse_schema(document, expand=True)
    except Exception as exc:  # json or fastavro; both mean "not an Avro schema"
        raise ValueSchemaError(f"reader schema: expected Avro schema JSON, found: {exc}") from exc


def avro_to_spark(schema_text: str) -> DataType:
    """The Spark type of an Avro schema (JSON text); see the module doc for the mapping."""
    return _spark_type(_expanded(schema_text), "value", ())


def _spark_type(schema: Any, path: str, records: tuple[str, ...]) -> DataType:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        raise UnsupportedAvroSchemaError(
            f"{path}: expected a non-recursive schema, found a reference to {schema!r} inside "
            f"itself (records {' > '.join(records)})"
        )
    if isinstance(schema, list):
        return _union_type(schema, path, records)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if kind in ("bytes", "fixed") and logical == "decimal":
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind == "int" and logical == "date":
        return DateType()
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return TimestampNTZType()
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(_spark_type(schema["items"], f"{path}[]", records), True)
    if kind == "map":
        return MapType(StringType(), _spark_type(schema["values"], f"{path}{{}}", records), True)
    if kind == "record":
        name = str(schema.get("name"))
        return StructType(
            [
                StructField(
                    f["name"], _spark_type(f["type"], f"{path}.{f['name']}", (*records, name))
                )
                for f in schema["fields"]
            ]
        )
    if isinstance(kind, dict | list):  # {"type": {...}} wrapping
        return _spark_type(kind, path, records)
    raise UnsupportedAvroSchemaError(f"{path}: expected an Avro type, found {kind!r}")


def _union_type(branches: list[Any], path: str, records: tuple[str, ...]) -> DataType:
    others = [b for b in branches if b != "null"]
    if not others:
        return NullType()
    if len(others) == 1:
        return _spark_type(others[0], path, records)
    names = sorted(b if isinstance(b, str) else str(b.get("type")) for b in others)
    if names == ["int", "long"]:
        return LongType()
    if names == ["double", "float"]:
        return DoubleType()
    raise UnsupportedAvroSchemaError(
        f"{path}: expected a union of null and one type (or int|long, float|double), found "
        f"{names}; Sluice has no column type for it"
    )


# -- value conversions (fastavro's Python values -> what pyarrow takes) -------------------------

Converter = Callable[[Any], Any]


def _converter(schema: Any) -> Converter | None:
    """A function fixing up fastavro's value for pyarrow, or ``None`` when none is needed."""
    if isinstance(schema, str):
        return None
    if isinstance(schema, list):
        branches = [c for c in (_converter(b) for b in schema if b != "null") if c is not None]
        if not branches:
            return None
        only = branches[0]
        return lambda v: None if v is None else only(v)
    kind, logical = schema.get("type"), schema.get("logicalType")
    if isinstance(kind, dict | list):
        return _converter(kind)
    if kind == "string" and logical == "uuid":
        return lambda v: None if v is None else str(v)
    if kind == "int" and logical == "time-millis":
        return lambda v: v if v is None or isinstance(v, int) else _micros(v) // 1000
    if kind == "long" and logical == "time-micros":
        return lambda v: v if v is None or isinstance(v, int) else _micros(v)
    if kind == "array":
        item = _converter(schema["items"])
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    if kind == "map":
        inner = _converter(schema["values"])
        if inner is None:
            return None
        return lambda v: None if v is None else {k: inner(x) for k, x in v.items()}
    if kind == "record":
        fields = [(f["name"], _converter(f["type"])) for f in schema["fields"]]
        fixes = [(n, c) for n, c in fields if c is not None]
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


def _micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


# -- the columns (driver side) ------------------------------------------------------------------


def _nullable(t: DataType) -> DataType:
    """``t`` with every nested field, element and map value nullable."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(t.keyType, _nullable(t.valueType), True)
    return t


def avro_value_type(reader: ReaderSchema) -> StructType:
    """The value's type for an Avro reader schema: a record's struct, every part nullable."""
    value = avro_to_spark(reader.text)
    if not isinstance(value, StructType):
        raise UnsupportedAvroSchemaError(
            f"reader schema {reader.describe()}: expected a record, found {value.simpleString()}"
        )
    value = _nullable(value)
    assert isinstance(value, StructType)
    return value


def output_schema(reader: ReaderSchema, *, nested: bool, include_headers: bool) -> OutputLayout:
    """The columns of an Avro read (``typed_columns.layout_for`` of ``avro_value_type``)."""
    return layout_for(
        reader, avro_value_type(reader), nested=nested, include_headers=include_headers
    )


# -- decoding (executor side) -------------------------------------------------------------------

_DESERIALIZERS: dict[tuple[str, str], Any] = {}
_DESERIALIZERS_LOCK = threading.Lock()


def _deserializer(registry_url: str, reader_text: str) -> Any:
    """The process-wide ``AvroDeserializer`` for (registry, reader schema): its writer-schema
    cache lives as long as the Python worker, so each id is fetched once per executor."""
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.serde import AvroDeserializer

    key = (registry_url, reader_text)
    with _DESERIALIZERS_LOCK:
        found = _DESERIALIZERS.get(key)
        if found is None:
            found = _DESERIALIZERS[key] = AvroDeserializer(
                RegistryClient(registry_url), reader_text
            )
        return found


class AvroValueDecoder:
    """``ValueDecoder`` of Avro: the writer schema by the header's id, resolved to the reader
    schema, fastavro's values fixed up for pyarrow (module doc). One per split."""

    what = "Avro"

    def __init__(self, registry_url: str, reader: ReaderSchema) -> None:
        self.deserializer = _deserializer(registry_url, reader.text)
        expanded = _expanded(reader.text)
        fields = [(f["name"], _converter(f["type"])) for f in expanded["fields"]]
        self._fixes = [(n, c) for n, c in fields if c is not None]

    def decode(self, data: bytes) -> dict[str, Any]:
        record = dict(self.deserializer.deserialize(data))
        for name, conv in self._fixes:
            record[name] = conv(record.get(name))
        return record


class AvroBatchDecoder(TypedBatchDecoder):
    """``TypedBatchDecoder`` over an ``AvroValueDecoder``; one per split, on the executor."""

    def __init__(
        self, registry_url: str, reader: ReaderSchema, layout: OutputLayout, *, fail: bool
    ) -> None:
        super().__init__(AvroValueDecoder(registry_url, reader), layout, fail=fail)
        self.registry_url = registry_url
        self.reader = reader
