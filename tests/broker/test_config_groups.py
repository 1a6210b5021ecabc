"""The group coordinator's broker keys (``group.consumer.*``, ``group.share.*``): Kafka 4's
names, defaults and bounds, set in the broker's file and refused with one line naming the key,
what was expected and what was found."""

from __future__ import annotations

import pytest

from sluice.broker.config import BrokerConfig, ConfigError, unknown_keys
from sluice.broker.groups.group_coordinator_config import (
    CONFIG_DEF,
    ConsumerGroupConfig,
    ShareGroupConfig,
)

# Kafka 4's defaults (GroupCoordinatorConfig, ShareGroupConfig), written out here so a changed
# default in the declaration or the dataclass fails this test.
KAFKA_DEFAULTS = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    "group.consumer.max.size": 2_147_483_647,
    "group.consumer.assignors": ("uniform", "range"),
    "group.consumer.migration.policy": "bidirectional",
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.max.size": 200,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.partition.max.record.locks": 2_000,
    "group.share.max.share.sessions": 2_000,
}


def test_the_declared_defaults_are_kafkas_and_the_classes_agree() -> None:
    assert {k: key.default for k, key in CONFIG_DEF.keys.items()} == KAFKA_DEFAULTS
    assert all(key.doc for key in CONFIG_DEF.keys.values())
    config = BrokerConfig.from_properties({})
    assert config.consumer_groups == ConsumerGroupConfig()
    assert config.share_groups == ShareGroupConfig()


def test_the_keys_are_set_in_the_brokers_file() -> None:
    config = BrokerConfig.from_properties({
        "group.consumer.session.timeout.ms": "50000",
        "group.consumer.heartbeat.interval.ms": "3000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        "group.consumer.max.size": "10",
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        "group.consumer.migration.policy": "DISABLED",
        "group.share.record.lock.duration.ms": "15000",
        "group.share.delivery.count.limit": "3",
        "group.share.partition.max.record.locks": "100",
        "group.share.max.size": "20",
        "group.share.max.share.sessions": "20",
        "group.share.session.timeout.ms": "50000",
        "group.share.heartbeat.interval.ms": "6000",
    })  # fmt: skip
    consumer, share = config.consumer_groups, config.share_groups
    assert (consumer.session_timeout_ms, consumer.heartbeat_interval_ms) == (50_000, 3_000)
    assert (consumer.max_size, consumer.assignors) == (10, ("range",))
    assert consumer.migration_policy == "disabled"
    assert (share.record_lock_duration_ms, share.delivery_count_limit) == (15_000, 3)
    assert (share.partition_max_record_locks, share.max_size, share.max_share_sessions) == (
        100, 20, 20,
    )  # fmt: skip
    assert (share.session_timeout_ms, share.heartbeat_interval_ms) == (50_000, 6_000)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"group.consumer.session.timeout.ms": "0"},
         r"^group.consumer.session.timeout.ms: expected an integer >= 1, found 0$"),
        ({"group.consumer.heartbeat.interval.ms": "20000"},
         r"^group.consumer.heartbeat.interval.ms: expected 5000 to 15000 \(group.consumer.min."
         r"heartbeat.interval.ms to group.consumer.max.heartbeat.interval.ms\), found 20000$"),
        ({"group.consumer.session.timeout.ms": "30000"},
         r"^group.consumer.session.timeout.ms: expected 45000 to 60000 .*, found 30000$"),
        ({"group.consumer.max.session.timeout.ms": "40000"},
         r"^group.consumer.max.session.timeout.ms: expected at least group.consumer.min.session"
         r".timeout.ms \(45000\), found 40000$"),
        ({"group.consumer.min.session.timeout.ms": "1000",
          "group.consumer.session.timeout.ms": "10000",
          "group.consumer.heartbeat.interval.ms": "10000",
          "group.consumer.max.heartbeat.interval.ms": "10000"},
         r"^group.consumer.heartbeat.interval.ms: expected less than group.consumer.session."
         r"timeout.ms \(10000\), found 10000$"),
        ({"group.consumer.assignors": "uniform,sticky"},
         r"^group.consumer.assignors: expected some of uniform, range \(or Kafka's class names "
         r"for them\), found sticky$"),
        ({"group.consumer.assignors": "range,org.apache.kafka.coordinator.group.assignor."
          "RangeAssignor"},
         r"^group.consumer.assignors: expected each assignor once, found range, org"),
        ({"group.consumer.migration.policy": "sideways"},
         r"^group.consumer.migration.policy: expected one of bidirectional, upgrade, downgrade, "
         r"disabled, found 'sideways'$"),
        ({"group.share.max.size": "1001"},
         r"^group.share.max.size: expected an integer <= 1000, found 1001$"),
        ({"group.share.delivery.count.limit": "1"},
         r"^group.share.delivery.count.limit: expected an integer >= 2, found 1$"),
        ({"group.share.delivery.count.limit": "11"},
         r"^group.share.delivery.count.limit: expected an integer <= 10, found 11$"),
        ({"group.share.record.lock.duration.ms": "10000"},
         r"^group.share.record.lock.duration.ms: expected 15000 to 60000 .*, found 10000$"),
        ({"group.share.partition.max.record.locks": "50"},
         r"^group.share.partition.max.record.locks: expected an integer >= 100, found 50$"),
        ({"group.share.max.share.sessions": "100"},
         r"^group.share.max.share.sessions: expected at least group.share.max.size \(200\), "
         r"found 100$"),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_key_expected_and_found(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_kafka_4_group_keys_are_known_and_a_typo_is_not() -> None:
    props = {
        "group.consumer.session.timeout.ms": "45000",  # declared
        "group.share.record.lock.duration.ms": "30000",  # declared
        "group.coordinator.threads": "4",  # Kafka 4's, not acted on: no warning
        "group.share.persister.class.name": "x",
        "group.streams.max.size": "5",
        "group.consumer.sesion.timeout.ms": "45000",
    }
    assert unknown_keys(props) == ["group.consumer.sesion.timeout.ms"]
