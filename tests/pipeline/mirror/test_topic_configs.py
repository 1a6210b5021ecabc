"""``ConfigPropertyFilter``, MirrorMaker 2's ``DefaultConfigPropertyFilter`` and ``targetConfig``
rules, on confluent-kafka's own ``ConfigEntry`` objects as ``describe_configs`` returns them (the
same rules against real brokers: ``test_target_topics.py``)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigSource,
)

from sluice.pipeline.mirror.config import MirrorConfig, MirrorConfigError
from sluice.pipeline.mirror.topic_configs import DEFAULT_EXCLUDE, ConfigPropertyFilter

TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG
STATIC = ConfigSource.STATIC_BROKER_CONFIG
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def entry(name: str, value: str | None, source: ConfigSource, **flags: bool) -> ConfigEntry:
    return ConfigEntry(name, value, source=source, is_default=source == DEFAULT, **flags)


def described(*entries: ConfigEntry) -> dict[str, ConfigEntry]:
    return {e.name: e for e in entries}


SOURCE = described(
    entry("retention.ms", "3600000", TOPIC),
    entry("cleanup.policy", "delete", DEFAULT),
    entry("segment.bytes", "1048576", STATIC),  # the source broker's file: not the topic's
    entry("max.message.bytes", "2000000", DYNAMIC_DEFAULT),  # a cluster-wide dynamic default
    entry("min.insync.replicas", "2", TOPIC),  # excluded by default
    entry("message.format.version", "3.0-IV1", TOPIC, is_read_only=True),
    entry("secret.thing", None, TOPIC, is_sensitive=True),
)


def ops(result: list[ConfigEntry]) -> list[tuple[str, str | None, AlterConfigOpType]]:
    return [(e.name, e.value, e.incremental_operation) for e in result]


def test_the_default_exclude_list_is_mirrormaker_2s() -> None:
    assert DEFAULT_EXCLUDE == (
        r"follower\.replication\.throttled\.replicas",
        r"leader\.replication\.throttled\.replicas",
        r"message\.timestamp\.difference\.max\.ms",
        r"message\.timestamp\.type",
        r"unclean\.leader\.election\.enable",
        r"min\.insync\.replicas",
    )
    default = ConfigPropertyFilter()
    assert not default.replicates("min.insync.replicas")
    assert not default.replicates("message.timestamp.type")
    assert default.replicates("retention.ms")
    assert default.replicates("min.insync.replicasX")  # a full match, not a search
    assert not default.replicates_source_default()


def test_creation_copies_what_the_topic_set_and_the_dynamic_defaults() -> None:
    assert ConfigPropertyFilter().creation_configs(SOURCE) == {
        "retention.ms": "3600000",
        "max.message.bytes": "2000000",
    }
    from_source = ConfigPropertyFilter(use_defaults_from="source")
    assert from_source.creation_configs(SOURCE) == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete",
        "max.message.bytes": "2000000",
    }
    nothing_excluded = ConfigPropertyFilter(exclude=())
    assert nothing_excluded.creation_configs(SOURCE)["min.insync.replicas"] == "2"


def test_sync_sets_what_differs_and_deletes_what_went_back_to_the_default() -> None:
    target = described(
        entry("retention.ms", "1000", TOPIC),  # differs: SET
        entry("cleanup.policy", "compact", TOPIC),  # default on the source: DELETE
        entry("max.message.bytes", "1048588", DEFAULT),  # at the target default: SET
        entry("min.insync.replicas", "1", TOPIC),  # excluded: the target's own
    )
    assert ops(ConfigPropertyFilter().sync_operations(SOURCE, target)) == [
        ("cleanup.policy", None, AlterConfigOpType.DELETE),
        ("max.message.bytes", "2000000", AlterConfigOpType.SET),
        ("retention.ms", "3600000", AlterConfigOpType.SET),
    ]


def test_sync_of_a_topic_in_line_is_empty() -> None:
    target = described(
        entry("retention.ms", "3600000", TOPIC),
        entry("cleanup.policy", "delete", DEFAULT),
        entry("max.message.bytes", "2000000", TOPIC),
    )
    assert ConfigPropertyFilter().sync_operations(SOURCE, target) == []
    # The same value from the target's defaults is not an override: MirrorMaker 2 sets it, so
    # the topic keeps the source's value if the target's default changes later.
    at_default = {**target, "retention.ms": entry("retention.ms", "3600000", DEFAULT)}
    assert ops(ConfigPropertyFilter().sync_operations(SOURCE, at_default)) == [
        ("retention.ms", "3600000", AlterConfigOpType.SET)
    ]


def test_sync_with_defaults_from_the_source_sets_them() -> None:
    target = described(entry("cleanup.policy", "compact", TOPIC))
    result = ConfigPropertyFilter(use_defaults_from="source").sync_operations(SOURCE, target)
    assert ("cleanup.policy", "delete", AlterConfigOpType.SET) in ops(result)


def test_use_defaults_from_is_source_or_target() -> None:
    with pytest.raises(ValueError, match="use_defaults_from: expected one of"):
        ConfigPropertyFilter(use_defaults_from="both")


BASE = {
    "clusters": "live",
    "live.bootstrap.servers": "127.0.0.1:9092",
    "target.alias": "offline",
    "target.bootstrap.servers": "127.0.0.1:9192",
}


def test_the_mirror_config_keys() -> None:
    default = MirrorConfig.from_properties(BASE)
    assert default.sync_topic_configs_enabled is True
    assert default.sync_topic_configs_interval_s == 600
    assert default.config_properties == ConfigPropertyFilter()
    config = MirrorConfig.from_properties(
        {
            **BASE,
            "sync.topic.configs.enabled": "false",
            "sync.topic.configs.interval.seconds": "30",
            "config.properties.exclude": r"retention\..*, segment\.ms",
            "use.defaults.from": "Source",
            "refresh.topics.interval.seconds": "60",
        }
    )
    assert config.sync_topic_configs_enabled is False
    assert config.sync_topic_configs_interval_s == 30
    assert config.config_properties.exclude == (
        re.compile(r"retention\..*"),
        re.compile(r"segment\.ms"),
    )
    assert config.config_properties.use_defaults_from == "source"
    assert config.refresh_topics_interval_ms == 60_000
    # Blank: no exclusion at all (as topics.exclude=), MirrorMaker 2's empty list.
    assert (
        MirrorConfig.from_properties(
            {**BASE, "config.properties.exclude": ""}
        ).config_properties.exclude
        == ()
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"sync.topic.configs.enabled": "yes"}, r"sync.topic.configs.enabled: expected true or"),
        (
            {"sync.topic.configs.interval.seconds": "0"},
            r"interval.seconds: expected an integer >= 1",
        ),
        (
            {"config.properties.exclude": "retention.(ms"},
            r"config.properties.exclude: expected comma",
        ),
        (
            {"use.defaults.from": "both"},
            r"use.defaults.from: expected target or source, found 'both'",
        ),
        ({"refresh.topics.interval.seconds": "0"}, r"refresh.topics.interval.seconds: expected an"),
        (
            {"refresh.topics.interval.seconds": "5", "refresh.topics.interval.ms": "500"},
            r"refresh.topics.interval.seconds: expected it or refresh.topics.interval.ms, not both",
        ),
    ],
)
def test_malformed_keys_are_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(MirrorConfigError, match=message):
        MirrorConfig.from_properties({**BASE, **props})
