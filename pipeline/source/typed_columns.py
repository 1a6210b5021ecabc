"""Typed values, whatever their format: the reader schema, the columns, the error table.

What ``valueFormat=avro|json-schema|protobuf`` share (``sluice.pipeline.source.value_format``
picks the format's own module: ``avro_columns``, ``json_schema_columns``,
``protobuf_columns``):

* **driver** — ``resolve_reader_schema`` picks the reader schema from the registry (a subject's
  latest or given version, or an id) and checks it is of the format's type; ``layout_for``
  puts the value's columns (the format's type mapping of the reader schema) beside Kafka's
  metadata columns.
* **executor** — ``TypedBatchDecoder.decode`` turns one raw batch of the reader
  (``sluice.pipeline.source.split_reader.ARROW_SCHEMA``) into a typed batch and a batch of
  undecodable records (``ERROR_ARROW_SCHEMA``), through the format's ``ValueDecoder`` (one
  framed value in, the value's columns out).

Every value is Confluent-framed::

    offset  size  field
    0       1     magic byte, 0
    1       4     schema id, big-endian (the writer schema in the registry)
    5       ...   Protobuf only: the message-index array (zigzag varints; one 0 = the first
                  message), then the body: Avro binary / UTF-8 JSON / Protobuf binary

An undecodable record is one whose value is null (a tombstone), too short for the header, has a
magic byte other than 0, names a schema id the registry does not know (or a schema of another
type), or whose body does not decode (or validate, or fit the reader's columns). The decoder
never drops one: it goes to the error batch with its topic, partition, offset, timestamp, key,
raw value, schema id (when the header was readable), the error's class name and the reason; or,
with ``fail=True``, it raises ``UndecodableValueError`` naming topic, partition and offset.

A registry that cannot be reached is not a property of the record: ``RegistryConnectionError``
propagates and fails the task (Spark retries it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "ERROR_ARROW_SCHEMA",
    "KAFKA_COLUMNS",
    "KAFKA_TYPES",
    "DecodeStats",
    "NullValueError",
    "OutputLayout",
    "ReaderSchema",
    "TypedBatchDecoder",
    "UndecodableValueError",
    "UnsupportedValueSchemaError",
    "ValueDecodeError",
    "ValueDecoder",
    "ValueSchemaError",
    "layout_for",
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


class UnsupportedValueSchemaError(ValueSchemaError):
    """The reader schema has a construct without a column type; the message names its path."""


class UndecodableValueError(RuntimeError):
    """A record's value does not decode and ``onDecodeError=fail``; names topic/partition/offset."""


class ValueDecodeError(ValueError):
    """Base of the record-level failures the format modules raise (beside the serde's own
    ``SerdeError``s): each is an error-table reason, its class name the ``error`` column."""


class NullValueError(ValueDecodeError):
    """A record without a value (a tombstone): nothing to decode. An error-table reason."""


