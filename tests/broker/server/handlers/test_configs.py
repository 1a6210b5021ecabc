"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (issue 17) against a standalone
broker, through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.errors import InvalidConfigurationError

from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe_topic(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return entries


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


# -- DescribeConfigs ---------------------------------------------------------------------------


def test_describe_topic_configs_as_kafka_reports_them(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("describe")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "3600000"})
    entries = _describe_topic(admin, topic)
    # Every topic config Kafka defines is listed, Kafka's defaults where nothing overrides.
    for name in ("cleanup.policy", "compression.type", "min.insync.replicas", "segment.bytes"):
        assert name in entries
    assert entries["compression.type"].value == "producer"
    assert entries["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["compression.type"].is_default
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_default and not retention.is_read_only
    synonyms = [(s.name, s.value, s.source) for s in retention.synonyms.values()]
    assert synonyms == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG.value),
    ]


def test_describe_broker_and_unknown_topic(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(15)
    assert entries["log.retention.ms"].value == "604800000"
    assert entries["broker.id"].is_read_only
    missing = ConfigResource(ConfigResource.Type.TOPIC, unique("nope"))
    with pytest.raises(KafkaException) as info:
        admin.describe_configs([missing])[missing].result(15)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_describe_configs(broker: BrokerProcess) -> None:
    topic = unique("kp-describe")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "delete"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        client.close()
    config = result["topic"][topic]
    assert config["cleanup.policy"]["value"] == "delete"
    assert config["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"


# -- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------------


def test_altered_retention_deletes_segments(start_broker: StartBroker) -> None:
    broker = start_broker({"log.retention.check.interval.ms": "200"})
    admin = _admin(broker)
    topic = unique("retention")
    create_topic(broker.bootstrap, topic, config={"segment.bytes": "1024"})
    messages = [Msg(b"k", b"v" * 400) for _ in range(10)]
    produce(broker.bootstrap, topic, messages, partition=0, batch_num_messages=1)
    with WireClient(broker.port) as client:
        assert client.list_offset(topic, 0, -2) == 0
        entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(15)
        assert _describe_topic(admin, topic)["retention.ms"].value == "1"
        # Retention now deletes every segment but the active one (two records a segment):
        # the log start moves to the active segment's base.
        _wait_for(lambda: client.list_offset(topic, 0, -2) == 8)


def test_incremental_alter_set_delete_append(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("incr")
    create_topic(broker.bootstrap, topic, config={"flush.messages": "5"})
    ops = [
        ConfigEntry("flush.messages", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    admin.incremental_alter_configs([resource])[resource].result(15)
    entries = _describe_topic(admin, topic)
    assert entries["flush.messages"].is_default
    assert entries["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    # APPEND on a config that is not a list is refused, as Kafka refuses it.
    bad = ConfigResource(
        ConfigResource.Type.TOPIC, topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )  # fmt: skip
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([bad])[bad].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize(
    ("key", "value"),
    [("retention.ms", "soon"), ("no.such.key", "1"), ("segment.bytes", "1"),
     ("cleanup.policy", "shred"), ("min.insync.replicas", "0")],
    ids=["bad-long", "unknown-key", "tiny-segment", "bad-policy", "min-isr-0"],
)  # fmt: skip
def test_alter_configs_validated_like_create_topics(
    broker: BrokerProcess, key: str, value: str
) -> None:
    topic = unique("alter-bad")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for incremental in (True, False):
            resource = KConfigResource(ConfigResourceType.TOPIC, topic, configs={key: value})
            result = client.alter_configs(
                [resource], raise_on_unknown=False, incremental=incremental
            )
            assert InvalidConfigurationError.__name__ in result["topic"][topic], result
    finally:
        client.close()
    assert _describe_topic(_admin(broker), topic)["retention.ms"].is_default


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_overrides(broker: BrokerProcess) -> None:
    topic = unique("alter")
    create_topic(broker.bootstrap, topic, config={"flush.ms": "1000"})
    admin = _admin(broker)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"retention.bytes": "1048576"}
    )
    admin.alter_configs([resource])[resource].result(15)
    entries = _describe_topic(admin, topic)
    assert entries["retention.bytes"].value == "1048576"
    assert entries["flush.ms"].is_default  # AlterConfigs replaces the whole set


@pytest.mark.parametrize("incremental", [True, False], ids=["incremental", "legacy"])
def test_kafka_python_alter_configs(broker: BrokerProcess, incremental: bool) -> None:
    topic = unique("kp-alter")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "1048576"}
        )
        result = client.alter_configs([resource], incremental=incremental)
    finally:
        client.close()
    assert result == {"topic": {topic: "OK"}}
    assert _describe_topic(_admin(broker), topic)["retention.bytes"].value == "1048576"


def test_alter_survives_a_restart(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic = unique("persist")
    create_topic(broker.bootstrap, topic)
    entry = ConfigEntry("retention.bytes", "4096", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin = _admin(broker)
    admin.incremental_alter_configs([resource])[resource].result(15)
    broker.restart()
    assert _describe_topic(_admin(broker), topic)["retention.bytes"].value == "4096"
