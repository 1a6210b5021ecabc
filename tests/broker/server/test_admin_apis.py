"""The admin APIs of issue 17 against a standalone broker, through confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
CreatePartitions, DeleteRecords, DeleteGroups, OffsetDelete, DescribeCluster, DescribeLogDirs,
and ListOffsets v0."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition as KTopicPartition
    from kafka import TopicPartitionReplica as KTopicPartitionReplica
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.errors import InvalidConfigurationError, NonEmptyGroupError
    from kafka.errors import NoError as KNoError

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import Msg, consumer, poll_messages, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe_topic(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return entries


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


# -- DescribeConfigs ---------------------------------------------------------------------------


def test_describe_topic_configs_as_kafka_reports_them(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("describe")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "3600000"})
    entries = _describe_topic(admin, topic)
    # Every topic config Kafka defines is listed, Kafka's defaults where nothing overrides.
    for name in ("cleanup.policy", "compression.type", "min.insync.replicas", "segment.bytes"):
        assert name in entries
    assert entries["compression.type"].value == "producer"
    assert entries["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["compression.type"].is_default
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_default and not retention.is_read_only
    synonyms = [(s.name, s.value, s.source) for s in retention.synonyms.values()]
    assert synonyms == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG.value),
    ]


def test_describe_broker_and_unknown_topic(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(15)
    assert entries["log.retention.ms"].value == "604800000"
    assert entries["broker.id"].is_read_only
    missing = ConfigResource(ConfigResource.Type.TOPIC, unique("nope"))
    with pytest.raises(KafkaException) as info:
        admin.describe_configs([missing])[missing].result(15)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_describe_configs(broker: BrokerProcess) -> None:
    topic = unique("kp-describe")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "delete"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        client.close()
    config = result["topic"][topic]
    assert config["cleanup.policy"]["value"] == "delete"
    assert config["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"


# -- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------------


def test_altered_retention_deletes_segments(start_broker: StartBroker) -> None:
    broker = start_broker({"log.retention.check.interval.ms": "200"})
    admin = _admin(broker)
    topic = unique("retention")
    create_topic(broker.bootstrap, topic, config={"segment.bytes": "1024"})
    messages = [Msg(b"k", b"v" * 400) for _ in range(10)]
    produce(broker.bootstrap, topic, messages, partition=0, batch_num_messages=1)
    with WireClient(broker.port) as client:
        assert client.list_offset(topic, 0, -2) == 0
        entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(15)
        assert _describe_topic(admin, topic)["retention.ms"].value == "1"
        # Retention now deletes every segment but the active one (two records a segment):
        # the log start moves to the active segment's base.
        _wait_for(lambda: client.list_offset(topic, 0, -2) == 8)


def test_incremental_alter_set_delete_append(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("incr")
    create_topic(broker.bootstrap, topic, config={"flush.messages": "5"})
    ops = [
        ConfigEntry("flush.messages", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
    admin.incremental_alter_configs([resource])[resource].result(15)
    entries = _describe_topic(admin, topic)
    assert entries["flush.messages"].is_default
    assert entries["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    # APPEND on a config that is not a list is refused, as Kafka refuses it.
    bad = ConfigResource(
        ConfigResource.Type.TOPIC, topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )  # fmt: skip
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([bad])[bad].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize(
    ("key", "value"),
    [("retention.ms", "soon"), ("no.such.key", "1"), ("segment.bytes", "1"),
     ("cleanup.policy", "shred"), ("min.insync.replicas", "0")],
    ids=["bad-long", "unknown-key", "tiny-segment", "bad-policy", "min-isr-0"],
)  # fmt: skip
def test_alter_configs_validated_like_create_topics(
    broker: BrokerProcess, key: str, value: str
) -> None:
    topic = unique("alter-bad")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for incremental in (True, False):
            resource = KConfigResource(ConfigResourceType.TOPIC, topic, configs={key: value})
            result = client.alter_configs(
                [resource], raise_on_unknown=False, incremental=incremental
            )
            assert InvalidConfigurationError.__name__ in result["topic"][topic], result
    finally:
        client.close()
    assert _describe_topic(_admin(broker), topic)["retention.ms"].is_default


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_overrides(broker: BrokerProcess) -> None:
    topic = unique("alter")
    create_topic(broker.bootstrap, topic, config={"flush.ms": "1000"})
    admin = _admin(broker)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"retention.bytes": "1048576"}
    )
    admin.alter_configs([resource])[resource].result(15)
    entries = _describe_topic(admin, topic)
    assert entries["retention.bytes"].value == "1048576"
    assert entries["flush.ms"].is_default  # AlterConfigs replaces the whole set


@pytest.mark.parametrize("incremental", [True, False], ids=["incremental", "legacy"])
def test_kafka_python_alter_configs(broker: BrokerProcess, incremental: bool) -> None:
    topic = unique("kp-alter")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "1048576"}
        )
        result = client.alter_configs([resource], incremental=incremental)
    finally:
        client.close()
    assert result == {"topic": {topic: "OK"}}
    assert _describe_topic(_admin(broker), topic)["retention.bytes"].value == "1048576"


def test_alter_survives_a_restart(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic = unique("persist")
    create_topic(broker.bootstrap, topic)
    entry = ConfigEntry("retention.bytes", "4096", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin = _admin(broker)
    admin.incremental_alter_configs([resource])[resource].result(15)
    broker.restart()
    assert _describe_topic(_admin(broker), topic)["retention.bytes"].value == "4096"


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


# -- DeleteRecords -------------------------------------------------------------------------------


def test_delete_records_then_fetch_below_is_out_of_range(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("delrec")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"%d" % i) for i in range(10)], partition=0)
    result = admin.delete_records([CTopicPartition(topic, 0, 4)])
    for future in result.values():
        assert future.result(15).low_watermark == 4
    with WireClient(broker.port) as client:
        assert client.list_offset(topic, 0, -2) == 4
        assert client.fetch(topic, 0, 2).error_code == Errors.OFFSET_OUT_OF_RANGE
        assert client.fetch(topic, 0, 4).error_code == Errors.NONE
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    beyond = admin.delete_records([CTopicPartition(topic, 0, 99)])
    with pytest.raises(KafkaException):
        for future in beyond.values():
            future.result(15)


def test_kafka_python_delete_records(broker: BrokerProcess) -> None:
    topic = unique("kp-delrec")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x") for _ in range(5)], partition=0)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.delete_records({KTopicPartition(topic, 0): 3})
    finally:
        client.close()
    assert result[KTopicPartition(topic, 0)]["low_watermark"] == 3


# -- DeleteGroups and OffsetDelete ---------------------------------------------------------------


def _commit(broker: BrokerProcess, group: str, topic: str) -> None:
    c = consumer(broker.bootstrap, group_id=group)
    try:
        c.commit(offsets=[CTopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()


def test_group_deleted_while_empty_refused_while_active(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("groups")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x")], partition=0)
    empty = unique("empty")
    _commit(broker, empty, topic)
    admin.delete_consumer_groups([empty])[empty].result(15)
    with pytest.raises(KafkaException) as info:
        admin.delete_consumer_groups([empty])[empty].result(15)
    assert info.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND

    active = unique("active")
    c = consumer(broker.bootstrap, group_id=active, auto_offset_reset="earliest")
    try:
        c.subscribe([topic])
        poll_messages(c, 1)
        with pytest.raises(KafkaException) as info:
            admin.delete_consumer_groups([active])[active].result(15)
        assert info.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        # Once the member has left, the group is empty and may go.
        _wait_for(lambda: client.delete_groups([active]) == {active: "OK"})
        assert client.delete_groups([active]) == {active: "GroupIdNotFoundError"}
        busy = unique("busy")
        c = consumer(broker.bootstrap, group_id=busy, auto_offset_reset="earliest")
        try:
            c.subscribe([topic])
            poll_messages(c, 1)
            assert client.delete_groups([busy]) == {busy: NonEmptyGroupError.__name__}
        finally:
            c.close()
    finally:
        client.close()


def test_offset_delete(broker: BrokerProcess) -> None:
    topic = unique("offdel")
    create_topic(broker.bootstrap, topic)
    group = unique("g")
    _commit(broker, group, topic)
    with WireClient(broker.port) as client:
        body = request(
            ApiKey.OFFSET_DELETE, 0,
            {"group_id": group,
             "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
        )  # fmt: skip
        response = client.call(body)
        assert response.error_code == Errors.NONE
        assert response.topics[0].partitions[0].error_code == Errors.NONE
    c = consumer(broker.bootstrap, group_id=group)
    try:
        committed = c.committed([CTopicPartition(topic, 0)], timeout=10)
    finally:
        c.close()
    assert committed[0].offset < 0  # nothing committed any more


# -- DescribeCluster, DescribeLogDirs, ListOffsets v0 ---------------------------------------------


def test_describe_cluster_and_log_dirs(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    cluster = admin.describe_cluster().result(15)
    assert [n.id for n in cluster.nodes] == [0]
    assert cluster.controller.id == 0
    topic = unique("dirs")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        dirs = client.describe_log_dirs()
    finally:
        client.close()
    (entry,) = dirs
    (log_dir,) = entry["log_dirs"]
    assert log_dir["error_code"] == 0
    assert topic in {t["name"] for t in log_dir["topics"]}


def test_list_offsets_v0_is_answered(broker: BrokerProcess) -> None:
    topic = unique("v0")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x") for _ in range(3)], partition=0)
    with WireClient(broker.port) as client:
        for timestamp, expected in ((-1, [3, 0]), (-2, [0])):
            body = request(
                ApiKey.LIST_OFFSETS, 0,
                {"replica_id": -1,
                 "topics": [{"name": topic, "partitions": [
                     {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 5}]}]},
            )  # fmt: skip
            answer = client.call(body).topics[0].partitions[0]
            assert answer.error_code == Errors.NONE
            assert list(answer.old_style_offsets) == expected


# -- ElectLeaders, reassignments, AlterReplicaLogDirs, broker config sources --------------------


def test_standalone_elections_and_reassignments(broker: BrokerProcess) -> None:
    """A cluster of one: every leader is already the preferred one, and the only possible
    replica set is this broker."""
    topic = unique("standalone-admin")
    create_topic(broker.bootstrap, topic, partitions=2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = client.elect_leaders(0, {topic: [0, 1]})
        (result,) = response.replica_election_results
        assert sorted((p[0], p[1]) for p in result[1]) == [
            (0, Errors.ELECTION_NOT_NEEDED), (1, Errors.ELECTION_NOT_NEEDED),
        ]  # fmt: skip
        tp, other = KTopicPartition(topic, 0), KTopicPartition(topic, 1)
        answers = client.alter_partition_reassignments({tp: [0], other: [0, 7]})
        assert answers[tp] is None
        assert answers[other].errno == Errors.INVALID_REPLICA_ASSIGNMENT
        assert client.alter_partition_reassignments({tp: None})[tp].errno == (
            Errors.NO_REASSIGNMENT_IN_PROGRESS
        )
        assert client.list_partition_reassignments() == {}
    finally:
        client.close()


def test_alter_replica_log_dirs_and_broker_sources(broker: BrokerProcess) -> None:
    topic = unique("logdirs")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (described,) = client.describe_log_dirs()
        home = described["log_dirs"][0]["log_dir"]
        replica = KTopicPartitionReplica(topic, 0, described["broker"])
        missing = KTopicPartitionReplica(topic, 5, described["broker"])
        assert client.alter_replica_log_dirs({replica: home}) == {replica: KNoError}
        elsewhere = client.alter_replica_log_dirs({replica: "/nonexistent/dir"})
        assert elsewhere[replica].errno == Errors.LOG_DIR_NOT_FOUND
        assert client.alter_replica_log_dirs({missing: home})[missing].errno == (
            Errors.REPLICA_NOT_AVAILABLE
        )
        broker_id = described["broker"]
        configs = client.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, broker_id)], config_filter="all"
        )["broker"][str(broker_id)]
    finally:
        client.close()
    advertised = configs["advertised.listeners"]  # not in the test broker's file
    assert advertised["config_source"] == "DEFAULT_CONFIG"
    assert advertised["read_only"] is False and advertised["synonyms"] == []
    assert configs["broker.id"]["read_only"] is True
