"""Transactional offsets survive the death of their group coordinator (three real brokers,
real ZooKeeper, confluent-kafka's transactional producer): the group's coordinator — another
broker than the transaction's — is killed (-9) between TxnOffsetCommit and EndTxn. The
offsets were appended to the group's ``__consumer_offsets`` partition as a transactional
batch (acks=all), so the partition's new leader rebuilds them as pending from its log; the
transaction's coordinator resends the marker there, and the offsets become the group's
committed ones (COMMIT) or are dropped (ABORT)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import partition_for as group_partition
from sluice.testing.cluster import QUIET, BrokerCluster
from tests.broker.cluster.test_cluster_transactions import (
    OFFSETS_PARTITIONS,
    committed,
    coordinator_of,
    create_offsets_topic,
    txn_producer,
)
from tests.broker.server.clients import unique

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def send_offsets(producer: Producer, bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        metadata = consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], metadata, 60)
    finally:
        consumer.close()


def group_led_elsewhere(cluster: BrokerCluster, not_by: int) -> tuple[str, int]:
    """A group whose coordinator (its offsets partition's leader) is not broker ``not_by``;
    returns it with its coordinator."""
    for _ in range(100):
        group = unique("group")
        leader = cluster.wait_leader(OFFSETS_TOPIC, group_partition(group, OFFSETS_PARTITIONS))
        if leader.leader != not_by:
            return group, int(leader.leader)
    raise AssertionError(f"expected a group coordinated by a broker other than {not_by}")


@pytest.mark.parametrize("commit", [True, False])
def test_a_group_coordinator_killed_before_end_txn_loses_nothing(
    cluster: BrokerCluster, commit: bool
) -> None:
    source = unique("src")
    cluster.create_topic(source, 1, 3)
    txn_id = unique("tx")
    create_offsets_topic(cluster.bootstrap, source)
    producer = txn_producer(cluster.bootstrap, txn_id, **{"transaction.timeout.ms": 120_000})
    txn_coordinator = coordinator_of(cluster, txn_id)
    group, group_coordinator = group_led_elsewhere(cluster, txn_coordinator)
    offsets_partition = group_partition(group, OFFSETS_PARTITIONS)
    # Every replica has the partition before the kill (the transaction's batch is acks=all).
    cluster.wait_isr(OFFSETS_TOPIC, offsets_partition, {0, 1, 2}, timeout=60)

    producer.begin_transaction()
    send_offsets(producer, cluster.bootstrap, group, source, 5)
    producer.commit_transaction(60)
    assert committed(cluster.bootstrap, group, source) == 5

    producer.begin_transaction()
    send_offsets(producer, cluster.bootstrap, group, source, 9)
    cluster.kill(group_coordinator)  # the offsets are in its log and its followers' only
    if commit:
        producer.commit_transaction(120)
    else:
        producer.abort_transaction(120)

    cluster.wait_leader(OFFSETS_TOPIC, offsets_partition, not_in={group_coordinator}, timeout=60)
    assert committed(cluster.bootstrap, group, source) == (9 if commit else 5)
    # And the next transaction of the producer commits through the new coordinator.
    producer.begin_transaction()
    send_offsets(producer, cluster.bootstrap, group, source, 11)
    producer.commit_transaction(60)
    assert committed(cluster.bootstrap, group, source) == 11