# -- the reader schema (driver side) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReaderSchema:
    """The reader schema of a read: its text, registry id, where it came from, and its type
    (the registry's ``schemaType``: AVRO, JSON or PROTOBUF). Picklable."""

    text: str
    schema_id: int
    subject: str | None = None
    version: int | None = None
    schema_type: str = "AVRO"

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
    schema_type: str = "AVRO",
    value_format: str = "avro",
) -> ReaderSchema:
    """Ask the registry for the reader schema: ``schema_id``, else ``subject`` (default
    ``{topic}-value`` for every topic, which must agree) at ``version`` (default latest). It
    must be of ``schema_type`` (``value_format`` names the option in messages)."""
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.errors import RegistryError

    client = RegistryClient(registry_url)
    if schema_id is not None:
        try:
            doc = client.request("GET", f"/schemas/ids/{int(schema_id)}")
        except RegistryError as exc:
            raise ValueSchemaError(f"valueSchemaId {schema_id}: {exc}") from exc
        found_type = str(doc.get("schemaType") or "AVRO")
        reader = ReaderSchema(str(doc["schema"]), schema_id, schema_type=found_type)
        return _of_type(reader, schema_type, value_format)
    if subject:
        subjects = [subject]
    else:
        names = sorted(set(topics or ()))
        if not names:
            raise ValueSchemaError(
                f"valueFormat={value_format}: expected topics named by subscribe or assign (the "
                "subject is <topic>-value), found none; with subscribePattern set "
                "valueSchemaSubject or valueSchemaId"
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
        reader = ReaderSchema(
            str(doc["schema"]),
            int(doc["id"]),
            s,
            int(doc["version"]),
            str(doc.get("schemaType") or "AVRO"),
        )
        found.append(_of_type(reader, schema_type, value_format))
    ids = {r.schema_id for r in found}
    if len(ids) > 1:
        listing = ", ".join(f"{r.subject} -> id {r.schema_id}" for r in found)
        raise ValueSchemaError(
            f"valueFormat={value_format}: expected one reader schema for all topics, found "
            f"{listing}; read the topics separately or set valueSchemaSubject / valueSchemaId"
        )
    return found[0]


def _of_type(reader: ReaderSchema, schema_type: str, value_format: str) -> ReaderSchema:
    if reader.schema_type != schema_type:
        raise ValueSchemaError(
            f"valueFormat={value_format}: expected a {schema_type} reader schema, found "
            f"{reader.schema_type} schema {reader.describe()}"
        )
    return reader


# -- the columns (driver side) ------------------------------------------------------------------


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


def layout_for(
    reader: ReaderSchema, value: StructType, *, nested: bool, include_headers: bool
) -> OutputLayout:
    """The columns of a typed read whose value has type ``value`` (the format's mapping of
    ``reader``). Flat (default): the value's fields, then Kafka's columns; a Kafka column whose
    name a value field takes is renamed ``kafka_<name>``. Nested (``valueColumns=struct``):
    Spark's Kafka columns with ``value`` a struct."""
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
            raise UnsupportedValueSchemaError(
                f"reader schema {reader.describe()}: fields {name!r} and {renamed!r} both "
                "collide with Kafka's columns; use valueColumns=struct"
            )
        mapping[name] = renamed
    columns = list(value.fields) + [StructField(mapping[n], KAFKA_TYPES[n]) for n in kafka_names]
    return OutputLayout(StructType(columns), tuple(value.names), False, mapping)


# -- decoding (executor side) -------------------------------------------------------------------


class ValueDecoder(Protocol):
    """One format's decoding of one framed value, on the executor.

    ``decode`` returns the value as a dict of the reader's top-level fields, each already in
    the form ``pyarrow.array`` takes for its column type; it raises a ``SerdeError`` or a
    ``ValueDecodeError`` for an undecodable value (an error-table row) and lets
    ``RegistryConnectionError`` through."""

    what: str  # "Avro", "JSON", "Protobuf": for messages

    def decode(self, data: bytes) -> dict[str, Any]: ...


@dataclass(slots=True)
class DecodeStats:
    """What a decoder did so far: errors and the writer schema ids of decoded records."""

    decoded: int = 0
    errors: int = 0
    schema_ids: set[int] = field(default_factory=set)


class TypedBatchDecoder:
    """Raw Kafka batches -> (typed batch, error batch); one per split, on the executor, used
    by one thread."""

    def __init__(self, values: ValueDecoder, layout: OutputLayout, *, fail: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.values = values
        self.layout = layout
        self.fail = fail
        self.arrow_schema = to_arrow_schema(layout.schema, timezone="UTC")
        self._value_type = self.arrow_schema.field("value").type if layout.nested else None
        self.stats = DecodeStats()

    def decode(self, raw: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """Decode every value of ``raw`` (``split_reader.ARROW_SCHEMA[_NO_HEADERS]``)."""
        from sluice.schemas.errors import SerdeError
        from sluice.schemas.serde import decode_header

        values = raw.column("value").to_pylist()
        offsets = raw.column("offset").to_pylist()
        good: list[int] = []
        decoded: list[dict[str, Any]] = []
        bad: list[int] = []
        errors: list[tuple[int | None, str, str]] = []
        what = self.values.what
        for i, data in enumerate(values):
            schema_id: int | None = None
            try:
                if data is None:
                    raise NullValueError(f"expected a {what} value, found null (a tombstone)")
                schema_id, _ = decode_header(data)
                decoded.append(self.values.decode(data))
            except (SerdeError, ValueDecodeError) as exc:
                if self.fail:
                    topic, partition = raw.column("topic")[i], raw.column("partition")[i]
                    raise UndecodableValueError(
                        f"{topic}-{partition} offset {offsets[i]}: cannot decode the {what} "
                        f"value ({type(exc).__name__}: {exc}); onDecodeError=fail stops the job "
                        "(set onDecodeError=errorTable to route such records to an error table)"
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

    def _typed(
        self, raw: pa.RecordBatch, rows: list[int], values: list[dict[str, Any]]
    ) -> pa.RecordBatch:
        kafka = raw.take(pa.array(rows, pa.int64())) if len(rows) != raw.num_rows else raw
        arrays: dict[str, pa.Array] = {}
        if self.layout.nested:
            arrays["value"] = pa.array(values, self._value_type)
        else:
            for name in self.layout.value_fields:
                column = [v.get(name) for v in values]
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
