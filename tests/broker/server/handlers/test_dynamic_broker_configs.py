"""Dynamic broker configs (issue 26): AlterConfigs / IncrementalAlterConfigs on a BROKER
resource — one broker's id, or "" for every broker's default — through confluent-kafka's and
kafka-python's admin clients against a standalone broker: applied live, described with their
source, kept across a restart, read-only keys refused with INVALID_REQUEST naming them."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

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

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _reset(broker: BrokerProcess) -> Iterator[None]:
    """The shared broker leaves each test without dynamic configs, whatever the test did."""
    yield
    for name in ("0", ""):
        assert _wire_alter(broker, name, {}) == (Errors.NONE, None)


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    # librdkafka asks for the synonyms itself (IncludeSynonyms).
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return entries


def _set(admin: AdminClient, name: str, **configs: str | None) -> None:
    entries = [
        ConfigEntry(
            key.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.SET
            if value is not None
            else AlterConfigOpType.DELETE,
        )
        for key, value in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.BROKER, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(15)


def _wire_synonyms(broker: BrokerProcess, key: str) -> list[tuple[str | None, int]]:
    """(value, source) of each synonym of ``key`` of broker 0, DescribeConfigs v1 with
    include_synonyms."""
    body = request(
        ApiKey.DESCRIBE_CONFIGS,
        1,
        {
            "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": [key]}],
            "include_synonyms": True,
        },
    )
    with WireClient(broker.port) as wire:
        (config,) = wire.call(body).results[0].configs
    return [(s.value, int(s.source)) for s in config.synonyms]


def _wire_alter(broker: BrokerProcess, name: str, configs: dict[str, str]) -> tuple[int, str]:
    """AlterConfigs v1 of BROKER ``name``: (error code, message)."""
    body = request(
        ApiKey.ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "validate_only": False,
        },
    )
    with WireClient(broker.port) as wire:
        answer = wire.call(body).responses[0]
    return int(answer.error_code), answer.error_message


def _wire_describe(broker: BrokerProcess, name: str) -> list[tuple[str, str | None, int]]:
    """DescribeConfigs v1 of BROKER ``name``: (key, value, source) of each entry."""
    body = request(
        ApiKey.DESCRIBE_CONFIGS,
        1,
        {"resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": None}]},
    )
    with WireClient(broker.port) as wire:
        result = wire.call(body).results[0]
    assert int(result.error_code) == Errors.NONE
    return [(c.name, c.value, int(c.config_source)) for c in result.configs]


def _produce_size(broker: BrokerProcess, topic: str, size: int) -> int:
    with WireClient(broker.port) as wire:
        return int(wire.produce(topic, 0, encode_batch([(b"k", b"x" * size)])).error_code)


def test_message_max_bytes_altered_per_broker_applies_live(broker: BrokerProcess) -> None:
    """confluent-kafka: a per-broker message.max.bytes refuses a larger batch on a log that
    existed before the change, and deleting it lets the batch through again."""
    admin = _admin(broker)
    topic = unique("dyn-max")
    create_topic(broker.bootstrap, topic)
    assert _produce_size(broker, topic, 5000) == Errors.NONE
    _set(admin, "0", message_max_bytes="2000")
    entry = _describe(admin, "0")["message.max.bytes"]
    assert (entry.value, entry.source) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not entry.is_read_only
    assert _produce_size(broker, topic, 5000) == Errors.MESSAGE_TOO_LARGE
    assert _produce_size(broker, topic, 500) == Errors.NONE
    # A topic created now gets it too.
    later = unique("dyn-max-later")
    create_topic(broker.bootstrap, later)
    assert _produce_size(broker, later, 5000) == Errors.MESSAGE_TOO_LARGE
    _set(admin, "0", message_max_bytes=None)
    assert _describe(admin, "0")["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert _produce_size(broker, topic, 5000) == Errors.NONE


def test_cluster_default_and_per_broker_precedence(broker: BrokerProcess) -> None:
    """The cluster default (resource "", which confluent-kafka refuses to name: sent here as
    librdkafka would) under this broker's own."""
    admin = _admin(broker)
    assert _wire_alter(broker, "", {"log.retention.ms": "7200000"}) == (Errors.NONE, None)
    assert _wire_describe(broker, "") == [
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    ]
    entry = _describe(admin, "0")["log.retention.ms"]
    assert (entry.value, entry.source) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    _set(admin, "0", log_retention_ms="3600000")
    entry = _describe(admin, "0")["log.retention.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # The synonyms share the name (confluent-kafka keys them by name): read them off the wire.
    assert _wire_synonyms(broker, "log.retention.ms") == [
        ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("604800000", ConfigSource.DEFAULT_CONFIG.value),
    ]
    # A topic without its own retention.ms reports the broker's, as a topic describes it.
    topic = unique("dyn-retention")
    create_topic(broker.bootstrap, topic)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(15)
    assert (described["retention.ms"].value, described["retention.ms"].source) == (
        "3600000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    _set(admin, "0", log_retention_ms=None)
    assert _wire_alter(broker, "", {}) == (Errors.NONE, None)
    assert _wire_describe(broker, "") == []
    assert _describe(admin, "0")["log.retention.ms"].value == "604800000"


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("broker.id", "7", "Cannot update these configs dynamically: ['broker.id']"),
        ("log.dirs", "/tmp/x", "Cannot update these configs dynamically: ['log.dirs']"),
        ("listeners", "PLAINTEXT://:9999", "in Sluice (Kafka can"),
        ("message.max.bytes", "many", "message.max.bytes"),
    ],
)
def test_read_only_and_bad_values_are_invalid_request_naming_the_key(
    broker: BrokerProcess, key: str, value: str, why: str
) -> None:
    admin = _admin(broker)
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[entry])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([resource])[resource].result(15)
    error = info.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST
    assert why in error.str() and key in error.str()
    assert _describe(admin, "0")[key].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_another_brokers_id_is_invalid_request(broker: BrokerProcess) -> None:
    code, message = _wire_alter(broker, "5", {"log.retention.ms": "1000"})
    assert code == Errors.INVALID_REQUEST
    assert "Unexpected broker id, expected 0, but received 5" in message


