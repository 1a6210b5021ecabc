"""CreateTopics, DeleteTopics and CreatePartitions through confluent-kafka's AdminClient (and
kafka-python's KafkaAdminClient for CreatePartitions), and Metadata after; a malformed replica
assignment refused as Kafka refuses it."""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, consumer, poll_messages, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _create(admin: AdminClient, topic: NewTopic) -> KafkaError | None:
    """The error creating ``topic`` gives, or None if it was created."""
    future = admin.create_topics([topic], operation_timeout=10)[topic.topic]
    try:
        future.result(timeout=15)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def test_create_topics_then_metadata_lists_them(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [unique("admin"), unique("admin")]
    futures = admin.create_topics([NewTopic(names[0], 3, 1), NewTopic(names[1], 1, 1)])
    for future in futures.values():
        assert future.result(timeout=15) is None
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics[names[0]].partitions) == 3
    assert len(metadata.topics[names[1]].partitions) == 1
    partition = metadata.topics[names[0]].partitions[2]
    assert (partition.leader, partition.replicas, partition.isrs) == (0, [0], [0])
    assert metadata.controller_id == 0
    assert metadata.cluster_id


@pytest.mark.parametrize(
    ("name", "partitions", "replication", "config", "expected"),
    [
        ("bad name!", 1, 1, {}, KafkaError.TOPIC_EXCEPTION),  # 17 INVALID_TOPIC_EXCEPTION
        ("x" * 250, 1, 1, {}, KafkaError.TOPIC_EXCEPTION),
        ("rf3-{}", 1, 3, {}, KafkaError.INVALID_REPLICATION_FACTOR),
        ("badcfg-{}", 1, 1, {"retention.ms": "soon"}, KafkaError.INVALID_CONFIG),
        ("badkey-{}", 1, 1, {"no.such.key": "1"}, KafkaError.INVALID_CONFIG),
        ("badseg-{}", 1, 1, {"segment.bytes": "1"}, KafkaError.INVALID_CONFIG),
    ],
    ids=["bad-name", "too-long", "replication-3", "bad-value", "unknown-key", "tiny-segment"],
)
def test_create_topic_errors(
    broker: BrokerProcess,
    name: str,
    partitions: int,
    replication: int,
    config: dict[str, str],
    expected: int,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = name.replace("{}", unique("e"))
    error = _create(admin, NewTopic(name, partitions, replication, config=config))
    assert error is not None and error.code() == expected, error
    assert name not in admin.list_topics(timeout=10).topics


def test_create_existing_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("exists")
    assert _create(admin, NewTopic(name, 2, 1)) is None
    error = _create(admin, NewTopic(name, 5, 1))
    assert error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 2


def test_validate_only_creates_nothing(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("dry")
    futures = admin.create_topics([NewTopic(name, 1, 1)], validate_only=True)
    assert futures[name].result(timeout=15) is None
    assert name not in admin.list_topics(timeout=10).topics


def test_delete_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("gone")
    assert _create(admin, NewTopic(name, 1, 1)) is None
    assert admin.delete_topics([name], operation_timeout=10)[name].result(timeout=15) is None
    assert name not in admin.list_topics(timeout=10).topics
    future = admin.delete_topics([name], operation_timeout=10)[name]
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe_topic(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return entries


def test_create_topic_accepts_every_kafka_topic_config(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("compressed")
    config = {"compression.type": "lz4", "preallocate": "true", "segment.jitter.ms": "10"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)
    entries = _describe_topic(admin, topic)
    assert entries["compression.type"].value == "lz4"


# -- CreatePartitions ----------------------------------------------------------------------------


def test_partitions_added_then_produced_to(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("grow")
    create_topic(broker.bootstrap, topic)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3
    delivered = produce(broker.bootstrap, topic, [Msg(b"k", b"v")], partition=2)
    assert delivered[0].partition == 2
    c = consumer(broker.bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([CTopicPartition(topic, 2, 0)])
        assert poll_messages(c, 1)[0].value() == b"v"
    finally:
        c.close()
    # Kafka never shrinks a topic.
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_kafka_python_create_partitions(broker: BrokerProcess) -> None:
    topic = unique("kp-grow")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = client.create_partitions({topic: KNewPartitions(4)})
    finally:
        client.close()
    assert [r.error_code for r in response.results] == [0]
    assert len(_admin(broker).list_topics(timeout=10).topics[topic].partitions) == 4


def _create_assigned(wire: WireClient, topic: str, assignments: list[list[int]],
                     partitions: int = -1, replication: int = -1) -> Any:  # fmt: skip
    body = request(ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": topic, "num_partitions": partitions,
                    "replication_factor": replication, "configs": [],
                    "assignments": [{"partition_index": i, "broker_ids": b}
                                    for i, b in enumerate(assignments)]}],
        "timeout": 10_000, "validate_only": False,
    })  # fmt: skip
    return wire.call(body).topics[0]


def test_a_malformed_replica_assignment_is_refused(broker: BrokerProcess) -> None:
    # Kafka's ZkAdminManager/AdminZkClient checks, before anything is created.
    topic = unique("assign-bad")
    with WireClient(broker.port) as wire:
        both = _create_assigned(wire, topic, [[0]], partitions=1)
        assert both.error_code == Errors.INVALID_REQUEST
        assert "cannot be used at the same time" in both.error_message
        for assignments, words in (
            ([[0], [0, 0]], "same number of replicas"),
            ([[0, 0]], "Duplicate replica"),
            ([[]], "at least one replica"),
        ):
            refused = _create_assigned(wire, topic, assignments)
            assert refused.error_code == Errors.INVALID_REPLICA_ASSIGNMENT, assignments
            assert words in refused.error_message
        gap = request(ApiKey.CREATE_TOPICS, 4, {
            "topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                        "configs": [], "assignments": [{"partition_index": 1,
                                                        "broker_ids": [0]}]}],
            "timeout": 10_000, "validate_only": False,
        })  # fmt: skip
        refused = wire.call(gap).topics[0]
        assert refused.error_code == Errors.INVALID_REPLICA_ASSIGNMENT
        assert "consecutive 0-based" in refused.error_message
    assert topic not in _admin(broker).list_topics(timeout=10).topics


