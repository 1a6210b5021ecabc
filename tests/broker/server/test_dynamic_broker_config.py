"""``DynamicBrokerConfig`` over its file store, without a broker process: precedence of the
two levels over the static config, refusals naming the key, a restart reading the file, and
the ZooKeeper payloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.broker.cluster.zk_data import (
    BrokerConfigZNode,
    ConfigChangeNotificationZNode,
    ZkDataError,
)
from sluice.broker.config import BrokerConfig, ConfigError
from sluice.broker.server.dynamic_broker_config import (
    CONFIG_FILE,
    DEFAULT_ENTITY,
    DynamicBrokerConfig,
    DynamicConfigError,
    FileConfigStore,
)


def _dynamic(tmp_path: Path, applied: list[BrokerConfig]) -> DynamicBrokerConfig:
    static = BrokerConfig.from_properties(
        {"broker.id": "3", "log.dirs": str(tmp_path), "log.retention.ms": "1000"}
    )
    return DynamicBrokerConfig(static, FileConfigStore(tmp_path), applied.append)


def test_the_broker_level_over_the_default_over_the_static(tmp_path: Path) -> None:
    applied: list[BrokerConfig] = []
    dynamic = _dynamic(tmp_path, applied)
    dynamic.load()
    assert applied == []  # nothing stored: nothing to apply
    dynamic.alter(DEFAULT_ENTITY, {"log.retention.ms": "2000", "message.max.bytes": "500"})
    assert (applied[-1].log.retention_ms, applied[-1].log.max_message_bytes) == (2000, 500)
    dynamic.alter("3", {"log.retention.ms": "3000", "min.insync.replicas": "2"})
    assert (applied[-1].log.retention_ms, applied[-1].log.max_message_bytes) == (3000, 500)
    assert applied[-1].min_insync_replicas == 2
    dynamic.alter("3", {})
    assert applied[-1].log.retention_ms == 2000
    dynamic.alter(DEFAULT_ENTITY, {})
    assert applied[-1].log == dynamic.static.log
    assert dynamic.effective() == dynamic.static


def test_validate_only_changes_nothing(tmp_path: Path) -> None:
    applied: list[BrokerConfig] = []
    dynamic = _dynamic(tmp_path, applied)
    dynamic.alter("3", {"log.segment.bytes": "1048576"}, validate_only=True)
    assert applied == [] and not (tmp_path / CONFIG_FILE).exists()
    assert dynamic.overrides("3") == {}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"broker.id": "4"}, "Cannot update these configs dynamically: ['broker.id']"),
        ({"listeners": "PLAINTEXT://:1"}, "in Sluice (Kafka can"),
        ({"log.retention.hours": "1"}, "log.retention.hours"),
        ({"message.max.bytes": "x"}, "Invalid value x for configuration message.max.bytes"),
        ({"min.insync.replicas": "0"}, "Invalid value 0 for configuration min.insync.replicas"),
        ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, config: dict[str, str], message: str) -> None:
    applied: list[BrokerConfig] = []
    dynamic = _dynamic(tmp_path, applied)
    with pytest.raises(DynamicConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        dynamic.alter("3", config)
    assert applied == [] and not (tmp_path / CONFIG_FILE).exists()


def test_a_restart_reads_the_file_and_skips_what_it_cannot_apply(tmp_path: Path) -> None:
    first: list[BrokerConfig] = []
    _dynamic(tmp_path, first).alter("3", {"log.segment.bytes": "1048576"})
    stored = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert stored == {"version": 1, "brokers": {"3": {"log.segment.bytes": "1048576"}}}
    # A key written by hand that Sluice does not apply is skipped, the rest applied.
    stored["brokers"]["<default>"] = {"listeners": "PLAINTEXT://:1", "log.retention.ms": "5000"}
    (tmp_path / CONFIG_FILE).write_text(json.dumps(stored))
    again: list[BrokerConfig] = []
    dynamic = _dynamic(tmp_path, again)
    dynamic.load()
    assert (again[-1].log.segment_bytes, again[-1].log.retention_ms) == (1048576, 5000)
    assert dynamic.overrides(DEFAULT_ENTITY) == {"log.retention.ms": "5000"}


def test_zookeeper_payloads_are_kafkas() -> None:
    assert BrokerConfigZNode.path("1") == "/config/brokers/1"
    assert BrokerConfigZNode.path(BrokerConfigZNode.DEFAULT) == "/config/brokers/<default>"
    data = BrokerConfigZNode.encode({"log.retention.ms": "1"})
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "1"}}
    assert BrokerConfigZNode.decode("1", data) == {"log.retention.ms": "1"}
    assert BrokerConfigZNode.decode("1", b"") == {}
    with pytest.raises(ZkDataError, match="/config/brokers/1"):
        BrokerConfigZNode.decode("1", b'{"version":1,"config":{"a":1}}')
    note = ConfigChangeNotificationZNode.encode_broker("<default>")
    assert json.loads(note) == {"version": 2, "entity_path": "brokers/<default>"}
    assert ConfigChangeNotificationZNode.decode("config_change_0000000001", note) == (
        "brokers",
        "<default>",
    )


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"version": 1, "brok', "expected JSON, found"),
        ('{"version": 2, "brokers": {}}', "expected {'version': 1, 'brokers': {...}}, found"),
        ("[1, 2]", "expected {'version': 1, 'brokers': {...}}, found [1, 2]"),
    ],
)
def test_a_damaged_file_is_one_config_error_naming_it_and_the_way_out(
    tmp_path: Path, text: str, found: str
) -> None:
    store = FileConfigStore(tmp_path)
    store.path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        store.read("0")
    message = str(caught.value)
    assert message.startswith(f"{store.path}: {found}")
    assert "remove it to drop the dynamic broker configs" in message
    assert "\n" not in message
