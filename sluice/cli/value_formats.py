"""How ``sluice produce`` and ``sluice consume`` turn a line into a value and back.

``--value-format text`` (the default) sends each stdin line's bytes and prints a value as text,
as Kafka's console tools do. ``--value-format avro`` is ``kafka-avro-console-producer`` /
``-consumer``: ``produce`` reads one JSON document per line, encodes it with the Avro schema of
``--value-schema FILE`` (an ``.avsc``) registered under ``--value-subject`` (default
``<topic>-value``) in the registry at ``--registry URL``, and sends it Confluent-framed (magic
byte, schema id, Avro binary: ``sluice.schemas.serde``); ``consume`` decodes each value with
its writer schema from the registry and prints it as one line of JSON (bytes as latin-1 text,
dates and times in ISO 8601, as ``json.dumps(default=...)`` below). Later formats (JSON
Schema, Protobuf) plug into the same flags: a ``ValueFormat`` is an ``encode(line)`` and a
``decode(bytes)``.

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

VALUE_FORMATS = ("text", "avro")


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


def add_value_format_arguments(parser: argparse.ArgumentParser, *, producing: bool) -> None:
    """``--value-format``, ``--registry`` and (for ``produce``) ``--value-schema`` and
    ``--value-subject`` on ``parser``."""
    parser.add_argument(
        "--value-format", choices=VALUE_FORMATS, default="text",
        help="text (default) or avro (Confluent-framed, through --registry)",
    )  # fmt: skip
    parser.add_argument("--registry", metavar="URL", help="the schema registry (avro)")
    if producing:
        parser.add_argument("--value-schema", metavar="FILE",
                            help="avro: the .avsc the JSON lines are encoded with")  # fmt: skip
        parser.add_argument(
            "--value-subject", help="avro: the subject to register it under (default <topic>-value)"
        )


def value_format(args: argparse.Namespace, *, producing: bool) -> ValueFormat:
    """The ``ValueFormat`` the parsed ``args`` ask for; ``CommandUsageError`` when a flag the
    format needs is missing."""
    if args.value_format == "text":
        return _Text()
    if not args.registry:
        raise CommandUsageError("--value-format avro: expected --registry URL, found none")
    if producing and not args.value_schema:
        raise CommandUsageError("--value-format avro: expected --value-schema FILE, found none")
    subject = (args.value_subject or f"{args.topic}-value") if producing else None
    return _Avro(args.registry, args.value_schema if producing else None, subject)
