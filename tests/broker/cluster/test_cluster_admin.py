"""The admin APIs of issue 17 on a three-broker ZooKeeper cluster: a config altered through one
broker is stored in ``/config/topics/<t>`` with a change notification and reaches every broker;
partitions added get replicas on the live brokers and leaders from the controller, and take
messages; explicit replica assignments of new topics and partitions are kept; DeleteRecords on
the leader moves the followers' log start too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)
from kazoo.client import KazooClient

from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = pytest.mark.broker


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def test_altered_config_reaches_every_broker_and_zookeeper(
    cluster: BrokerCluster, zk_connect: str
) -> None:
    topic = unique("cfg")
    cluster.create_topic(topic, 1, 3)
    entry = ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin = cluster.admin(0)
    admin.incremental_alter_configs([resource])[resource].result(15)

    def seen_by(broker_id: int) -> bool:
        probe = ConfigResource(ConfigResource.Type.TOPIC, topic)
        other = cluster.admin(broker_id)
        value = other.describe_configs([probe])[probe].result(15)["retention.ms"].value
        return value == "123456"

    for broker_id in cluster.running():
        wait_until(lambda b=broker_id: seen_by(b), 20, f"broker {broker_id} sees the config")
    zk = KazooClient(hosts=zk_connect)
    zk.start()
    try:
        data, _ = zk.get(f"/config/topics/{topic}")
        assert json.loads(data) == {"version": 1, "config": {"retention.ms": "123456"}}
        notes = [
            json.loads(zk.get(f"/config/changes/{c}")[0])
            for c in zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": f"topics/{topic}"} in notes
    finally:
        zk.stop()
        zk.close()


def test_partitions_added_get_replicas_and_leaders(cluster: BrokerCluster) -> None:
    topic = unique("grow")
    cluster.create_topic(topic, 1, 2)
    cluster.admin().create_partitions([NewPartitions(topic, 4)])[topic].result(15)
    for p in range(4):
        partition = cluster.wait_leader(topic, p)
        assert len(partition.replicas) == 2
    delivered = produce(cluster.bootstrap, topic, [Msg(None, b"x")], partition=3, acks="all")
    assert delivered[0].partition == 3


def test_delete_records_moves_the_followers_log_start(cluster: BrokerCluster) -> None:
    topic = unique("delrec")
    cluster.create_topic(topic, 1, 3)
    produce(cluster.bootstrap, topic, [Msg(None, b"%d" % i) for i in range(10)], partition=0,
            acks="all")  # fmt: skip
    cluster.wait_isr(topic, 0, {0, 1, 2})
    result = cluster.admin().delete_records([TopicPartition(topic, 0, 6)])
    for future in result.values():
        assert future.result(15).low_watermark == 6
    leader = cluster.wait_leader(topic, 0).leader
    with WireClient(cluster.brokers[leader].port) as client:
        assert client.list_offset(topic, 0, -2) == 6
    # The followers take the new log start from their next fetches: kill the leader and the
    # new one answers with it too.
    time.sleep(2)
    cluster.kill(leader)
    new_leader = cluster.wait_leader(topic, 0, not_in={leader}).leader
    with WireClient(cluster.brokers[new_leader].port) as client:
        assert client.list_offset(topic, 0, -2) == 6


def test_explicit_replica_assignments_are_kept(cluster: BrokerCluster) -> None:
    # CreateTopics' and CreatePartitions' assignments, as librdkafka's test 0081 gives them:
    # each partition's replicas in order, leaders from them.
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    a, b, c = sorted(cluster.running())
    topic, bad = unique("assigned"), unique("assigned-bad")
    created = [[a, b, c], [c, b, a], [b, c, a]]
    added = [[c, a, b], [a, c, b]]
    admin = cluster.admin()
    # confluent-kafka wants the partition count beside an assignment (-1 is refused).
    new = NewTopic(topic, num_partitions=len(created), replica_assignment=created)
    admin.create_topics([new])[topic].result(15)
    admin.create_partitions([NewPartitions(topic, 5, replica_assignment=added)])[topic].result(15)
    for p, replicas in enumerate(created + added):
        partition = cluster.wait_leader(topic, p)
        assert list(partition.replicas) == replicas, (p, partition.replicas)
        assert partition.leader == replicas[0]
    with pytest.raises(KafkaException) as refused:
        wrong = NewTopic(bad, num_partitions=1, replica_assignment=[[a, 99, b]])
        admin.create_topics([wrong])[bad].result(15)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert bad not in admin.list_topics(timeout=10).topics
