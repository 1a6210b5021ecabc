"""The znode classes: round trips, Kafka's own payloads, and clear errors on malformed bytes."""

from __future__ import annotations

import json
import uuid

import pytest

from sluice.broker.cluster.zk_data import (
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    PartitionState,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkDataError,
    decode_uuid,
    encode_uuid,
)


def test_paths_are_kafkas() -> None:
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionStateZNode.path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert TopicConfigZNode.path("t") == "/config/topics/t"
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"
    assert ClusterIdZNode.path() == "/cluster/id"
    assert ProducerIdBlockZNode.path() == "/latest_producer_id_block"


def test_controller_round_trip() -> None:
    data = ControllerZNode.encode(7, timestamp_ms=1234)
    assert json.loads(data) == {"version": 1, "brokerid": 7, "timestamp": "1234"}
    assert ControllerZNode.decode(data) == 7


def test_controller_epoch_is_a_bare_integer() -> None:
    assert ControllerEpochZNode.encode(12) == b"12"
    assert ControllerEpochZNode.decode(b"12") == 12
    with pytest.raises(ZkDataError, match="/controller_epoch: expected a non-negative"):
        ControllerEpochZNode.decode(b"-1")


def test_broker_round_trip_with_and_without_rack() -> None:
    for rack in (None, "r1"):
        data = BrokerIdZNode.encode("10.0.0.5", 9092, rack, timestamp_ms=1)
        doc = json.loads(data)
        assert doc["endpoints"] == ["PLAINTEXT://10.0.0.5:9092"]
        assert doc["jmx_port"] == -1 and doc["version"] == 4
        assert ("rack" in doc) == (rack is not None)
        assert BrokerIdZNode.decode(5, data) == BrokerInfo(
            5, "10.0.0.5", 9092, rack, (("PLAINTEXT", "10.0.0.5", 9092),)
        )


def test_broker_decodes_kafkas_registration_without_plaintext_host() -> None:
    # What Kafka 2.x writes for a broker whose only listener is not PLAINTEXT.
    data = json.dumps(
        {
            "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT"},
            "endpoints": ["INTERNAL://kafka-1.example:19092"],
            "jmx_port": -1,
            "host": None,
            "timestamp": "1700000000000",
            "port": -1,
            "version": 4,
        }
    ).encode()
    assert BrokerIdZNode.decode(1, data) == BrokerInfo(
        1, "kafka-1.example", 19092, None, (("INTERNAL", "kafka-1.example", 19092),)
    )


