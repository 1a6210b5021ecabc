"""Avro values as typed columns: reader schema -> Spark/Arrow types, framed bytes -> Arrow.

The ``sluice`` source's ``valueFormat=avro`` (``sluice.pipeline.source.data_source``) in one module:

* **driver** — ``resolve_reader_schema`` picks the reader schema from the registry (a subject's
  latest or given version, or an id) and ``output_schema`` turns it into the DataFrame's
  columns: the value's fields (or one ``value`` struct) beside Kafka's metadata columns.
* **executor** — ``AvroBatchDecoder.decode`` turns one raw batch of the reader
  (``sluice.pipeline.source.split_reader.ARROW_SCHEMA``) into a typed batch and a batch of
  undecodable
  records (``ERROR_ARROW_SCHEMA``). Each value is Confluent-framed (magic 0, 4-byte schema id,
  Avro binary); it is decoded with its *writer* schema and resolved to the *reader* schema
  (Avro schema resolution: fields added with a default get it, removed ones are skipped), so
  records written under several compatible versions land in one set of columns. Writer schemas
  are fetched once per id and cached per executor process (``sluice.schemas.serde.AvroDeserializer``
  kept in a module-level cache: Spark reuses its Python workers).

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

An undecodable record is one whose value is null (a tombstone), too short for the header, has a
magic byte other than 0, names a schema id the registry does not know, or whose body does not
decode with its writer schema or resolve to the reader schema. The decoder never drops one:
it goes to the error batch with its topic, partition, offset, timestamp, key, raw value, schema
id (when the header was readable), the error's class name and the reason; or, with
``fail=True``, it raises ``AvroDecodeError`` naming topic, partition and offset.

A registry that cannot be reached is not a property of the record: ``RegistryConnectionError``
propagates and fails the task (Spark retries it).
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
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

__all__ = [
    "ERROR_ARROW_SCHEMA",
    "KAFKA_COLUMNS",
    "AvroBatchDecoder",
    "AvroDecodeError",
    "DecodeStats",
    "NullValueError",
    "OutputLayout",
    "ReaderSchema",
    "UnsupportedAvroSchemaError",
    "ValueSchemaError",
    "avro_to_spark",
    "output_schema",
    "resolve_reader_schema",
    "write_error_file",
]

KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
"""Spark's Kafka source columns other than ``value``, in its order."""

KAFKA_TYPES: dict[str, DataType] = {
    "key": BinaryType(),
    "topic": StringType(),
    "partition": IntegerType(),
    "offset": LongType(),
    "timestamp": TimestampType(),
    "timestampType": IntegerType(),
    "headers": ArrayType(
        StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    ),
}

ERROR_ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),  # the raw bytes, exactly as in the log
        ("schema_id", pa.int32()),  # from the header, null when it could not be read
        ("error", pa.string()),  # WrongMagicByteError, UnknownSchemaIdError, ...
        ("reason", pa.string()),
    ]
)
"""The error table's columns: one row per undecodable record."""

KAFKA_PREFIX = "kafka_"


class ValueSchemaError(ValueError):
    """The reader schema cannot be chosen (bad options, unknown subject, topics disagree)."""


class UnsupportedAvroSchemaError(ValueSchemaError):
    """The reader schema has a construct without a column type; the message names its path."""


class AvroDecodeError(RuntimeError):
    """A record's value does not decode and ``onDecodeError=fail``; names topic/partition/offset."""


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


# -- the reader schema (driver side) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReaderSchema:
    """The reader schema of a read: its text, registry id, and where it came from."""

    text: str
    schema_id: int
    subject: str | None = None
    version: int | None = None

    def describe(self) -> str:
        where = f"{self.subject} version {self.version}" if self.subject else "by id"
        return f"id {self.schema_id} ({where})"


