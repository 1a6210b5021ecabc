"""The ``kafka.*`` options of a read, checked as Spark checks them and made librdkafka's.

Spark hands every ``kafka.<key>`` option to the Java consumer as ``<key>``; Sluice's consumers
are librdkafka's (confluent-kafka). ``kafka_params`` answers each key (matched lower-cased:
Spark lower-cases a data source's option keys) in one of three ways:

1. **Spark refuses it** (``KafkaSourceProvider.validateGeneralOptions``): ``auto.offset.reset``
   (use ``startingOffsets``), ``key.deserializer`` / ``value.deserializer`` (keys and values
   are bytes; deserialize with DataFrame operations), ``enable.auto.commit`` and
   ``interceptor.classes`` — ``SparkRefusedKafkaOptionError`` with Spark's reason. Sluice adds
   ``enable.partition.eof``, which its split reader owns.
2. ``isolation.level``: checked (``sluice.pipeline.source.isolation``: ``read_committed`` or
   ``read_uncommitted``, any case; Sluice's default is ``read_committed``, Spark's
   ``read_uncommitted``) and handed on lower-case.
3. **Everything else** as the sink's producer settings too: Java-only keys translated or
   refused, the rest as given (``sluice.pipeline.kafka_settings``, whose
   ``JavaOnlyKafkaOptionError`` and ``JaasTranslationError`` it raises).

No message quotes a value: JAAS lines, passwords and PEM keys are secrets. Also here: the
consumer group ids Spark makes up per query (``group_ids``). Pure functions; thread-safe.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.pipeline.kafka_settings import translate_java_settings
from sluice.pipeline.source.isolation import ISOLATION_LEVEL_KEY, parse_isolation_level

__all__ = [
    "GroupIds",
    "SparkRefusedKafkaOptionError",
    "group_ids",
    "kafka_params",
]

log = logging.getLogger("sluice.source")


class SparkRefusedKafkaOptionError(ValueError):
    """A ``kafka.*`` option Spark's Kafka source refuses (or one the Sluice source owns)."""


# Spark's own refusals, with Spark's reasons (KafkaSourceProvider.validateGeneralOptions).
_SPARK_REFUSED = {
    "auto.offset.reset": (
        "Instead set the source option 'startingOffsets' to 'earliest' or 'latest' to specify "
        "where to start. Structured Streaming manages which offsets are consumed internally, "
        "rather than relying on the kafkaConsumer to do it"
    ),
    "key.deserializer": (
        "keys are deserialized as byte arrays; use DataFrame operations to explicitly "
        "deserialize the keys"
    ),
    "value.deserializer": (
        "values are deserialized as byte arrays; use DataFrame operations to explicitly "
        "deserialize the values (or valueFormat=avro|json-schema|protobuf)"
    ),
    "enable.auto.commit": "the source tracks offsets itself and commits none to Kafka",
    "interceptor.classes": "interceptors can modify the payload, so they are not safe",
    "enable.partition.eof": "the source's split reader sets it (it bounds ranges with it)",
}


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings of a read's ``kafka.*`` options (prefix cut); see the module doc.

    Raises ``SparkRefusedKafkaOptionError``, ``InvalidIsolationLevelError``,
    ``JavaOnlyKafkaOptionError`` or ``JaasTranslationError``.
    """
    raw = {
        k.lower()[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")
    }
    for key in sorted(raw):
        if key in _SPARK_REFUSED:
            raise SparkRefusedKafkaOptionError(
                f"option 'kafka.{key}': not supported by the Kafka source: {_SPARK_REFUSED[key]}"
            )
    if ISOLATION_LEVEL_KEY in raw:
        raw[ISOLATION_LEVEL_KEY] = parse_isolation_level(raw[ISOLATION_LEVEL_KEY])
    return translate_java_settings(raw)


@dataclass(frozen=True, slots=True)
class GroupIds:
    """The consumer group ids of one query: the driver's (offset lookups) and the executors'."""

    driver: str
    executor: str


def group_ids(options: Mapping[str, str], prefix: str | None, *, streaming: bool) -> GroupIds:
    """Spark's ids: ``kafka.group.id`` for both if given (with Spark's warning; ``groupIdPrefix``
    is then ignored), else ``<prefix>-<uuid>-driver`` / ``-executor`` with ``prefix`` defaulting
    to ``spark-kafka-relation`` (batch) or ``spark-kafka-source`` (streaming)."""
    given = {k.lower(): v for k, v in options.items()}.get("kafka.group.id")
    if given is not None:
        log.warning(
            "option 'kafka.group.id' is set: concurrent queries or sources with the same group "
            "id interfere with each other; use one query per group id"
            + ("; option groupIdPrefix is ignored" if prefix is not None else "")
        )
        return GroupIds(given, given)
    base = prefix or ("spark-kafka-source" if streaming else "spark-kafka-relation")
    unique = f"{base}-{uuid.uuid4()}"
    return GroupIds(f"{unique}-driver", f"{unique}-executor")
