"""Tests for sluice.pipeline.consumer.registry: the consumer registries' znodes in Kafka 0.8's
formats, and the brokers' znodes that consumers read through sluice.broker.cluster.zk_data."""

from __future__ import annotations

import pytest

from sluice.broker.cluster.zk_data import BrokerIdsZNode, TopicZNode, ZkDataError
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.registry import (
    ConsumerIdZNode,
    ConsumerRegistration,
    OffsetZNode,
    OwnerZNode,
)


def test_registry_payloads_round_trip_in_kafka_08_formats() -> None:
    tp = TopicPartition("clicks", 3)
    assert OwnerZNode.path("g", tp) == "/consumers/g/owners/clicks/3"
    assert OffsetZNode.path("g", tp) == "/consumers/g/offsets/clicks/3"
    assert OffsetZNode.encode(42) == b"42"  # Kafka 0.8's plain decimal
    assert OffsetZNode.decode("g", tp, b"42") == 42
    assert OffsetZNode.decode("g", tp, b'{"version": 1, "offset": 7}') == 7
    assert OwnerZNode.decode("g", tp, OwnerZNode.encode("c1-0")) == "c1-0"
    with pytest.raises(ZkDataError, match="offsets/clicks/3"):
        OffsetZNode.decode("g", tp, b"-1")
    registration = ConsumerRegistration(
        subscription={"clicks": 2},
        timestamp_ms=1234,
        owned={"c1-1": [tp], "c1-0": [TopicPartition("clicks", 0)]},
    )
    data = ConsumerIdZNode.encode("c1", registration)
    assert b'"version": 1' in data and b'"pattern": "static"' in data
    assert b'"timestamp": "1234"' in data  # a string, as Kafka 0.8 wrote it
    assert ConsumerIdZNode.decode("g", "c1", data) == registration
    kafka_08 = b'{"version":1,"subscription":{"clicks":1},"pattern":"static","timestamp":"9"}'
    assert ConsumerIdZNode.decode("g", "x", kafka_08).subscription == {"clicks": 1}


def test_corrupt_consumer_registrations_name_the_znode() -> None:
    for data in (b"not json", b'{"version": 2, "subscription": {}}', b'{"version": 1}'):
        with pytest.raises(ZkDataError, match="^/consumers/g/ids/c1: expected JSON"):
            ConsumerIdZNode.decode("g", "c1", data)
    with pytest.raises(ValueError, match="expected thread ids of 'c1'"):
        registration = ConsumerRegistration({"t": 1}, 0, owned={"c2-0": []})
        ConsumerIdZNode.encode("c1", registration)


def test_consumers_read_the_topic_registry_in_kafka_08_and_cluster_formats() -> None:
    # The brokers' znodes have one model, the broker's; consumers count a topic's partitions
    # in it whether Kafka 0.8 wrote it (version 1) or Sluice's cluster mode (version 2).
    assert BrokerIdsZNode.path() == "/brokers/ids"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    kafka_08 = b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    assert TopicZNode.decode("t", kafka_08).partitions == {0: (1, 2), 1: (2, 3)}
    cluster = TopicZNode.encode({0: [1, 2], 1: [2, 3], 2: [3, 1]})
    assert b'"version":2' in cluster
    assert len(TopicZNode.decode("t", cluster).partitions) == 3
    with pytest.raises(ZkDataError, match="expected"):
        TopicZNode.decode("t", b'{"version": 2, "partitions": {}}')