def test_kafka_python_alters_and_a_restart_keeps_them(start_broker: StartBroker) -> None:
    """kafka-python's alter_configs (the whole set, AlterConfigs) and describe_configs; the
    configs and their effect survive a restart."""
    broker = start_broker()
    topic = unique("dyn-kp")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KConfigResource(
            ConfigResourceType.BROKER, "0", configs={"message.max.bytes": "3000"}
        )
        assert client.alter_configs([resource], incremental=True) == {"broker": {"0": "OK"}}
        # AlterConfigs (not incremental) replaces this broker's whole set.
        legacy = KConfigResource(
            ConfigResourceType.BROKER,
            "0",
            configs={"message.max.bytes": "3000", "log.flush.interval.messages": "5000"},
        )
        assert client.alter_configs([legacy]) == {"broker": {"0": "OK"}}
        # kafka-python, like confluent-kafka, will not name the default (""): over the wire.
        assert _wire_alter(broker, "", {"log.segment.bytes": "1048576"}) == (Errors.NONE, None)
        described = client.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
    finally:
        client.close()
    config = described["broker"]["0"]
    assert config["message.max.bytes"]["value"] == "3000"
    assert config["message.max.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert config["log.segment.bytes"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert config["log.flush.interval.messages"]["value"] == "5000"
    assert _produce_size(broker, topic, 5000) == Errors.MESSAGE_TOO_LARGE
    broker.restart()
    entries = _describe(_admin(broker), "0")
    assert (entries["message.max.bytes"].value, entries["message.max.bytes"].source) == (
        "3000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert entries["log.segment.bytes"].value == "1048576"
    assert entries["log.flush.interval.messages"].value == "5000"
    assert _produce_size(broker, topic, 5000) == Errors.MESSAGE_TOO_LARGE
    assert _produce_size(broker, topic, 1000) == Errors.NONE


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_librdkafka_0081s_broker_alters(broker: BrokerProcess) -> None:
    """What librdkafka's admin test 0081 does to a broker, through confluent-kafka: AlterConfigs
    of sasl.kerberos.min.time.before.relogin (a key Sluice reads nowhere: stored, described,
    no effect), an empty AlterConfigs, and IncrementalAlterConfigs SET background.threads with
    APPEND log.cleanup.policy compact, then DELETE and SUBTRACT — all NO_ERROR."""
    admin = _admin(broker)
    legacy = ConfigResource(ConfigResource.Type.BROKER, "0")
    legacy.set_config("sasl.kerberos.min.time.before.relogin", "58000")
    admin.alter_configs([legacy])[legacy].result(15)
    entry = _describe(admin, "0")["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    empty = ConfigResource(ConfigResource.Type.BROKER, "0")
    admin.alter_configs([empty])[empty].result(15)
    assert "sasl.kerberos.min.time.before.relogin" not in _describe(admin, "0")

    def incremental(*ops: tuple[str, AlterConfigOpType, str | None]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=op) for k, op, v in ops]
        resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=entries)
        admin.incremental_alter_configs([resource])[resource].result(15)

    incremental(
        ("background.threads", AlterConfigOpType.SET, "9"),
        ("log.cleanup.policy", AlterConfigOpType.APPEND, "compact"),
    )
    described = _describe(admin, "0")
    assert described["background.threads"].value == "9"
    assert described["log.cleanup.policy"].value == "delete,compact"
    incremental(
        ("background.threads", AlterConfigOpType.DELETE, ""),
        ("log.cleanup.policy", AlterConfigOpType.SUBTRACT, "compact"),
    )
    described = _describe(admin, "0")
    assert "background.threads" not in described
    assert (described["log.cleanup.policy"].value, described["log.cleanup.policy"].source) == (
        "delete",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    # Kerberos settings are a listener's, per broker only, as in Kafka.
    code, message = _wire_alter(broker, "", {"sasl.kerberos.min.time.before.relogin": "1"})
    assert code == Errors.INVALID_REQUEST
    assert "broker id must be specified" in message
