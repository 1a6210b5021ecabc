"""How the ``sluice`` source reads: the options that shape records, triggers and the client.

``sluice.pipeline.source.options`` decides *which* records a read covers; this module parses
the rest of Spark's Kafka source options (``KafkaSourceProvider``, ``KafkaMicroBatchStream``,
``KafkaOffsetReaderAdmin``) into one ``ReadOptions``:

* ``includeHeaders`` — default **false**, as Spark: the seven columns ``key``, ``value``,
  ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType``; ``true`` adds
  ``headers``;
* ``kafkaConsumer.pollTimeoutMs`` (default 120000) and Sluice's ``arrowBatchRows`` (4096);
* streaming triggers: ``maxOffsetsPerTrigger`` caps a micro-batch; ``minOffsetsPerTrigger``
  delays one until that many offsets wait, or until ``maxTriggerDelay`` (Spark's time strings,
  ``Utils.timeStringAsMs``: ``15m`` default, ``30s``, ``500ms``, a bare number is ms) has
  passed since the last batch. ``minOffsetsPerTrigger`` > ``maxOffsetsPerTrigger`` is an error,
  as in Spark;
* the driver's offset lookups: ``fetchOffset.numRetries`` attempts (default 3, Spark's
  ``maxOffsetFetchAttempts``), ``fetchOffset.retryIntervalMs`` apart (default 1000, Spark's
  code; its guide says 10);
* ``groupIdPrefix``: the prefix of the consumer group ids the source makes up
  (``sluice.pipeline.source.kafka_params``).

A blank value is an error, never the default (Spark's ``toInt`` / ``toBoolean`` refuse it too).
Pure functions and an immutable value; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common.options import integer, positive_int
from sluice.pipeline.source.options import (
    CaseInsensitiveOptions,
    option_flag,
    option_positive_int,
)

__all__ = [
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "InvalidFetchOptionError",
    "InvalidGroupIdPrefixError",
    "InvalidTriggerOptionError",
    "ReadOptions",
    "parse_read_options",
    "parse_time_ms",
]

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
"""Spark's ``DEFAULT_MAX_TRIGGER_DELAY``, ``15m``."""


class InvalidTriggerOptionError(ValueError):
    """``maxTriggerDelay`` is not a time, or ``minOffsetsPerTrigger`` > ``maxOffsetsPerTrigger``."""


class InvalidFetchOptionError(ValueError):
    """``fetchOffset.numRetries`` is not a positive integer, or ``fetchOffset.retryIntervalMs``
    not an integer >= 0."""


class InvalidGroupIdPrefixError(ValueError):
    """``groupIdPrefix`` is blank."""


def _refuse_blank(
    options: Mapping[str, str], key: str, expected: str, error: type[Exception]
) -> None:
    raw = options.get(key)
    if raw is not None and not raw.strip():
        raise error(f"{key}: expected {expected}, found {raw!r}")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """The options of a read that shape its records, not which ones, and how the source talks
    to the cluster. Picklable."""

    include_headers: bool = False  # Spark's default: seven columns
    poll_timeout_s: float = 120.0
    batch_rows: int = 4096
    max_offsets_per_trigger: int | None = None  # streaming only
    min_offsets_per_trigger: int | None = None  # streaming only
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS  # streaming, with the minimum
    fetch_offset_attempts: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    group_id_prefix: str | None = None


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}  # fmt: skip
_TIME = re.compile(r"(\d+)\s*(us|ms|s|min|m|h|d)?", re.IGNORECASE)


def parse_time_ms(option: str, value: str) -> int:
    """Spark's ``Utils.timeStringAsMs``: ``15m``, ``30s``, ``500ms``, ``1h``, ``2d``, ``10us``;
    a bare number is milliseconds."""
    match = _TIME.fullmatch(value.strip())
    if match is None:
        raise InvalidTriggerOptionError(
            f"option {option!r}: expected a time like 15m, 30s or 500ms, found {value!r}"
        )
    unit = (match.group(2) or "ms").lower()
    return int(int(match.group(1)) * _TIME_UNITS_MS[unit])


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """``includeHeaders`` (default false), ``kafkaConsumer.pollTimeoutMs`` (default 120000),
    ``arrowBatchRows`` (default 4096), ``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (default 15m), ``fetchOffset.numRetries``
    (default 3), ``fetchOffset.retryIntervalMs`` (default 1000), ``groupIdPrefix``."""
    opts = CaseInsensitiveOptions(options)
    max_offsets = option_positive_int(opts, "maxOffsetsPerTrigger")
    min_offsets = option_positive_int(opts, "minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise InvalidTriggerOptionError(
            f"options 'minOffsetsPerTrigger' and 'maxOffsetsPerTrigger': expected min <= max, "
            f"found {min_offsets} > {max_offsets}"
        )
    delay = opts.get("maxTriggerDelay")
    _refuse_blank(opts, "fetchOffset.numRetries", "a positive integer", InvalidFetchOptionError)
    _refuse_blank(opts, "fetchOffset.retryIntervalMs", "an integer >= 0", InvalidFetchOptionError)
    _refuse_blank(opts, "groupIdPrefix", "a consumer group id prefix", InvalidGroupIdPrefixError)
    prefix = opts.get("groupIdPrefix")
    return ReadOptions(
        include_headers=option_flag(opts, "includeHeaders", False),
        poll_timeout_s=(option_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000) / 1000,
        batch_rows=option_positive_int(opts, "arrowBatchRows") or 4096,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(
            DEFAULT_MAX_TRIGGER_DELAY_MS
            if delay is None
            else parse_time_ms("maxTriggerDelay", delay)
        ),
        fetch_offset_attempts=positive_int(
            opts, "fetchOffset.numRetries", 3, error=InvalidFetchOptionError
        )
        or 3,
        fetch_offset_retry_interval_ms=integer(
            opts, "fetchOffset.retryIntervalMs", 1000, minimum=0, error=InvalidFetchOptionError
        ),
        group_id_prefix=None if prefix is None else prefix.strip(),
    )
