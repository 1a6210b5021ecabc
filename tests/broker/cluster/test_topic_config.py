"""``topic_config``: every Kafka topic config accepted and validated as Kafka does; DescribeConfigs
entries with Kafka's sources and synonyms; the config change notification znode."""

from __future__ import annotations

import json

import pytest

from sluice.broker.cluster import topic_config as tc
from sluice.broker.cluster.topic_metadata import InvalidConfigError
from sluice.broker.cluster.zk_data import ConfigChangeNotificationZNode, TopicZNode
from sluice.broker.log.log_config import LogConfig


def test_every_kafka_topic_config_is_accepted() -> None:
    config = {
        "compression.type": "lz4", "preallocate": "true", "min.cleanable.dirty.ratio": "0.1",
        "message.downconversion.enable": "false", "segment.jitter.ms": "5",
        "follower.replication.throttled.replicas": "0:1,1:2", "cleanup.policy": "compact,delete",
    }  # fmt: skip
    assert tc.validate(config) == config
    # Only the keys the log models reach it.
    assert set(tc.log_overrides(config)) <= tc.EFFECTIVE_KEYS
    assert "compression.type" not in tc.log_overrides(config)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("retention.ms", "soon", "Not a number of type LONG"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("compression.type", "brotli", "String must be one of"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("min.cleanable.dirty.ratio", "2", "Value must be between 0 and 1"),
        ("leader.replication.throttled.replicas", "x", "<partitionId>:<brokerId>"),
        ("no.such.key", "1", "Unknown topic config name: no.such.key"),
    ],
)
def test_bad_values_are_refused_with_kafkas_words(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        tc.validate({key: value})


@pytest.mark.parametrize(("raw", "expected"), [("TRUE", True), (" false ", False)])
def test_booleans_are_read_in_any_case_as_kafka_reads_them(raw: str, expected: bool) -> None:
    assert tc.TOPIC_CONFIGS["preallocate"].parse(raw) is expected


def test_a_blank_boolean_is_refused_not_defaulted() -> None:
    with pytest.raises(InvalidConfigError, match="Expected value to be either true or false"):
        tc.validate({"unclean.leader.election.enable": " "})


def test_describe_sources_and_synonyms() -> None:
    entries = {
        e.name: e for e in tc.describe({"retention.ms": "1000"}, {"log.segment.bytes": "4096"})
    }
    assert set(entries) == set(tc.TOPIC_CONFIGS)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("1000", tc.ConfigSource.TOPIC_CONFIG)
    assert retention.synonyms == (
        ("retention.ms", "1000", tc.ConfigSource.TOPIC_CONFIG),
        ("log.retention.ms", "604800000", tc.ConfigSource.DEFAULT_CONFIG),
    )
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("4096", tc.ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["compression.type"].is_default


def test_log_settings_apply_the_modelled_keys() -> None:
    settings = tc.log_settings(LogConfig(), {"retention.ms": "5", "compression.type": "zstd"})
    assert settings.retention_ms == 5


def test_config_change_notification_is_kafkas() -> None:
    data = ConfigChangeNotificationZNode.encode_topic("t")
    assert json.loads(data) == {"version": 2, "entity_path": "topics/t"}
    assert ConfigChangeNotificationZNode.decode("config_change_0000000007", data) == ("topics", "t")
    assert ConfigChangeNotificationZNode.sequence("config_change_0000000007") == 7
    assert ConfigChangeNotificationZNode.sequence("other") is None
    assert ConfigChangeNotificationZNode.path_prefix() == "/config/changes/config_change_"


def test_topic_znode_keeps_a_reassignment() -> None:
    data = TopicZNode.encode({0: [1, 2]}, adding={0: [3]}, removing={0: [1]})
    assignment = TopicZNode.decode("t", data)
    assert (assignment.adding, assignment.removing) == ({0: (3,)}, {0: (1,)})
