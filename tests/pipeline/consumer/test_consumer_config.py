"""Tests for sluice.pipeline.consumer.config: Kafka 0.8's key names, defaults and bad values."""

from __future__ import annotations

import logging

import pytest

from sluice.pipeline.consumer.config import ConsumerConfig, ConsumerConfigError

BASE = {"zookeeper.connect": "zk:2181", "group.id": "g", "metadata.broker.list": "b:9092"}


def test_config_uses_kafka_08_names_and_rejects_bad_values() -> None:
    config = ConsumerConfig.from_properties(BASE)
    assert config.partition_assignment_strategy == "range"
    assert (config.rebalance_max_retries, config.rebalance_backoff_ms) == (4, 2000)
    assert (config.auto_commit_enable, config.auto_commit_interval_ms) == (True, 60_000)
    assert config.auto_offset_reset == "largest" and config.consumer_timeout_ms == -1
    assert config.bootstrap_servers == "b:9092" and config.consumer_id.startswith("g_")
    parsed = ConsumerConfig.from_properties(
        {**BASE, "auto.offset.reset": "earliest", "kafka.fetch.min.bytes": "1"}
    )
    assert parsed.kafka == {"fetch.min.bytes": "1"}
    for bad in (
        {"auto.offset.reset": "middle"},
        {"rebalance.max.retries": "x"},
        {"auto.commit.enable": "yes"},
        {"no.such.key": "1"},
        {"group.id": ""},
    ):
        with pytest.raises(ConsumerConfigError):
            ConsumerConfig.from_properties({**BASE, **bad})
    with pytest.raises(LookupError):
        ConsumerConfig.from_properties({**BASE, "partition.assignment.strategy": "nope"})


def test_config_errors_name_the_key_what_was_expected_and_what_was_found() -> None:
    cases = {
        "rebalance.max.retries": ("0", "rebalance.max.retries: expected an integer >= 1"),
        "queued.max.messages": ("-5", "queued.max.messages: expected an integer >= 1"),
        "auto.commit.enable": ("yes", "auto.commit.enable: expected true or false, found 'yes'"),
        "consumer.timeout.ms": ("soon", "consumer.timeout.ms: expected an integer, found 'soon'"),
    }
    for key, (value, message) in cases.items():
        with pytest.raises(ConsumerConfigError, match=f"^{message}"):
            ConsumerConfig.from_properties({**BASE, key: value})
    for missing in ("zookeeper.connect", "metadata.broker.list"):
        without = {k: v for k, v in BASE.items() if k != missing}
        with pytest.raises(ConsumerConfigError, match="expected a value, found none"):
            ConsumerConfig.from_properties(without)


def test_values_may_be_non_strings_and_both_offset_reset_vocabularies_map_to_librdkafka() -> None:
    config = ConsumerConfig.from_properties(
        {**BASE, "rebalance.backoff.ms": 50, "auto.commit.enable": False}
    )
    assert (config.rebalance_backoff_ms, config.auto_commit_enable) == (50, False)
    for value, expected in (("smallest", "earliest"), ("LARGEST", "latest"), ("latest", "latest")):
        assert ConsumerConfig.from_properties(
            {**BASE, "auto.offset.reset": value}
        ).offset_reset == (expected)


def test_kafka_settings_assign_only_and_pass_kafka_prefixed_keys_through() -> None:
    config = ConsumerConfig.from_properties(
        {**BASE, "consumer.id": "c1", "auto.offset.reset": "smallest", "kafka.debug": "fetch"}
    )
    logger = logging.getLogger("test")
    settings = config.kafka_settings("fetcher", logger)
    assert settings["client.id"] == "c1-fetcher" and settings["logger"] is logger
    assert settings["enable.auto.commit"] is False  # offsets live in ZooKeeper
    assert settings["auto.offset.reset"] == "earliest" and settings["debug"] == "fetch"
