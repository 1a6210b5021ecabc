"""DescribeCluster, DescribeLogDirs and AlterReplicaLogDirs against a standalone broker.

AlterReplicaLogDirs moves a partition's log between a standalone broker's two log dirs
(kafka-python's ``alter_replica_log_dirs`` and ``describe_log_dirs``): every message
produced before, during and after the move is consumed back, before and after a restart.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import Msg, consume, produce, unique

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartitionReplica as KTopicPartitionReplica
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.errors import NoError as KNoError


def placement(broker: BrokerProcess, topic: str) -> list[tuple[str, bool]]:
    """(log dir, is future) of every replica of ``topic``'s partition 0 the broker lists."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (described,) = client.describe_log_dirs()
    finally:
        client.close()
    found = []
    for log_dir in described["log_dirs"]:
        assert log_dir["error_code"] == 0
        for t in log_dir["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    if p["partition_index"] == 0:
                        found.append((log_dir["log_dir"], p["is_future_key"]))
    return sorted(found)


def alter(broker: BrokerProcess, topic: str, partition: int, path: str) -> Any:
    replica = KTopicPartitionReplica(topic, partition, 0)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return client.alter_replica_log_dirs({replica: path})[replica]
    finally:
        client.close()


def messages(tag: str, n: int) -> list[Msg]:
    return [Msg(b"k%d" % i, (b"%s-%d-" % (tag.encode(), i)).ljust(300, b".")) for i in range(n)]


def values(broker: BrokerProcess, topic: str, count: int) -> list[bytes | None]:
    return [m.value() for m in consume(broker.bootstrap, topic, {0: count})[0]]


def test_a_move_keeps_every_message_across_a_restart(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    dirs = [(tmp_path / "disk-a").resolve(), (tmp_path / "disk-b").resolve()]
    broker = start_broker(
        {"log.dirs": ",".join(map(str, dirs)), "log.segment.bytes": "16384"}, log_dir=dirs[0]
    )
    topic = unique("moving")
    create_topic(broker.bootstrap, topic)
    sent = messages("before", 400)
    produce(broker.bootstrap, topic, sent, partition=0, batch_num_messages=10)
    ((home, _),) = placement(broker, topic)
    dest = str(dirs[1] if home == str(dirs[0]) else dirs[0])

    assert alter(broker, topic, 0, "/nowhere").errno == Errors.LOG_DIR_NOT_FOUND
    assert alter(broker, topic, 7, dest).errno == Errors.REPLICA_NOT_AVAILABLE
    assert alter(broker, topic, 0, dest) == KNoError
    during = messages("during", 200)
    produce(
        broker.bootstrap, topic, during, partition=0, batch_num_messages=10
    )  # may overlap the copy
    sent += during
    deadline = time.monotonic() + 30
    while placement(broker, topic) != [(dest, False)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert placement(broker, topic) == [(dest, False)]
    assert not (Path(home) / f"{topic}-0").exists()
    assert alter(broker, topic, 0, dest) == KNoError  # already there: nothing to do
    after = messages("after", 100)
    produce(broker.bootstrap, topic, after, partition=0, batch_num_messages=10)
    sent += after
    assert values(broker, topic, len(sent)) == [m.value for m in sent]

    broker.restart()
    assert placement(broker, topic) == [(dest, False)]
    assert values(broker, topic, len(sent)) == [m.value for m in sent]
    assert sorted(p.name for p in Path(dest).iterdir() if p.name.startswith(topic)) == [
        f"{topic}-0"
    ]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


# -- DescribeCluster, DescribeLogDirs, ListOffsets v0 ---------------------------------------------


@pytest.mark.broker
# kafka-python reads its schemas with importlib.resources' deprecated API.
@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
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


@pytest.mark.broker
# kafka-python reads its schemas with importlib.resources' deprecated API.
@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
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
