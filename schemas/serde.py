"""Confluent's wire format for Avro values, with the registry as the schema directory.

Layout of one serialized value::

    offset  size  field
    0       1     magic byte, always 0
    1       4     schema id, big-endian signed int (the writer schema in the registry)
    5       n     Avro binary of the value under that schema (no container, no sync marks)

This is what ``confluent_kafka.schema_registry.avro.AvroSerializer`` writes and its
deserializer reads, byte for byte; the tests check both directions.

:class:`AvroSerializer` registers (or only looks up) its schema on first use and keeps the id;
:class:`AvroDeserializer` fetches each writer schema once per id, then decodes with it, and
with the optional reader schema resolves into that shape (Avro schema resolution). Both are
thread-safe; a registry lookup is never made twice for the same id, even under concurrency.

Both take a :class:`~sluice.schemas.client.RegistryClient`, or Confluent's client keys as a
mapping (``{"schema.registry.url": "https://…", "basic.auth.user.info": "user:password",
"schema.registry.ssl.ca.location": "ca.pem"}``; see :mod:`sluice.schemas.client_config`), from
which they build one.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Mapping
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import (
    SchemaNotFoundError,
    TruncatedPayloadError,
    UndecodableAvroError,
    UnencodableRecordError,
    UnknownSchemaIdError,
    WrongMagicByteError,
)

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
HEADER_SIZE = HEADER.size  # 5

SchemaLike = str | Mapping[str, Any] | list[Any]
ClientLike = RegistryClient | Mapping[str, str]


def _client(registry: ClientLike) -> RegistryClient:
    return (
        registry if isinstance(registry, RegistryClient) else RegistryClient.from_config(registry)
    )


def encode_header(schema_id: int) -> bytes:
    """The 5-byte prefix for ``schema_id``."""
    return HEADER.pack(MAGIC_BYTE, schema_id)


def decode_header(data: bytes) -> tuple[int, memoryview]:
    """Split a serialized value into ``(schema_id, avro_body)``; check the magic byte."""
    if len(data) < HEADER_SIZE:
        raise TruncatedPayloadError(
            f"expected at least {HEADER_SIZE} bytes (magic byte + 4-byte schema id), "
            f"found {len(data)}"
        )
    if data[0] != MAGIC_BYTE:
        raise WrongMagicByteError(
            f"expected magic byte {MAGIC_BYTE} (Confluent wire format), found {data[0]}"
        )
    _, schema_id = HEADER.unpack_from(data)
    return schema_id, memoryview(data)[HEADER_SIZE:]


def _schema_text(schema: SchemaLike) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


class AvroSerializer:
    """Encode dicts as Confluent-framed Avro under ``subject`` (e.g. ``"page_views-value"``).

    ``auto_register=False`` only looks the schema up, as Confluent's ``auto.register.schemas``.
    """

    def __init__(
        self,
        registry_client: ClientLike,
        schema: SchemaLike,
        subject: str,
        *,
        auto_register: bool = True,
    ) -> None:
        self.registry_client = _client(registry_client)
        self.subject = subject
        self.schema_text = _schema_text(schema)
        self.auto_register = auto_register
        document = json.loads(self.schema_text)
        self._parsed = parse_schema(document)
        self._name = document.get("name", "?") if isinstance(document, dict) else str(document)
        self._schema_id: int | None = None
        self._lock = threading.Lock()

    @property
    def schema_id(self) -> int:
        """The registry id of the schema (registered or looked up on first call)."""
        if self._schema_id is None:
            with self._lock:
                if self._schema_id is None:
                    if self.auto_register:
                        self._schema_id = self.registry_client.register(
                            self.subject, self.schema_text
                        )
                    else:
                        found = self.registry_client.lookup(self.subject, self.schema_text)
                        self._schema_id = int(found["id"])
        return self._schema_id

    def serialize(self, record: Mapping[str, Any] | Any) -> bytes:
        """Magic byte + schema id + Avro binary of ``record``."""
        out = io.BytesIO()
        out.write(encode_header(self.schema_id))
        try:
            schemaless_writer(out, self._parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise UnencodableRecordError(
                f"record does not match schema {self._name!r} (subject {self.subject!r}): {e}"
            ) from e
        return out.getvalue()

    __call__ = serialize


class AvroDeserializer:
    """Decode Confluent-framed Avro, fetching each writer schema from the registry once."""

    def __init__(
        self, registry_client: ClientLike, reader_schema: SchemaLike | None = None
    ) -> None:
        self.registry_client = _client(registry_client)
        self._reader = (
            parse_schema(json.loads(_schema_text(reader_schema)))
            if reader_schema is not None
            else None
        )
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def writer_schema(self, schema_id: int) -> Any:
        """The parsed writer schema for ``schema_id`` (cached; one registry call per id)."""
        parsed = self._writers.get(schema_id)
        if parsed is None:
            with self._lock:
                parsed = self._writers.get(schema_id)
                if parsed is None:
                    try:
                        text = self.registry_client.get_schema(schema_id)
                    except SchemaNotFoundError as e:
                        raise UnknownSchemaIdError(
                            f"schema id {schema_id} from the message header is not in the "
                            f"registry at {self.registry_client.url}: {e}"
                        ) from e
                    parsed = self._writers[schema_id] = parse_schema(json.loads(text))
        return parsed

    def deserialize(self, data: bytes) -> Any:
        """The value encoded in ``data``, in the reader schema's shape if one was given."""
        schema_id, body = decode_header(data)
        writer = self.writer_schema(schema_id)
        stream = io.BytesIO(body)
        try:
            value = schemaless_reader(stream, writer, self._reader)
        except EOFError as e:
            raise TruncatedPayloadError(
                f"Avro body of {len(body)} bytes ended early for schema id {schema_id}: {e}"
            ) from e
        except Exception as e:  # fastavro raises many types on garbage; all mean the same
            raise UndecodableAvroError(
                f"Avro body of {len(body)} bytes does not decode with schema id {schema_id}: "
                f"{type(e).__name__}: {e}"
            ) from e
        left = len(body) - stream.tell()
        if left:
            raise UndecodableAvroError(
                f"expected the Avro body to end at byte {stream.tell()} for schema id "
                f"{schema_id}, found {left} bytes more"
            )
        return value

    __call__ = deserialize
