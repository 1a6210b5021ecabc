"""The ``sluice`` sink's options: Spark's Kafka sink options parsed into one ``SinkOptions``.

Spark hands a data source its options as ``str -> str`` with the keys lower-cased
(``CaseInsensitiveStringMap``); every key here is matched case-insensitively and named in an
error by its documented spelling. The options, after Spark's ``KafkaSourceProvider`` (sink
side) and the integration guide's "Writing Data to Kafka":

==========================  ===================================================================
``kafka.<setting>``         a producer setting, prefix cut, given to confluent-kafka (librdkafka);
                            a Java client's key (a JAAS line, a PEM truststore) is translated
                            or refused as for the source (``sluice.pipeline.kafka_settings``);
                            ``kafka.bootstrap.servers`` is required.
                            ``kafka.key.serializer`` / ``kafka.value.serializer`` are refused,
                            as Spark refuses them: the sink writes bytes.
``topic``                   the topic of every row; wins over a ``topic`` column (as in Spark)
``valueFormat``             ``binary`` (default: ``value`` is string or binary, sent as is) or
                            ``avro``, ``json-schema``, ``protobuf`` (``value`` is a struct,
                            sent Confluent-framed in that format)
``schema.registry.url``     the registry (a typed ``valueFormat`` only; required there)
``valueSchemaSubject``      the subject (default ``<topic>-value``, which needs the ``topic``
                            option)
``valueSchema``             a path to the schema file (``.avsc``, a JSON Schema ``.json``, a
                            ``.proto``): registered under the subject with the format's
                            ``schemaType`` (or found there, when the registry has it already)
                            before any write
``valueSchemaVersion``      without ``valueSchema``: the subject's version to write with
                            (default ``latest``)
``valueSchemaId``           without ``valueSchema``: a schema id to write with
``valueSchemaMessage``      ``protobuf`` only: the value's message by full name (default the
                            schema's first message)
``flushTimeoutMs``          how long a task waits for its last delivery reports (default: the
                            producer's ``message.timeout.ms`` + 30 s; librdkafka reports every
                            message within ``message.timeout.ms``, so this only bounds a hang)
==========================  ===================================================================

The names of the typed ``valueFormat`` options are the source's (``sluice.pipeline.source``),
so a query reads and writes a topic with the same words. Spark's own options that reach a sink
(``checkpointLocation``, ``path``, ``queryName``) are accepted and ignored; any other key is an
error naming it and the nearest known option.

Producer defaults the sink sets unless a ``kafka.*`` option says otherwise (Spark's sink leaves
them to Kafka's producer defaults, which are the same since Kafka 3.0):
``enable.idempotence=true`` and ``acks=all`` — a retried send after a lost acknowledgement is
not written twice within one producer session, and a record counts as delivered only once
every in-sync replica has it.

Pure functions and immutable values; nothing here performs I/O; thread-safe.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.common.options import positive_int, text
from sluice.pipeline.kafka_settings import translate_java_settings
from sluice.pipeline.sink.wire_formats import ValueFormat

__all__ = [
    "KNOWN_OPTIONS",
    "MissingBootstrapServersError",
    "SinkOptionError",
    "SinkOptions",
    "UnknownSinkOptionError",
    "UnsupportedSerializerError",
    "ValueSchemaOptionError",
    "ValueSchemaOptions",
]

KAFKA_PREFIX = "kafka."

KNOWN_OPTIONS = (
    "topic",
    "valueFormat",
    "schema.registry.url",
    "valueSchemaSubject",
    "valueSchema",
    "valueSchemaVersion",
    "valueSchemaId",
    "valueSchemaMessage",
    "flushTimeoutMs",
)
"""The sink's own options (besides ``kafka.*``), in their documented spelling."""

SPARK_OPTIONS = ("checkpointLocation", "path", "queryName")
"""Options Spark itself may put in a sink's map; not the sink's business."""

PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "client.id": "sluice-sink",
    # librdkafka logs every idle connection it closes at INFO; a task's producer is short-lived.
    "log.connection.close": False,
}
"""Producer settings the sink sets unless a ``kafka.*`` option overrides them."""

DEFAULT_MESSAGE_TIMEOUT_MS = (
    300_000  # librdkafka's message.timeout.ms (Kafka's delivery.timeout.ms)
)
FLUSH_MARGIN_MS = 30_000


class SinkOptionError(ValueError):
    """An option of the sink is missing, unknown or malformed; the message names it."""


class UnknownSinkOptionError(SinkOptionError):
    """An option the sink does not know (a typo, or a source-only option)."""


class MissingBootstrapServersError(SinkOptionError):
    """No ``kafka.bootstrap.servers``: the producer has nowhere to connect."""


class UnsupportedSerializerError(SinkOptionError):
    """``kafka.key.serializer`` / ``kafka.value.serializer``: the sink writes bytes itself."""


class ValueSchemaOptionError(SinkOptionError):
    """A typed ``valueFormat``'s option is missing or malformed."""


