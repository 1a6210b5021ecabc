"""Kafka ACLs in a three-broker ZooKeeper cluster: stored in Kafka's ``/kafka-acl`` znodes, a
change made through one broker enforced by the others (change notifications), ACLs written in
ZooKeeper the way Kafka's own tools write them obeyed, replication running under the
authorizer (the brokers log in to each other as a super user)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.security_wiring.acl_clients import (
    ADMIN_PASSWORD,
    AUTHORIZER,
    JAAS,
    binding,
    codes,
    grant,
    produce,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ALICE = "User:alice"
TOPIC_DENIED = int(KafkaError.TOPIC_AUTHORIZATION_FAILED)
ADMIN_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": ADMIN_PASSWORD,
}


@pytest.fixture
def acl_cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    overrides = {
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": JAAS,  # the brokers log in to each other as admin...
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",  # ...a super user, as Kafka's docs ask
    }
    cluster = BrokerCluster(
        tmp_path, zk_connect, overrides=overrides, protocol="SASL_PLAINTEXT",
        client_config=ADMIN_CLIENT,
    )  # fmt: skip
    with cluster:
        yield cluster


def partitions_by_leader(cluster: BrokerCluster, topic: str) -> dict[int, int]:
    """A replication-factor-1 topic with a partition led by each broker (the controller
    spreads them): broker id -> partition. A produce to that partition is decided by that
    broker's authorizer."""
    cluster.create_topic(topic, partitions=len(cluster.brokers), replication_factor=1)
    leaders = {
        p.id: p.leader for p in cluster.metadata(topic=topic).topics[topic].partitions.values()
    }
    assert sorted(leaders.values()) == sorted(cluster.brokers), leaders
    return {leader: partition for partition, leader in leaders.items()}


def test_an_acl_made_through_one_broker_is_enforced_by_all(
    acl_cluster: BrokerCluster, zk_client: KazooClient
) -> None:
    led = partitions_by_leader(acl_cluster, "on-broker-all")
    bootstrap = acl_cluster.bootstrap
    for partition in led.values():
        assert codes(produce(bootstrap, "alice", "on-broker-all", 1, partition)) == {TOPIC_DENIED}
    grant(
        acl_cluster.brokers[0].bootstrap,
        binding(ALICE, AclOperation.WRITE, name="on-broker-", pattern=ResourcePatternType.PREFIXED),
    )
    # Kafka's layout: the pattern's znode and a change notification for the other brokers
    data, _ = zk_client.get("/kafka-acl-extended/prefixed/Topic/on-broker-")
    assert json.loads(data) == {
        "version": 1,
        "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "Write",
                  "host": "*"}],
    }  # fmt: skip
    changes = zk_client.get_children("/kafka-acl-extended-changes")
    assert changes and all(c.startswith("acl_changes_") for c in changes)
    for broker_id, partition in led.items():
        wait_until(
            lambda p=partition: codes(produce(bootstrap, "alice", "on-broker-all", 1, p)) == {None},
            timeout=20,
            message=f"broker {broker_id} to apply the ACL",
        )
    # deleted through another broker, it is gone everywhere
    doomed = AclBindingFilter(
        ResourceType.TOPIC, "on-broker-", ResourcePatternType.PREFIXED, ALICE, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    admin = acl_cluster.admin(2)
    assert len(admin.delete_acls([doomed], request_timeout=15)[doomed].result()) == 1
    assert not zk_client.exists("/kafka-acl-extended/prefixed/Topic/on-broker-")
    for broker_id, partition in led.items():
        wait_until(
            lambda p=partition: (
                codes(produce(bootstrap, "alice", "on-broker-all", 1, p)) == {TOPIC_DENIED}
            ),
            timeout=20,
            message=f"broker {broker_id} to drop the ACL",
        )


def test_acls_written_by_kafkas_tools_are_obeyed(
    acl_cluster: BrokerCluster, zk_client: KazooClient
) -> None:
    """What ``kafka-acls --authorizer-properties zookeeper.connect=...`` writes: the znode,
    then a literal change notification ``Topic:<name>``."""
    topic = "written-by-kafka"
    acl_cluster.create_topic(topic)
    acl = {"principal": ALICE, "permissionType": "Allow", "operation": "Write", "host": "*"}
    zk_client.create(
        f"/kafka-acl/Topic/{topic}",
        json.dumps({"version": 1, "acls": [acl]}).encode(),
        makepath=True,
    )
    zk_client.create("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode(), sequence=True)
    wait_until(
        lambda: codes(produce(acl_cluster.bootstrap, "alice", topic, count=1)) == {None},
        timeout=20,
        message="broker 1 to apply the ACL written in ZooKeeper",
    )


def test_replication_runs_under_the_authorizer(acl_cluster: BrokerCluster) -> None:
    """Followers fetch (CLUSTER_ACTION) as the inter-broker super user: acks=all with
    min.insync.replicas=2 only succeeds if they do."""
    acl_cluster.create_topic(
        "replicated", replication_factor=3, config={"min.insync.replicas": "2"}
    )
    grant(acl_cluster.bootstrap, binding(ALICE, AclOperation.WRITE, name="replicated"))
    # The grant reaches the partition's leader through ZooKeeper's change notification, as in
    # Kafka: until then the leader may still answer TOPIC_AUTHORIZATION_FAILED.
    wait_until(
        lambda: codes(produce(acl_cluster.bootstrap, "alice", "replicated", count=5)) == {None},
        timeout=20,
        message="acks=all writes by alice to succeed once the leader has the ACL",
    )
    acl_cluster.wait_isr("replicated", 0, {0, 1, 2})