def resolve_reader_schema(
    registry_url: str,
    topics: Iterable[str] | None,
    *,
    subject: str | None = None,
    version: str | None = None,
    schema_id: int | None = None,
) -> ReaderSchema:
    """Ask the registry for the reader schema: ``schema_id``, else ``subject`` (default
    ``{topic}-value`` for every topic, which must agree) at ``version`` (default latest)."""
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.errors import RegistryError

    client = RegistryClient(registry_url)
    if schema_id is not None:
        try:
            return ReaderSchema(client.get_schema(schema_id), schema_id)
        except RegistryError as exc:
            raise ValueSchemaError(f"valueSchemaId {schema_id}: {exc}") from exc
    if subject:
        subjects = [subject]
    else:
        names = sorted(set(topics or ()))
        if not names:
            raise ValueSchemaError(
                "valueFormat=avro: expected topics named by subscribe or assign (the subject is "
                "<topic>-value), found none; with subscribePattern set valueSchemaSubject or "
                "valueSchemaId"
            )
        subjects = [f"{t}-value" for t in names]
    wanted = (version or "latest").strip()
    if wanted != "latest" and not (wanted.isascii() and wanted.isdigit()):
        raise ValueSchemaError(f"valueSchemaVersion: expected latest or a number, found {wanted!r}")
    found: list[ReaderSchema] = []
    for s in subjects:
        try:
            doc = client.get_version(s, wanted)
        except RegistryError as exc:
            raise ValueSchemaError(f"subject {s!r} version {wanted}: {exc}") from exc
        found.append(ReaderSchema(str(doc["schema"]), int(doc["id"]), s, int(doc["version"])))
    ids = {r.schema_id for r in found}
    if len(ids) > 1:
        listing = ", ".join(f"{r.subject} -> id {r.schema_id}" for r in found)
        raise ValueSchemaError(
            f"valueFormat=avro: expected one reader schema for all topics, found {listing}; "
            "read the topics separately or set valueSchemaSubject / valueSchemaId"
        )
    return found[0]


@dataclass(frozen=True, slots=True)
class OutputLayout:
    """The DataFrame's columns for a reader schema; picklable (sent to executors)."""

    schema: StructType  # every column, in order
    value_fields: tuple[str, ...]  # the reader schema's top-level fields
    nested: bool  # valueColumns=struct: the value is one ``value`` struct column
    kafka: dict[str, str] = field(default_factory=dict)  # Kafka column -> its name here

    def column(self, kafka_name: str) -> str:
        """The name of Kafka's column ``kafka_name`` (``timestamp`` may be ``kafka_timestamp``)."""
        return self.kafka[kafka_name]


def _nullable(t: DataType) -> DataType:
    """``t`` with every nested field, element and map value nullable."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(t.keyType, _nullable(t.valueType), True)
    return t


def output_schema(reader: ReaderSchema, *, nested: bool, include_headers: bool) -> OutputLayout:
    """The columns of an Avro read. Flat (default): the value's fields, then Kafka's columns;
    a Kafka column whose name a value field takes is renamed ``kafka_<name>``. Nested
    (``valueColumns=struct``): Spark's Kafka columns with ``value`` a struct."""
    value = avro_to_spark(reader.text)
    if not isinstance(value, StructType):
        raise UnsupportedAvroSchemaError(
            f"reader schema {reader.describe()}: expected a record, found {value.simpleString()}"
        )
    value = _nullable(value)
    assert isinstance(value, StructType)
    kafka_names = [n for n in KAFKA_COLUMNS if include_headers or n != "headers"]
    if nested:
        columns = [StructField("key", KAFKA_TYPES["key"]), StructField("value", value)]
        columns += [StructField(n, KAFKA_TYPES[n]) for n in kafka_names if n != "key"]
        return OutputLayout(
            StructType(columns), tuple(value.names), True, {n: n for n in kafka_names}
        )
    taken = set(value.names)
    mapping: dict[str, str] = {}
    for name in kafka_names:
        renamed = name if name not in taken else KAFKA_PREFIX + name
        if renamed in taken:
            raise UnsupportedAvroSchemaError(
                f"reader schema {reader.describe()}: fields {name!r} and {renamed!r} both "
                "collide with Kafka's columns; use valueColumns=struct"
            )
        mapping[name] = renamed
    columns = list(value.fields) + [StructField(mapping[n], KAFKA_TYPES[n]) for n in kafka_names]
    return OutputLayout(StructType(columns), tuple(value.names), False, mapping)


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


@dataclass(slots=True)
class DecodeStats:
    """What a decoder did so far: errors and the writer schema ids of decoded records."""

    decoded: int = 0
    errors: int = 0
    schema_ids: set[int] = field(default_factory=set)