@dataclass(frozen=True, slots=True)
class ValueSchemaOptions:
    """How a typed ``valueFormat`` finds its writer schema; picklable.

    Exactly one of: ``schema_path`` (a file registered under ``subject``), ``schema_id``, or
    ``version`` of ``subject`` (``latest`` by default). ``subject`` is ``None`` only with
    ``schema_id``. ``message``: Protobuf's value message (``None``: the first).
    """

    registry_url: str
    subject: str | None
    schema_path: str | None = None
    version: str = "latest"
    schema_id: int | None = None
    value_format: ValueFormat = ValueFormat.AVRO
    message: str | None = None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """One write's options, parsed; picklable (sent to the executors).

    ``producer`` is the confluent-kafka configuration: the ``kafka.*`` options over
    ``PRODUCER_DEFAULTS``. ``topic`` is the ``topic`` option (``None``: each row's ``topic``
    column). ``typed`` is ``None`` for ``valueFormat=binary``.
    """

    producer: dict[str, Any] = field(default_factory=dict)
    topic: str | None = None
    typed: ValueSchemaOptions | None = None
    flush_timeout_s: float = (DEFAULT_MESSAGE_TIMEOUT_MS + FLUSH_MARGIN_MS) / 1000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option map (keys in any case); raise a ``SinkOptionError`` subclass."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        _refuse_unknown(opts)
        given = {k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)}
        for setting in ("key.serializer", "value.serializer"):
            if setting in given:
                raise UnsupportedSerializerError(
                    f"kafka.{setting}: expected no serializer (the sink sends the bytes of the "
                    f"key and value columns as they are, like Spark's ByteArraySerializer), "
                    f"found {given[setting]!r}"
                )
        # Java-only keys copied from Spark jobs (JAAS lines, trust stores) as for the source.
        producer = {**PRODUCER_DEFAULTS, **translate_java_settings(given)}
        if not text(producer, "bootstrap.servers"):
            raise MissingBootstrapServersError(
                "kafka.bootstrap.servers: expected host:port[,host:port...], found none"
            )
        topic = text(opts, "topic")
        timeout_ms = positive_int(opts, "flushtimeoutms", error=SinkOptionError)
        if timeout_ms is None:
            message_ms = positive_int(
                producer, "message.timeout.ms", error=SinkOptionError
            ) or positive_int(producer, "delivery.timeout.ms", error=SinkOptionError)
            timeout_ms = (message_ms or DEFAULT_MESSAGE_TIMEOUT_MS) + FLUSH_MARGIN_MS
        return cls(
            producer=producer,
            topic=topic,
            typed=_typed_options(opts, topic),
            flush_timeout_s=timeout_ms / 1000,
        )


def _refuse_unknown(opts: Mapping[str, str]) -> None:
    known = {k.lower(): k for k in (*KNOWN_OPTIONS, *SPARK_OPTIONS)}
    for key in sorted(opts):
        if key.startswith(KAFKA_PREFIX) or key in known:
            continue
        nearest = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {known[nearest[0]]!r}?" if nearest else ""
        raise UnknownSinkOptionError(
            f"option {key!r}: expected one of the sink's options ({', '.join(KNOWN_OPTIONS)}) "
            f"or kafka.<producer setting>, found an unknown option{hint}"
        )


def _typed_options(opts: Mapping[str, str], topic: str | None) -> ValueSchemaOptions | None:
    try:
        value_format = ValueFormat.parse(text(opts, "valueformat"))
    except ValueError as exc:
        raise ValueSchemaOptionError(str(exc)) from None
    typed_keys = ("schema.registry.url", "valueschemasubject", "valueschema", "valueschemaversion")
    if value_format is None:
        given = [k for k in (*typed_keys, "valueschemaid", "valueschemamessage") if k in opts]
        if given:
            raise ValueSchemaOptionError(
                f"{given[0]}: expected only with valueFormat=avro|json-schema|protobuf, found "
                "valueFormat=binary"
            )
        return None
    named = f"valueFormat={value_format.value}"
    url = text(opts, "schema.registry.url")
    if url is None:
        raise ValueSchemaOptionError(
            f"schema.registry.url: expected the registry's URL with {named}, found none"
        )
    message = text(opts, "valueschemamessage")
    if message is not None and value_format is not ValueFormat.PROTOBUF:
        raise ValueSchemaOptionError(
            f"valueSchemaMessage: expected only with valueFormat=protobuf, found {named}"
        )
    path = text(opts, "valueschema")
    schema_id = positive_int(opts, "valueschemaid", error=ValueSchemaOptionError)
    version = text(opts, "valueschemaversion")
    chosen = [n for n, v in (("valueSchema", path), ("valueSchemaId", schema_id)) if v]
    if version is not None:
        chosen.append("valueSchemaVersion")
    if len(chosen) > 1:
        raise ValueSchemaOptionError(
            f"{named}: expected at most one of valueSchema, valueSchemaId and "
            f"valueSchemaVersion, found {', '.join(chosen)}"
        )
    wanted = version or "latest"
    if wanted != "latest" and not (wanted.isascii() and wanted.isdigit()):
        raise ValueSchemaOptionError(
            f"valueSchemaVersion: expected latest or a number, found {wanted!r}"
        )
    subject = text(opts, "valueschemasubject") or (f"{topic}-value" if topic else None)
    if subject is None and schema_id is None:
        raise ValueSchemaOptionError(
            "valueSchemaSubject: expected a subject (or the topic option, for <topic>-value), "
            "found neither; rows naming their own topic need valueSchemaSubject or "
            "valueSchemaId"
        )
    return ValueSchemaOptions(url, subject, path, wanted, schema_id, value_format, message)
