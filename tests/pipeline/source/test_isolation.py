"""Tests for sluice.pipeline.source.isolation: ``kafka.isolation.level``, read_committed by
default for every consumer the source and the nightly load make (no broker needed)."""

from __future__ import annotations

import pytest

from sluice.pipeline.source.data_source import SluiceBatchReader, SluiceStreamReader
from sluice.pipeline.source.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    InvalidIsolationLevelError,
    isolation_level,
    parse_isolation_level,
)
from sluice.pipeline.source.kafka_params import kafka_params
from sluice.pipeline.source.metadata import KafkaMetadata
from sluice.pipeline.source.split_reader import consumer_config

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_the_default_is_read_committed_unlike_spark() -> None:
    assert DEFAULT_ISOLATION_LEVEL == READ_COMMITTED
    assert isolation_level({}) == READ_COMMITTED
    assert isolation_level({"isolation.level": "read_uncommitted"}) == READ_UNCOMMITTED


@pytest.mark.parametrize(
    ("given", "level"),
    [
        ("read_committed", READ_COMMITTED),
        ("READ_COMMITTED", READ_COMMITTED),  # Java's IsolationLevel.valueOf(upper-cased)
        (" Read_Uncommitted ", READ_UNCOMMITTED),
    ],
)
def test_levels_parse_in_any_case(given: str, level: str) -> None:
    assert parse_isolation_level(given) == level


@pytest.mark.parametrize("given", ["", "committed", "read-committed", "1", None])
def test_other_levels_are_refused_saying_what_is_expected(given: object) -> None:
    with pytest.raises(
        InvalidIsolationLevelError,
        match="option 'kafka.isolation.level': expected read_committed or read_uncommitted, found",
    ):
        parse_isolation_level(given)
    assert issubclass(InvalidIsolationLevelError, ValueError)


def test_consumer_config_defaults_to_read_committed_and_takes_the_option() -> None:
    assert consumer_config(BOOTSTRAP)["isolation.level"] == READ_COMMITTED
    given = consumer_config({**BOOTSTRAP, "kafka.isolation.level": "READ_UNCOMMITTED"})
    assert given["isolation.level"] == READ_UNCOMMITTED  # librdkafka takes lower-case only
    with pytest.raises(InvalidIsolationLevelError, match="found 'dirty'"):
        consumer_config({**BOOTSTRAP, "kafka.isolation.level": "dirty"})


def test_kafka_params_checks_the_level() -> None:
    assert kafka_params({"kafka.isolation.level": "Read_Committed"}) == {
        "isolation.level": READ_COMMITTED
    }
    with pytest.raises(InvalidIsolationLevelError, match="found 'snapshot'"):
        kafka_params({"kafka.isolation.level": "snapshot"})


def test_the_driver_and_the_executors_read_with_the_same_level() -> None:
    """Batch and streaming readers: one level for the driver's ListOffsets (the log ends the
    ranges stop at) and the executors' split readers."""
    for options, level in (
        ({**BOOTSTRAP, "subscribe": "t"}, READ_COMMITTED),
        ({**BOOTSTRAP, "subscribe": "t", "kafka.isolation.level": "read_uncommitted"},
         READ_UNCOMMITTED),
    ):  # fmt: skip
        for reader in (SluiceBatchReader(options), SluiceStreamReader(options)):
            assert reader.config["isolation.level"] == level
            assert reader.driver_config["isolation.level"] == level


def test_metadata_lists_offsets_with_the_configs_level() -> None:
    """The nightly load plans with ``KafkaMetadata(consumer_config(...))``: read_committed, so
    its "latest" ends are last stable offsets, without the load saying so."""
    with KafkaMetadata(consumer_config(BOOTSTRAP)) as metadata:
        assert metadata.isolation_level == READ_COMMITTED
    with KafkaMetadata({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}) as metadata:
        assert metadata.isolation_level == READ_COMMITTED  # librdkafka's default too
    uncommitted = consumer_config({**BOOTSTRAP, "kafka.isolation.level": "read_uncommitted"})
    with KafkaMetadata(uncommitted) as metadata:
        assert metadata.isolation_level == READ_UNCOMMITTED
