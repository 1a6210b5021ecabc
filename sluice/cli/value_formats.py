"""How ``sluice produce`` and ``sluice consume`` turn a line into a value and back.

``--value-format text`` (the default) sends each stdin line's bytes and prints a value as text,
as Kafka's console tools do. ``--value-format avro`` is ``kafka-avro-console-producer`` /
``-consumer``: ``produce`` reads one JSON document per line, encodes it with the Avro schema of
``--value-schema FILE`` (an ``.avsc``) registered under ``--value-subject`` (default
``<topic>-value``) in the registry at ``--registry URL``, and sends it Confluent-framed (magic
byte, schema id, Avro binary: ``sluice.schemas.serde``); ``consume`` decodes each value with
its writer schema from the registry and prints it as one line of JSON (bytes as latin-1 text,
dates and times in ISO 8601, as ``json.dumps(default=...)`` below).

``--value-format json-schema`` and ``--value-format protobuf`` are
``kafka-json-schema-console-producer`` / ``kafka-protobuf-console-producer`` and their
consumers, with the same flags: ``produce`` registers ``--value-schema FILE`` (a JSON Schema
document, or ``.proto`` text) with its ``schemaType`` under the subject; a JSON line is
validated against the schema and sent as magic byte, schema id, UTF-8 JSON — or, for Protobuf,
parsed into the schema's message (``--value-message``, a full name; default the file's first)
by Protobuf's JSON mapping and sent with its message indexes. ``consume`` finds each value's
writer schema by the id in its header (``sluice.pipeline.sink.registry_schemas``) and prints
the JSON document, or the Protobuf message in Protobuf's JSON mapping with its fields' proto
names — one line each. A value that is not of the format (wrong magic byte, an id of another
schema type, an unknown id, a body that does not parse) is exit 1 naming the reason.

A ``ValueFormat`` is an ``encode(line)`` and a ``decode(bytes)``.

A registry that does not answer is exit 3 (``RegistryConnectionError``, ``sluice.cli.errors``);
a line that is not JSON, or a record the schema does not take, is exit 1 naming the line's
number. Objects are built once per command; ``encode``/``decode`` are for its one thread.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import uuid
from pathlib import Path
from typing import Any, Protocol

from sluice.cli.errors import CommandError, CommandUsageError

__all__ = ["VALUE_FORMATS", "ValueFormat", "add_value_format_arguments", "value_format"]

VALUE_FORMATS = ("text", "avro", "json-schema", "protobuf")


class ValueFormat(Protocol):
    def encode(self, line: str, number: int) -> bytes: ...

    def decode(self, data: bytes | None) -> str: ...


class _Text:
    def encode(self, line: str, number: int) -> bytes:
        return line.encode()

    def decode(self, data: bytes | None) -> str:
        return data.decode(errors="replace") if data is not None else "null"


def _plain(value: Any) -> Any:
    """A JSON stand-in for what fastavro decodes and ``json`` cannot write."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"cannot print a {type(value).__name__} as JSON")


class _Avro:
    def __init__(self, registry: str, schema_file: str | None, subject: str | None) -> None:
        from sluice.schemas.serde import AvroDeserializer, AvroSerializer

        self.serializer = None
        if schema_file is not None and subject is not None:
            try:
                text = Path(schema_file).read_text()
            except OSError as exc:
                raise CommandUsageError(
                    f"--value-schema: cannot read {schema_file}: {exc}"
                ) from None
            self.serializer = AvroSerializer({"schema.registry.url": registry}, text, subject)
        self.deserializer = AvroDeserializer({"schema.registry.url": registry})

    def encode(self, line: str, number: int) -> bytes:
        from sluice.schemas.errors import UnencodableRecordError

        assert self.serializer is not None
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"line {number}: expected a JSON document, found {exc}") from None
        try:
            return self.serializer.serialize(record)
        except UnencodableRecordError as exc:
            raise CommandError(f"line {number}: {exc}") from None

    def decode(self, data: bytes | None) -> str:
        if data is None:
            return "null"
        return json.dumps(self.deserializer.deserialize(data), default=_plain)


class _Registered:
    """What JSON Schema and Protobuf share: the schema file registered with its type (when
    producing) and every writer schema by id (``registry_schemas.directory``)."""

    schema_type = ""

    def __init__(self, registry: str, schema_file: str | None, subject: str | None) -> None:
        from sluice.pipeline.sink.registry_schemas import directory
        from sluice.schemas.client import RegistryClient

        self.schemas = directory(registry)
        self.schema_id: int | None = None
        if schema_file is not None and subject is not None:
            try:
                text = Path(schema_file).read_text()
            except OSError as exc:
                raise CommandUsageError(
                    f"--value-schema: cannot read {schema_file}: {exc}"
                ) from None
            with RegistryClient(registry) as client:
                self.schema_id = client.register(subject, text, schema_type=self.schema_type)

    def writer(self, data: bytes) -> tuple[Any, memoryview]:
        """The registered writer schema of ``data`` and its body (``CommandError`` if ``data``
        is not of this format)."""
        from sluice.schemas.errors import SerdeError
        from sluice.schemas.serde import decode_header

        try:
            schema_id, body = decode_header(data)
            registered = self.schemas.by_id(schema_id)
        except SerdeError as exc:
            raise CommandError(f"a value: {exc}") from None
        if registered.schema_type != self.schema_type:
            raise CommandError(
                f"a value: schema id {schema_id} is a {registered.schema_type} schema, "
                f"expected {self.schema_type}"
            )
        return registered, body

    @staticmethod
    def document(line: str, number: int) -> Any:
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"line {number}: expected a JSON document, found {exc}") from None