def test_topic_round_trip() -> None:
    topic_id = uuid.uuid4()
    data = TopicZNode.encode({1: [2, 3], 0: [1, 2]}, topic_id)
    doc = json.loads(data)
    assert doc["version"] == 2 and doc["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert "internal" not in doc
    decoded = TopicZNode.decode("t", data)
    assert decoded.partitions == {0: (1, 2), 1: (2, 3)}
    assert decoded.topic_id == topic_id and not decoded.internal
    assert TopicZNode.decode("t", TopicZNode.encode({0: [1]}, internal=True)).internal


def test_topic_decodes_kafka_version_1() -> None:
    decoded = TopicZNode.decode("t", b'{"version":1,"partitions":{"0":[0,1,3]}}')
    assert decoded.partitions == {0: (0, 1, 3)} and decoded.topic_id is None


def test_uuid_is_kafkas_base64_and_hex_is_accepted() -> None:
    value = uuid.uuid4()
    text = encode_uuid(value)
    assert len(text) == 22 and "=" not in text
    assert decode_uuid("/p", text) == value
    assert decode_uuid("/p", str(value)) == value


def test_partition_state_round_trip() -> None:
    data = TopicPartitionStateZNode.encode(2, 5, [2, 1], 9)
    assert json.loads(data) == {
        "version": 1,
        "leader": 2,
        "leader_epoch": 5,
        "isr": [2, 1],
        "controller_epoch": 9,
    }
    state = TopicPartitionStateZNode.decode(data, 17)
    assert state == PartitionState(2, 5, (2, 1), 9, 17)
    assert TopicPartitionStateZNode.encode_state(state) == data


def test_config_round_trip() -> None:
    data = TopicConfigZNode.encode({"retention.ms": "1000"})
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000"}}
    assert TopicConfigZNode.decode("t", data) == {"retention.ms": "1000"}
    assert TopicConfigZNode.decode("t", b"") == {}


def test_cluster_id_round_trip() -> None:
    cluster_id = ClusterIdZNode.generate()
    data = ClusterIdZNode.encode(cluster_id)
    assert json.loads(data) == {"version": "1", "id": cluster_id}
    assert ClusterIdZNode.decode(data) == cluster_id


def test_producer_id_block_round_trip_and_sequence() -> None:
    assert ProducerIdBlockZNode.decode(b"") is None
    first = ProducerIdBlockZNode.next_block(None, 1)
    assert first == ProducerIdBlock(1, 0, 999)
    data = ProducerIdBlockZNode.encode(first)
    assert json.loads(data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    assert ProducerIdBlockZNode.decode(data) == first
    assert ProducerIdBlockZNode.next_block(first, 2) == ProducerIdBlock(2, 1000, 1999)


@pytest.mark.parametrize(
    ("decode", "data", "expected"),
    [
        (ControllerZNode.decode, b"not json", "/controller: expected UTF-8 JSON"),
        (ControllerZNode.decode, b"[1]", "/controller: expected a JSON object"),
        (ControllerZNode.decode, b'{"version":1}', "/controller: expected a 'brokerid' field"),
        (ControllerZNode.decode, b'{"version":9,"brokerid":1}', "expected version in"),
        (ControllerZNode.decode, b"", "/controller: expected a JSON object"),
        (
            lambda d: BrokerIdZNode.decode(1, d),
            b'{"version":4,"host":"h","port":"9092","jmx_port":-1}',
            "/brokers/ids/1: expected a 'port' in 1..65535",
        ),
        (
            lambda d: TopicZNode.decode("t", d),
            b'{"version":2,"partitions":{"0":[1,"2"]}}',
            "/brokers/topics/t: expected the replicas of partition 0 as a list of integers",
        ),
        (
            lambda d: TopicZNode.decode("t", d),
            b'{"version":2,"partitions":{"0":[1],"2":[1]}}',
            "expected partitions 0..1",
        ),
        (
            lambda d: TopicZNode.decode("t", d),
            b'{"version":2,"partitions":{"0":[1,1]}}',
            "expected distinct replicas for partition 0",
        ),
        (
            lambda d: TopicZNode.decode("t", d),
            b'{"version":2,"partitions":{"0":[1]},"topic_id":"nope"}',
            "expected a UUID",
        ),
        (
            lambda d: TopicPartitionStateZNode.decode(d, 0, topic="t", partition=3),
            b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1}',
            "/brokers/topics/t/partitions/3/state: expected a 'isr' field",
        ),
        (
            lambda d: TopicPartitionStateZNode.decode(d, 0),
            b'{"version":1,"leader":1,"leader_epoch":true,"isr":[1],"controller_epoch":1}',
            "expected an integer 'leader_epoch'",
        ),
        (
            lambda d: TopicConfigZNode.decode("t", d),
            b'{"version":1,"config":{"a":1}}',
            "/config/topics/t: expected a 'config' object of strings",
        ),
        (ClusterIdZNode.decode, b'{"version":"1","id":""}', "expected a non-empty 'id'"),
        (
            ProducerIdBlockZNode.decode,
            b'{"version":1,"broker":1,"block_start":"9","block_end":"3"}',
            "expected 0 <= block_start <= block_end",
        ),
        (
            ProducerIdBlockZNode.decode,
            b'{"version":1,"broker":1,"block_start":"x","block_end":"3"}',
            "expected an integer 'block_start'",
        ),
    ],
)
def test_malformed_payloads_raise_zk_data_error(decode: object, data: bytes, expected: str) -> None:
    assert callable(decode)
    with pytest.raises(ZkDataError) as info:
        decode(data)
    assert expected in str(info.value)
    assert isinstance(info.value, ValueError)
