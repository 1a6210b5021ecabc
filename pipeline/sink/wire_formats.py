"""The typed value formats, named once: ``valueFormat=avro|json-schema|protobuf``.

Each is Confluent's wire format of one registry ``schemaType`` (magic byte 0, the 4-byte schema
id, for Protobuf the message indexes, then the body). ``ValueFormat`` names them for every
part of Sluice that reads or writes typed values — the source and the nightly load
(``sluice.pipeline.source.value_format`` chooses a format's decoder), the sink (its encoder)
and the console tools. It lives in the sink because the sink is the lower of the two: the
source imports the sink (``SluiceDataSource`` hands writes to it), never the other way.
``binary``, the default, is no format: the value's bytes as they are.

Immutable; thread-safe.
"""

from __future__ import annotations

import enum

__all__ = ["BINARY", "VALUE_FORMATS", "ValueFormat"]

BINARY = "binary"
"""``valueFormat``'s default: no decoding, Spark's Kafka columns."""


class ValueFormat(enum.StrEnum):
    """A typed value format (its ``valueFormat`` spelling) and its registry schema type."""

    AVRO = "avro"
    JSON_SCHEMA = "json-schema"
    PROTOBUF = "protobuf"

    @property
    def schema_type(self) -> str:
        """The registry's ``schemaType`` of the format's schemas."""
        return {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}[self.value]

    @classmethod
    def parse(cls, value: str | None) -> ValueFormat | None:
        """The format ``value`` names (any case), ``None`` for ``binary`` or nothing; a
        ``ValueError`` naming the formats otherwise."""
        name = (value or BINARY).strip().lower()
        if name == BINARY:
            return None
        try:
            return cls(name)
        except ValueError:
            raise ValueError(
                f"valueFormat: expected {', '.join(VALUE_FORMATS)}, found {name!r}"
            ) from None


VALUE_FORMATS = (BINARY, *(f.value for f in ValueFormat))
"""Every ``valueFormat`` value, ``binary`` first."""
