"""Tests for sluice.pipeline.source.read_options: headers, triggers, fetch retries, group ids."""

from __future__ import annotations

import pytest

from sluice.pipeline.source.options import InvalidBooleanOptionError, InvalidPositiveIntegerError
from sluice.pipeline.source.read_options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    InvalidFetchOptionError,
    InvalidGroupIdPrefixError,
    InvalidTriggerOptionError,
    ReadOptions,
    parse_read_options,
    parse_time_ms,
)


def test_read_options() -> None:
    assert parse_read_options({}) == ReadOptions()
    read = parse_read_options(
        {
            "includeheaders": "FALSE",
            "kafkaConsumer.pollTimeoutMs": "2500",
            "arrowBatchRows": "7",
            "maxOffsetsPerTrigger": "60",
        }
    )
    assert read == ReadOptions(False, 2.5, 7, 60)
    with pytest.raises(InvalidBooleanOptionError, match="includeHeaders: expected true or false"):
        parse_read_options({"includeHeaders": "maybe"})
    with pytest.raises(InvalidPositiveIntegerError, match="arrowBatchRows: expected a positive"):
        parse_read_options({"arrowBatchRows": "0"})


def test_defaults_are_sparks() -> None:
    read = parse_read_options({})
    assert read.include_headers is False  # Spark: seven columns unless includeHeaders=true
    assert parse_read_options({"INCLUDEHEADERS": "true"}).include_headers is True
    assert read.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 15 * 60_000
    assert (read.fetch_offset_attempts, read.fetch_offset_retry_interval_ms) == (3, 1000)
    assert read.min_offsets_per_trigger is None and read.group_id_prefix is None


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("250", 250), ("1h", 3_600_000),
     ("2d", 172_800_000), ("3min", 180_000), ("1500us", 1), (" 10 S ", 10_000)],
)  # fmt: skip
def test_time_strings_as_spark_reads_them(text: str, ms: int) -> None:
    assert parse_time_ms("maxTriggerDelay", text) == ms


def test_trigger_options() -> None:
    read = parse_read_options(
        {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "10", "maxTriggerDelay": "2s"}
    )
    assert (read.min_offsets_per_trigger, read.max_trigger_delay_ms) == (10, 2000)
    with pytest.raises(InvalidTriggerOptionError, match="expected min <= max, found 11 > 10"):
        parse_read_options({"minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"})
    with pytest.raises(InvalidTriggerOptionError, match="maxTriggerDelay.*found 'soon'"):
        parse_read_options({"maxTriggerDelay": "soon"})
    with pytest.raises(InvalidPositiveIntegerError, match="minOffsetsPerTrigger"):
        parse_read_options({"minOffsetsPerTrigger": "-1"})


def test_fetch_offset_and_group_prefix() -> None:
    read = parse_read_options(
        {"fetchOffset.numRetries": "5", "fetchoffset.retryintervalms": "0", "groupIdPrefix": "g"}
    )
    assert (read.fetch_offset_attempts, read.fetch_offset_retry_interval_ms) == (5, 0)
    assert read.group_id_prefix == "g"
    with pytest.raises(InvalidFetchOptionError, match="fetchOffset.numRetries: expected a pos"):
        parse_read_options({"fetchOffset.numRetries": "0"})
    with pytest.raises(InvalidFetchOptionError, match="retryIntervalMs: expected an integer >= 0"):
        parse_read_options({"fetchOffset.retryIntervalMs": "-5"})
    with pytest.raises(InvalidFetchOptionError, match="found ' '"):
        parse_read_options({"fetchOffset.retryIntervalMs": " "})
    with pytest.raises(InvalidGroupIdPrefixError, match="groupIdPrefix"):
        parse_read_options({"groupIdPrefix": ""})
