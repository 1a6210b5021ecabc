"""Tests for sluice.pipeline.source.option_names: unknown options refused with the nearest."""

from __future__ import annotations

import pytest

from sluice.pipeline.source.option_names import (
    SLUICE_OPTIONS,
    SPARK_OPTIONS,
    UnknownOptionError,
    check_option_names,
    nearest_option,
)


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [
        ("startingOffset", "startingOffsets"),
        ("failOnDataLos", "failOnDataLoss"),
        ("failondatalos", "failOnDataLoss"),  # Spark hands keys over lower-cased
        ("includeHeader", "includeHeaders"),
        ("startingTimestamps", "startingTimestamp"),
        ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
        ("subscribePatern", "subscribePattern"),
    ],
)
def test_a_typo_is_refused_with_the_nearest_option(typo: str, nearest: str) -> None:
    assert nearest_option(typo) == nearest
    with pytest.raises(UnknownOptionError, match=f"option '{typo}'.*did you mean '{nearest}'"):
        check_option_names({"subscribe": "t", typo: "x"})


def test_known_names_pass_in_any_case_and_kafka_keys_are_left_to_kafka_params() -> None:
    options = {name.lower(): "x" for name in (*SPARK_OPTIONS, *SLUICE_OPTIONS)}
    check_option_names(options)
    check_option_names({"STARTINGOFFSETS": "x", "kafka.anything.at.all": "y"})
    with pytest.raises(UnknownOptionError, match=r"option 'zzz': .*found none by that name$"):
        check_option_names({"zzz": "1"})