class _JsonSchema(_Registered):
    schema_type = "JSON"

    def encode(self, line: str, number: int) -> bytes:
        from sluice.pipeline.sink.json_values import best_error, json_validator
        from sluice.schemas.serde import encode_header

        assert self.schema_id is not None
        document = self.document(line, number)
        error = best_error(json_validator(self.schemas.by_id(self.schema_id)), document)
        if error is not None:
            raise CommandError(f"line {number}: not valid against schema id {self.schema_id}: "
                               f"{error}")  # fmt: skip
        body = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        return encode_header(self.schema_id) + body.encode("utf-8")

    def decode(self, data: bytes | None) -> str:
        if data is None:
            return "null"
        _, body = self.writer(data)
        try:
            document = json.loads(bytes(body).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(f"a value: expected a JSON body, found {exc}") from None
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


class _Protobuf(_Registered):
    schema_type = "PROTOBUF"

    def __init__(
        self, registry: str, schema_file: str | None, subject: str | None, message: str | None
    ) -> None:
        super().__init__(registry, schema_file, subject)
        self.message = message

    def encode(self, line: str, number: int) -> bytes:
        from google.protobuf import json_format

        from sluice.pipeline.sink.protobuf_descriptors import (
            UnknownMessageError,
            encode_message_indexes,
            indexes_of,
            message_class,
        )
        from sluice.schemas.serde import encode_header

        assert self.schema_id is not None
        try:
            cls = message_class(self.schemas.by_id(self.schema_id), self.message)
        except UnknownMessageError as exc:
            raise CommandUsageError(f"--value-message: {exc}") from None
        try:
            message = json_format.ParseDict(self.document(line, number), cls())
        except json_format.ParseError as exc:
            raise CommandError(f"line {number}: {exc}") from None
        indexes = encode_message_indexes(indexes_of(cls.DESCRIPTOR))
        return encode_header(self.schema_id) + indexes + bytes(message.SerializeToString())

    def decode(self, data: bytes | None) -> str:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        from sluice.pipeline.sink.protobuf_descriptors import (
            message_class,
            message_indexes,
            message_name,
        )
        from sluice.schemas.errors import SerdeError

        if data is None:
            return "null"
        registered, rest = self.writer(data)
        try:
            indexes, body = message_indexes(rest)
            cls = message_class(registered, message_name(registered, indexes))
            message = cls.FromString(bytes(body))
        except (SerdeError, DecodeError) as exc:
            raise CommandError(f"a value: {exc}") from None
        return json.dumps(
            json_format.MessageToDict(message, preserving_proto_field_name=True),
            separators=(",", ":"),
            ensure_ascii=False,
        )


def add_value_format_arguments(parser: argparse.ArgumentParser, *, producing: bool) -> None:
    """``--value-format``, ``--registry`` and (for ``produce``) ``--value-schema`` and
    ``--value-subject`` on ``parser``."""
    parser.add_argument(
        "--value-format", choices=VALUE_FORMATS, default="text",
        help="text (default), or avro, json-schema, protobuf (Confluent-framed, through "
        "--registry; JSON lines in and out)",
    )  # fmt: skip
    parser.add_argument("--registry", metavar="URL",
                        help="the schema registry (avro, json-schema, protobuf)")  # fmt: skip
    if producing:
        parser.add_argument(
            "--value-schema", metavar="FILE",
            help="the schema the JSON lines are encoded with: an .avsc, a JSON Schema, a .proto",
        )  # fmt: skip
        parser.add_argument(
            "--value-subject", help="the subject to register it under (default <topic>-value)"
        )
        parser.add_argument(
            "--value-message", metavar="NAME",
            help="protobuf: the message of the schema the lines are (default the first)",
        )  # fmt: skip


def value_format(args: argparse.Namespace, *, producing: bool) -> ValueFormat:
    """The ``ValueFormat`` the parsed ``args`` ask for; ``CommandUsageError`` when a flag the
    format needs is missing."""
    if args.value_format == "text":
        return _Text()
    named = f"--value-format {args.value_format}"
    if not args.registry:
        raise CommandUsageError(f"{named}: expected --registry URL, found none")
    if producing and not args.value_schema:
        raise CommandUsageError(f"{named}: expected --value-schema FILE, found none")
    message = getattr(args, "value_message", None)
    if message is not None and args.value_format != "protobuf":
        raise CommandUsageError(f"--value-message: expected only with --value-format protobuf, "
                                f"found {named}")  # fmt: skip
    subject = (args.value_subject or f"{args.topic}-value") if producing else None
    schema_file = args.value_schema if producing else None
    if args.value_format == "json-schema":
        return _JsonSchema(args.registry, schema_file, subject)
    if args.value_format == "protobuf":
        return _Protobuf(args.registry, schema_file, subject, message)
    return _Avro(args.registry, schema_file, subject)
