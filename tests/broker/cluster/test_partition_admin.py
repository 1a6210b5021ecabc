"""ElectLeaders and partition reassignment (KIP-460, KIP-455) on three real brokers: a preferred
election puts leadership back after a leader bounce; a reassignment of a partition from brokers
[0,1] to [1,2] under an acks=all producer completes with nothing acknowledged lost (read back),
and ListPartitionReassignments shows it while it runs."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition

with warnings.catch_warnings():  # kafka-python reads its schemas with importlib's legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

from sluice.testing.cluster import BrokerCluster
from tests.broker.server.clients import ContinuousProducer, consume, unique

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def _elect(cluster: BrokerCluster, topic: str) -> KafkaError | None:
    tp = TopicPartition(topic, 0)
    future = cluster.admin().elect_leaders(ElectionType.PREFERRED, [tp])
    result: dict[TopicPartition, KafkaError | None] = future.result(20)
    return result[tp]


def test_preferred_election_after_a_leader_bounce(cluster: BrokerCluster) -> None:
    topic = unique("elect")
    cluster.create_topic(topic, 1, 3)
    preferred = cluster.partition(topic, 0).replicas[0]
    assert cluster.partition(topic, 0).leader == preferred
    error = _elect(cluster, topic)
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED

    cluster.kill(preferred)
    cluster.wait_leader(topic, 0, not_in={preferred})
    cluster.restart(preferred)
    cluster.wait_registered({0, 1, 2})
    cluster.wait_isr(topic, 0, {0, 1, 2})
    assert cluster.partition(topic, 0).leader != preferred  # no automatic rebalance

    assert _elect(cluster, topic) is None
    cluster.wait_partition(topic, 0, lambda p: p.leader == preferred, 20, "preferred leader")


def test_unclean_election_not_needed_with_a_live_leader(cluster: BrokerCluster) -> None:
    topic = unique("unclean")
    cluster.create_topic(topic, 2, 3)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 7)]
    result = cluster.admin().elect_leaders(ElectionType.UNCLEAN, tps).result(20)
    codes = {tp.partition: (e.code() if e else None) for tp, e in result.items()}
    assert codes == {
        0: KafkaError.ELECTION_NOT_NEEDED,
        1: KafkaError.ELECTION_NOT_NEEDED,
        7: KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


def test_reassignment_under_acks_all_loses_nothing(cluster: BrokerCluster) -> None:
    topic = unique("reassign")
    cluster.create_topic(topic, 1, 2, config={"min.insync.replicas": "2"})
    first, second = cluster.partition(topic, 0).replicas  # e.g. [1, 2] -> [2, 3] in Kafka's ids
    (third,) = {0, 1, 2} - {first, second}
    filler = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for _ in range(2000):  # a few MB for the new replica to catch up on
        filler.produce(topic, b"x" * 2000, partition=0)
        filler.poll(0)
    assert filler.flush(30) == 0
    producer = ContinuousProducer(cluster.bootstrap, topic, interval=0.002, acks="all").start()
    producer.wait_acked(200)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        tp = KTopicPartition(topic, 0)
        target = [second, third]
        assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
        ongoing = admin.list_partition_reassignments([tp])
        assert ongoing == {
            tp: {
                "replicas": [second, third, first],
                "adding_replicas": [third],
                "removing_replicas": [first],
            }
        }
        cluster.wait_partition(
            topic, 0, lambda p: p.replicas == target and set(p.isrs) == set(target), 60,
            f"replicas {target} in sync",
        )  # fmt: skip
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    time.sleep(0.5)  # keep producing to the new replica set for a moment
    producer.stop()
    read = consume(cluster.bootstrap, topic, {0: 2000 + producer.sent}, timeout=60)[0]
    # Every message acknowledged is there once, in order, at the offset acknowledged.
    assert not producer.errors and len(producer.acked) == producer.sent
    expected = [b"value-%d" % i for i in range(producer.sent)]
    assert [m.value() for m in read[2000:]] == expected
    assert sorted(producer.acked) == [(2000 + i, v) for i, v in enumerate(expected)]


def test_reassignment_refusals_and_cancel(cluster: BrokerCluster) -> None:
    topic = unique("refuse")
    cluster.create_topic(topic, 1, 2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        tp = KTopicPartition(topic, 0)
        result = admin.alter_partition_reassignments({tp: [0, 9]})
        assert result[tp] is InvalidReplicationAssignmentError
        cancel = admin.alter_partition_reassignments({tp: None})
        assert cancel[tp] is NoReassignmentInProgressError
        missing = KTopicPartition(topic, 5)
        unknown = admin.alter_partition_reassignments({missing: [0]})
        assert unknown[missing] is UnknownTopicOrPartitionError
    finally:
        admin.close()
