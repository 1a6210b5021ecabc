"""Dynamic broker configs on a three-broker ZooKeeper cluster (issue 26): the cluster default
altered through one broker is stored as Kafka stores it (``/config/brokers/<default>`` and a
``config_change`` notification) and applied live by every broker; a per-broker config reaches
only its broker and survives that broker's restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kazoo.client import KazooClient

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def _entry(cluster: BrokerCluster, broker_id: int, key: str) -> tuple[str | None, int]:
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entry = cluster.admin(broker_id).describe_configs([resource])[resource].result(15)[key]
    return entry.value, entry.source


def _alter_default(cluster: BrokerCluster, broker_id: int, configs: dict[str, str]) -> None:
    """AlterConfigs of the cluster default (resource "", which the admin clients will not
    name) sent to ``broker_id``."""
    body = request(
        ApiKey.ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "validate_only": False,
        },
    )
    with WireClient(cluster.brokers[broker_id].port) as wire:
        answer = wire.call(body).responses[0]
    assert (int(answer.error_code), answer.error_message) == (Errors.NONE, None)


def _produce_size(cluster: BrokerCluster, topic: str, size: int) -> int:
    leader = cluster.wait_leader(topic, 0).leader
    with WireClient(cluster.brokers[leader].port) as wire:
        return int(wire.produce(topic, 0, encode_batch([(b"k", b"x" * size)])).error_code)


def test_cluster_default_reaches_every_broker_live(cluster: BrokerCluster, zk_connect: str) -> None:
    topic = unique("dyn")
    cluster.create_topic(topic, 1, 3)
    assert _produce_size(cluster, topic, 5000) == Errors.NONE
    _alter_default(cluster, 0, {"message.max.bytes": "2000"})
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    for broker_id in cluster.running():
        wait_until(
            lambda b=broker_id: _entry(cluster, b, "message.max.bytes") == ("2000", default),
            20,
            f"broker {broker_id} applies the default",
        )
    # The leader, whichever broker it is, refuses what the default no longer allows.
    assert _produce_size(cluster, topic, 5000) == Errors.MESSAGE_TOO_LARGE
    zk = KazooClient(hosts=zk_connect)
    zk.start()
    try:
        data, _ = zk.get("/config/brokers/<default>")
        assert json.loads(data) == {"version": 1, "config": {"message.max.bytes": "2000"}}
        notes = [
            json.loads(zk.get(f"/config/changes/{c}")[0])
            for c in zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notes
    finally:
        zk.stop()
        zk.close()
    _alter_default(cluster, 1, {})
    for broker_id in cluster.running():
        wait_until(
            lambda b=broker_id: _entry(cluster, b, "message.max.bytes")[1] != default,
            20,
            f"broker {broker_id} drops the default",
        )
    assert _produce_size(cluster, topic, 5000) == Errors.NONE


def test_per_broker_config_stays_on_its_broker_and_survives_its_restart(
    cluster: BrokerCluster,
) -> None:
    entry = ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[entry])
    cluster.admin(1).incremental_alter_configs([resource])[resource].result(15)
    mine = ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert _entry(cluster, 1, "log.retention.ms") == mine
    assert _entry(cluster, 2, "log.retention.ms")[0] == "604800000"
    cluster.kill(1)
    cluster.restart(1)
    cluster.wait_registered({0, 1, 2})
    assert _entry(cluster, 1, "log.retention.ms") == mine