def test_create_topics_v5_answers_the_counts_and_configs(broker: BrokerProcess) -> None:
    topic = unique("create-v5")
    body = request(ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": 2, "replication_factor": -1,
                    "assignments": [], "configs": [{"name": "retention.ms", "value": "60000"}]}],
        "timeout": 10_000, "validate_only": False,
    })  # fmt: skip
    with WireClient(broker.port) as wire:
        (created,) = wire.call(body).topics
        (refused,) = wire.call(body).topics  # exists now
    assert (created.error_code, created.num_partitions, created.replication_factor) == (
        Errors.NONE, 2, 1,
    )  # fmt: skip
    assert [(c.name, c.value, c.read_only) for c in created.configs] == [
        ("retention.ms", "60000", False)
    ]
    assert refused.error_code == Errors.TOPIC_ALREADY_EXISTS and refused.configs is None


def test_a_standalone_replica_assignment_names_this_broker(broker: BrokerProcess) -> None:
    topic, other = unique("assign-one"), unique("assign-other")
    with WireClient(broker.port) as wire:
        created = _create_assigned(wire, topic, [[0], [0]])
        assert created.error_code == Errors.NONE
        refused = _create_assigned(wire, other, [[0], [7]])
        assert refused.error_code == Errors.INVALID_REPLICA_ASSIGNMENT
        assert "standalone broker holds every replica" in refused.error_message
    topics = _admin(broker).list_topics(timeout=10).topics
    assert len(topics[topic].partitions) == 2 and other not in topics


# kafka-python reads its bundled data with importlib.resources' legacy API.
@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("release", "versions"), [((2, 7, 0), (6, 5)), ((2, 8, 0), (7, 6))])
def test_kafka_python_pinned_creates_and_deletes(
    broker: BrokerProcess, release: tuple[int, ...], versions: tuple[int, int]
) -> None:
    # Pinned below the 3.0 it infers, kafka-python sends its release's versions unnegotiated:
    # 2.7's CreateTopics v6 and DeleteTopics v5 (KIP-599), 2.8's v7 and v6 (topic ids,
    # KIP-516: v7 answers the created topic's id).
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    from kafka.protocol.broker_version_data import BrokerVersionData

    pinned = BrokerVersionData(release)
    assert (
        pinned.api_version(CreateTopicsRequest),
        pinned.api_version(DeleteTopicsRequest),
    ) == versions
    topic = unique("kp-pinned")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=release)
    try:
        created = admin.create_topics([NewTopic(topic, 3, 1)])
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [
            (topic, Errors.NONE, 3)
        ]
        if versions[0] >= 7:
            (created_topic,) = created["topics"]
            assert str(created_topic["topic_id"]) == str(_topic_id(broker, topic))
        again = admin.create_topics([NewTopic(topic, 3, 1)], raise_errors=False)
        assert [t["error_code"] for t in again["topics"]] == [Errors.TOPIC_ALREADY_EXISTS]
        deleted = admin.delete_topics([topic])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, Errors.NONE)]
    finally:
        admin.close()


def _topic_id(broker: BrokerProcess, topic: str) -> uuid.UUID:
    with WireClient(broker.port) as wire:
        return wire.topic_id(topic)


def test_delete_topics_v6_by_name_or_id(broker: BrokerProcess) -> None:
    """KIP-516: each topic named by name or by id; the answer carries both; an id no topic has
    is UNKNOWN_TOPIC_ID."""
    by_name, by_id = unique("del-name"), unique("del-id")
    for topic in (by_name, by_id):
        create_topic(broker.bootstrap, topic)
    ids = {topic: _topic_id(broker, topic) for topic in (by_name, by_id)}
    unknown = uuid.uuid4()
    body = request(ApiKey.DELETE_TOPICS, 6, {
        "topics": [{"name": by_name, "topic_id": uuid.UUID(int=0)},
                   {"name": None, "topic_id": ids[by_id]},
                   {"name": None, "topic_id": unknown}],
        "timeout": 10_000,
    })  # fmt: skip
    with WireClient(broker.port) as wire:
        answers = wire.call(body).responses
    assert [(a.name, a.topic_id, a.error_code) for a in answers] == [
        (by_name, ids[by_name], Errors.NONE),
        (by_id, ids[by_id], Errors.NONE),
        (None, unknown, Errors.UNKNOWN_TOPIC_ID),
    ]
    topics = _admin(broker).list_topics(timeout=10).topics
    assert by_name not in topics and by_id not in topics
