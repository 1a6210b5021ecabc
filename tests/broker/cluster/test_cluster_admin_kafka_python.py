"""kafka-python's KafkaAdminClient against a three-broker ZooKeeper cluster, for the admin APIs
of issue 17 that the standalone tests (tests/broker/server/test_admin_apis.py) drive with it:
kafka-python routes each request itself (the controller, a partition's leader, a group's
coordinator, every broker for log dirs), so a cluster answers what a single broker never has
to — a request that reached the wrong broker would come back as an error here.

One cluster for the whole walk: starting three brokers costs more than every call together.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.server.clients import Msg, consumer, produce, unique
from tests.broker.server.wire import WireClient

with warnings.catch_warnings():  # kafka-python reads its schemas with importlib's legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def test_kafka_python_admin_walk_on_a_cluster(cluster: BrokerCluster) -> None:
    topic = unique("kp-cluster")
    cluster.create_topic(topic, 2, 3)
    for p in range(2):
        cluster.wait_isr(topic, p, {0, 1, 2})
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        # DescribeCluster: every broker and the controller ZooKeeper elected.
        described = client.describe_cluster()
        assert sorted(b["broker_id"] for b in described["brokers"]) == [0, 1, 2]
        assert described["controller_id"] in (0, 1, 2)

        # AlterConfigs (incremental), then DescribeConfigs through another broker.
        resource = KConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"retention.ms": "4242"}
        )
        assert client.alter_configs([resource], incremental=True) == {"topic": {topic: "OK"}}

        def retention_everywhere() -> bool:
            for broker_id in cluster.running():
                probe = ConfigResource(ConfigResource.Type.TOPIC, topic)
                entries = cluster.admin(broker_id).describe_configs([probe])[probe].result(15)
                if entries["retention.ms"].value != "4242":
                    return False
            return True

        wait_until(retention_everywhere, 20, "every broker sees retention.ms=4242")
        kp = client.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
        assert kp["topic"][topic]["retention.ms"]["value"] == "4242"
        assert kp["topic"][topic]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        # CreatePartitions goes to the controller; the new partition gets three replicas.
        response = client.create_partitions({topic: KNewPartitions(3)})
        assert [r.error_code for r in response.results] == [0]
        assert len(cluster.wait_leader(topic, 2).replicas) == 3

        # DeleteRecords goes to each partition's leader.
        produce(cluster.bootstrap, topic, [Msg(None, b"%d" % i) for i in range(6)], partition=1,
                acks="all")  # fmt: skip
        deleted = client.delete_records({KTopicPartition(topic, 1): 4})
        assert deleted[KTopicPartition(topic, 1)]["low_watermark"] == 4
        leader = cluster.wait_leader(topic, 1).leader
        with WireClient(cluster.brokers[leader].port) as wire:
            assert wire.list_offset(topic, 1, -2) == 4

        # DeleteGroups goes to the group's coordinator, wherever it is.
        group = unique("kp-group")
        c = consumer(cluster.bootstrap, group_id=group)
        try:
            c.commit(offsets=[CTopicPartition(topic, 1, 5)], asynchronous=False)
        finally:
            c.close()
        assert client.delete_groups([group]) == {group: "OK"}
        assert client.delete_groups([group]) == {group: "GroupIdNotFoundError"}

        # DescribeLogDirs asks every broker: each holds a replica of every partition.
        dirs = client.describe_log_dirs()
        assert sorted(entry["broker"] for entry in dirs) == [0, 1, 2]
        for entry in dirs:
            (log_dir,) = entry["log_dirs"]
            assert log_dir["error_code"] == 0
            (held,) = [t for t in log_dir["topics"] if t["name"] == topic]
            assert sorted(p["partition_index"] for p in held["partitions"]) == [0, 1, 2]
    finally:
        client.close()