class AvroBatchDecoder:
    """Raw Kafka batches -> (typed batch, error batch); one per split, on the executor."""

    def __init__(
        self, registry_url: str, reader: ReaderSchema, layout: OutputLayout, *, fail: bool
    ) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.registry_url = registry_url
        self.reader = reader
        self.layout = layout
        self.fail = fail
        self.arrow_schema = to_arrow_schema(layout.schema, timezone="UTC")
        expanded = _expanded(reader.text)
        self._value_type = self.arrow_schema.field("value").type if layout.nested else None
        # fastavro's values -> pyarrow's: per top-level field (flat), or the whole record.
        self._converters = {f["name"]: _converter(f["type"]) for f in expanded["fields"]}
        self._record_converter = _converter(expanded)
        self.stats = DecodeStats()

    def decode(self, raw: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """Decode every value of ``raw`` (``kafka_reader.ARROW_SCHEMA[_NO_HEADERS]``)."""
        from sluice.schemas.errors import SerdeError
        from sluice.schemas.serde import decode_header

        deserializer = _deserializer(self.registry_url, self.reader.text)
        values = raw.column("value").to_pylist()
        offsets = raw.column("offset").to_pylist()
        good: list[int] = []
        decoded: list[Any] = []
        bad: list[int] = []
        errors: list[tuple[int | None, str, str]] = []
        for i, data in enumerate(values):
            schema_id: int | None = None
            try:
                if data is None:
                    raise NullValueError("expected an Avro value, found null (a tombstone)")
                schema_id, _ = decode_header(data)
                decoded.append(deserializer.deserialize(data))
            except (SerdeError, NullValueError) as exc:
                if self.fail:
                    topic, partition = raw.column("topic")[i], raw.column("partition")[i]
                    raise AvroDecodeError(
                        f"{topic}-{partition} offset {offsets[i]}: cannot decode the Avro value "
                        f"({type(exc).__name__}: {exc}); onDecodeError=fail stops the job (set "
                        "onDecodeError=errorTable to route such records to an error table)"
                    ) from exc
                bad.append(i)
                errors.append((schema_id, type(exc).__name__, str(exc)))
                continue
            good.append(i)
            assert schema_id is not None
            self.stats.schema_ids.add(schema_id)
        self.stats.decoded += len(good)
        self.stats.errors += len(bad)
        return self._typed(raw, good, decoded), self._errors(raw, bad, errors)

    def _typed(self, raw: pa.RecordBatch, rows: list[int], values: list[Any]) -> pa.RecordBatch:
        kafka = raw.take(pa.array(rows, pa.int64())) if len(rows) != raw.num_rows else raw
        arrays: dict[str, pa.Array] = {}
        if self.layout.nested:
            conv = self._record_converter
            records = [conv(v) for v in values] if conv else values
            arrays["value"] = pa.array(records, self._value_type)
        else:
            for name in self.layout.value_fields:
                conv = self._converters.get(name)
                column = [v.get(name) for v in values]
                if conv is not None:
                    column = [conv(x) for x in column]
                arrays[name] = pa.array(column, self.arrow_schema.field(name).type)
        for kafka_name, name in self.layout.kafka.items():
            arrays[name] = kafka.column(kafka_name)
        return pa.RecordBatch.from_arrays(
            [arrays[f.name] for f in self.arrow_schema], schema=self.arrow_schema
        )

    def _errors(
        self, raw: pa.RecordBatch, rows: list[int], found: list[tuple[int | None, str, str]]
    ) -> pa.RecordBatch:
        picked = raw.take(pa.array(rows, pa.int64()))
        arrays = [
            picked.column("topic"),
            picked.column("partition"),
            picked.column("offset"),
            picked.column("timestamp"),
            picked.column("key"),
            picked.column("value"),
            pa.array([f[0] for f in found], pa.int32()),
            pa.array([f[1] for f in found], pa.string()),
            pa.array([f[2] for f in found], pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=ERROR_ARROW_SCHEMA)


class NullValueError(ValueError):
    """A record without a value (a tombstone): nothing to decode. An error-table reason."""


def write_error_file(directory: str, name: str, batches: Iterable[pa.RecordBatch]) -> str:
    """Write ``batches`` (``ERROR_ARROW_SCHEMA``) as ``<directory>/<name>`` (Parquet) through
    ``pyarrow.fs``; a retried task rewrites the same file. Returns the file's path."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, root = pafs.FileSystem.from_uri(directory if "://" in directory else f"file://{directory}")
    fs.create_dir(root, recursive=True)
    path = posixpath.join(root, name)
    table = pa.Table.from_batches(list(batches), schema=ERROR_ARROW_SCHEMA)
    with fs.open_output_stream(path) as out:
        pq.write_table(table, out)
    return path
