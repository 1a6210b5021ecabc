"""``TargetTopics`` against two real standalone brokers, a source and a target, through
confluent-kafka's AdminClient: topics created with the source's configs (the excluded ones
left out), grown when the source grows, their configs synced — and a sync that has nothing to
do writes nothing."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Mapping

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.target_topics import TargetTopics
from sluice.testing.broker import BrokerProcess
from sluice.testing.cluster import QUIET
from sluice.testing.net import wait_until

pytestmark = pytest.mark.broker

STANDALONE = {"auto.create.topics.enable": "false", "num.partitions": "1"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(source bootstrap, target bootstrap): two standalone brokers for the module."""
    base = tmp_path_factory.mktemp("target-topics")
    source = BrokerProcess(base / "source", STANDALONE, log_level="warning")
    target = BrokerProcess(base / "target", STANDALONE, log_level="warning")
    try:
        source.start()
        target.start()
        yield source.bootstrap, target.bootstrap
    finally:
        source.stop()
        target.stop()


@functools.cache
def admin(bootstrap: str) -> AdminClient:
    """One client per broker for the module (a collected client fails its futures)."""
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def target_topics(source: str, target: str, **props: str) -> TargetTopics:
    config = MirrorConfig.from_properties(
        {
            "clusters": "live",
            "live.bootstrap.servers": source,
            "target.alias": "offline",
            "target.bootstrap.servers": target,
            **props,
        }
    )
    return TargetTopics(config, "live", admin(source), admin(target))


def create(bootstrap: str, topic: str, partitions: int, config: Mapping[str, str]) -> None:
    new = NewTopic(topic, partitions, 1, config=dict(config))
    admin(bootstrap).create_topics([new])[topic].result(timeout=30)


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's own configs (DescribeConfigs source DYNAMIC_TOPIC_CONFIG)."""
    resource = ConfigResource("topic", topic)
    entries = admin(bootstrap).describe_configs([resource])[resource].result(timeout=30)
    return {
        name: e.value
        for name, e in entries.items()
        if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def alter(bootstrap: str, topic: str, **ops: str | None) -> None:
    """IncrementalAlterConfigs at the source: SET each key to its value, DELETE on None."""
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v,
            incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET,
        )
        for k, v in ops.items()
    ]
    resource = ConfigResource("topic", topic, incremental_configs=entries)
    admin(bootstrap).incremental_alter_configs([resource])[resource].result(timeout=30)


def partitions(bootstrap: str, topic: str) -> int:
    return len(admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions)


def test_a_missing_topic_is_created_with_the_source_configs_minus_the_excluded(
    brokers: tuple[str, str],
) -> None:
    source, target = brokers
    topic = unique("created")
    create(
        source,
        topic,
        3,
        {
            "retention.ms": "3600000",
            "cleanup.policy": "compact",
            "max.message.bytes": "2000000",
            # Excluded by MirrorMaker 2's default list: they stay the target's business.
            "min.insync.replicas": "1",
            "unclean.leader.election.enable": "true",
            "message.timestamp.type": "LogAppendTime",
        },
    )
    topics = target_topics(source, target)
    assert topics.ensure({topic: 3}) == {topic}
    assert topics.counts[topic] == 3 == partitions(target, topic)
    assert overrides(target, topic) == {
        "retention.ms": "3600000",
        "cleanup.policy": "compact",
        "max.message.bytes": "2000000",
    }
    assert topics.sync_configs([topic]) == 0  # created in line: nothing to sync


def test_the_exclude_list_and_use_defaults_from_are_configurable(
    brokers: tuple[str, str],
) -> None:
    source, target = brokers
    topic = unique("exclude")
    create(source, topic, 1, {"retention.ms": "3600000", "min.insync.replicas": "1"})
    topics = target_topics(
        source,
        target,
        **{"config.properties.exclude": r"retention\..*", "use.defaults.from": "source"},
    )
    topics.ensure({topic: 1})
    copied = overrides(target, topic)
    assert "retention.ms" not in copied  # excluded by the configured list
    assert copied["min.insync.replicas"] == "1"  # no longer excluded
    # use.defaults.from=source: the source's defaults are copied as values of their own.
    assert copied["segment.bytes"] == "1073741824"
    assert copied["cleanup.policy"] == "delete"


def test_an_altered_source_config_is_synced_and_a_default_is_restored(
    brokers: tuple[str, str],
) -> None:
    source, target = brokers
    topic = unique("synced")
    create(source, topic, 1, {"retention.ms": "3600000", "segment.bytes": "1048576"})
    topics = target_topics(source, target)
    topics.ensure({topic: 1})
    alter(
        source,
        topic,
        retention_ms="7200000",  # changed
        segment_bytes=None,  # back to the default: deleted on the target too
        max_message_bytes="2000000",  # added
        unclean_leader_election_enable="true",  # excluded: never copied
    )
    # A target-side override of an excluded key is the target's own: left alone.
    alter(target, topic, min_insync_replicas="1")
    assert topics.sync_configs([topic]) == 1
    assert overrides(target, topic) == {
        "retention.ms": "7200000",
        "max.message.bytes": "2000000",
        "min.insync.replicas": "1",
    }
    assert topics.sync_configs([topic]) == 0  # in line: no IncrementalAlterConfigs sent
    # A target override the source does not have goes (the source is at its default).
    alter(target, topic, retention_bytes="1000000")
    assert topics.sync_configs([topic]) == 1
    assert "retention.bytes" not in overrides(target, topic)


def test_a_source_topic_that_gained_partitions_grows_its_target_topic(
    brokers: tuple[str, str],
) -> None:
    source, target = brokers
    topic, bigger = unique("grown"), unique("bigger")
    create(source, topic, 2, {})
    create(source, bigger, 1, {})
    create(target, bigger, 4, {})  # more partitions on the target: left as it is
    topics = target_topics(source, target)
    assert topics.ensure({topic: 2, bigger: 1}) == {topic, bigger}
    admin(source).create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=30)
    wait_until(lambda: partitions(source, topic) == 5, 30, "5 partitions at the source")
    assert topics.ensure({topic: 5, bigger: 1}) == {topic, bigger}
    assert topics.counts[topic] == 5 == partitions(target, topic)
    assert topics.counts[bigger] == 4 == partitions(target, bigger)
    # Another mirror process grew it first (INVALID_PARTITIONS from the broker): fine.
    other = target_topics(source, target)
    admin(source).create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
    wait_until(lambda: partitions(source, topic) == 6, 30, "6 partitions at the source")
    other.counts.update({topic: 5})
    topics.ensure({topic: 6})
    stale = other._grow({topic: 6}, {topic: 5})  # the race, replayed: the count is 6 already
    assert stale == {topic: 6}
    assert partitions(target, topic) == 6


def test_configs_unreadable_at_the_source_are_retried_not_created_without(
    brokers: tuple[str, str],
) -> None:
    source, target = brokers
    topic = unique("vanished")
    topics = target_topics(source, target)
    # Listed by the refresh, gone before DescribeConfigs (UNKNOWN_TOPIC_OR_PART, retriable):
    # not created now, tried again at the next refresh.
    assert topics.ensure({topic: 1}) == set()
    assert topic not in admin(target).list_topics(timeout=10).topics
