"""Every option name the ``sluice`` source knows; anything else is refused with the nearest one.

Spark's Kafka source ignores an option it does not know, so ``startingOffset`` (for
``startingOffsets``) silently reads from the default. Sluice refuses it instead:
``check_option_names`` raises ``UnknownOptionError`` naming the option as given and the
nearest known name (``difflib``, case-insensitive, as Spark matches keys), e.g.
``option 'startingoffset': expected a known option, found none by that name; did you mean
'startingOffsets'?``.

``kafka.*`` keys are not checked here: they are the consumer's settings, translated or refused
by ``sluice.pipeline.source.kafka_params``. The names are those of Spark's
``KafkaSourceProvider`` (batch and streaming) and Sluice's own (``SLUICE_OPTIONS``); the sink
(``df.write.format("sluice")``) has its own options and is not checked here.

Pure functions over constant tuples; thread-safe.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = [
    "KAFKA_PREFIX",
    "SLUICE_OPTIONS",
    "SPARK_OPTIONS",
    "UnknownOptionError",
    "check_option_names",
    "nearest_option",
]

KAFKA_PREFIX = "kafka."

SPARK_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix",
    "includeHeaders",
)
"""The options of Spark's Kafka source (``kafka.*`` aside), as its guide spells them."""

SLUICE_OPTIONS = (
    "arrowBatchRows",
    "valueFormat",
    "schema.registry.url",
    "valueSchemaSubject",
    "valueSchemaVersion",
    "valueSchemaId",
    "valueSchemaMessage",
    "valueColumns",
    "onDecodeError",
    "decodeErrorPath",
)
"""Sluice's own source options (see ``sluice.pipeline.source.data_source``)."""

_KNOWN = {name.lower(): name for name in (*SPARK_OPTIONS, *SLUICE_OPTIONS)}


class UnknownOptionError(ValueError):
    """A source option that is neither Spark's nor Sluice's (a typo, most likely)."""


def nearest_option(key: str, known: Iterable[str] = ()) -> str | None:
    """The known option name closest to ``key`` (any case), or ``None`` if none is close."""
    names = dict(_KNOWN)
    names.update({name.lower(): name for name in known})
    close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None


def check_option_names(options: Mapping[str, str]) -> None:
    """Raise ``UnknownOptionError`` for the first option (sorted) that is not known."""
    for key in sorted(options):
        lowered = key.lower()
        if lowered.startswith(KAFKA_PREFIX) or lowered in _KNOWN:
            continue
        nearest = nearest_option(key)
        hint = f"; did you mean {nearest!r}?" if nearest else ""
        raise UnknownOptionError(
            f"option {key!r}: expected an option of Spark's Kafka source or of Sluice, found "
            f"none by that name{hint}"
        )
