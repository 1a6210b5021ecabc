"""AlterReplicaLogDirs in a cluster: kafka-python sends each request to the broker hosting the
replica; a follower's replica and then the leader's move between their broker's two log dirs
while acks=all producers write, and every message is consumed back — also after the broker
whose replicas moved restarts.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.cluster import BrokerCluster
from tests.broker.server.clients import Msg, consume, produce, unique

with warnings.catch_warnings():  # kafka-python reads its schemas with importlib's legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartitionReplica as KTopicPartitionReplica
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NoError as KNoError

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def dirs_of(base: Path, broker_id: int) -> list[Path]:
    return [(base / f"broker-{broker_id}" / d).resolve() for d in ("disk-a", "disk-b")]


def home_of(client: Any, broker_id: int, topic: str) -> list[tuple[str, bool]]:
    (described,) = client.describe_log_dirs(brokers=[broker_id])
    return sorted(
        (d["log_dir"], p["is_future_key"])
        for d in described["log_dirs"]
        for t in d["topics"]
        if t["name"] == topic
        for p in t["partitions"]
    )


def test_replicas_move_on_the_broker_hosting_them(tmp_path: Path, zk_connect: str) -> None:
    per_broker = {
        i: {"log.dirs": ",".join(map(str, dirs_of(tmp_path, i))), "log.segment.bytes": "16384"}
        for i in range(2)
    }
    with BrokerCluster(tmp_path, zk_connect, size=2, broker_overrides=per_broker) as cluster:
        topic = unique("moving")
        cluster.create_topic(topic, 1, 2)
        leader_id = cluster.wait_leader(topic, 0).leader
        follower_id = 1 - leader_id
        sent: list[Msg] = []

        def write(tag: str, n: int) -> None:
            batch = [
                Msg(b"k%d" % i, (b"%s-%d-" % (tag.encode(), i)).ljust(300, b".")) for i in range(n)
            ]
            produce(cluster.bootstrap, topic, batch, partition=0, acks="all", batch_num_messages=10)
            sent.extend(batch)

        write("before", 300)
        client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            for broker_id in (follower_id, leader_id):
                ((home, _),) = home_of(client, broker_id, topic)
                dest = next(str(d) for d in dirs_of(tmp_path, broker_id) if str(d) != home)
                replica = KTopicPartitionReplica(topic, 0, broker_id)
                assert client.alter_replica_log_dirs({replica: dest}) == {replica: KNoError}
                write(f"during-{broker_id}", 150)
                deadline = time.monotonic() + 30
                while home_of(client, broker_id, topic) != [(dest, False)]:
                    assert time.monotonic() < deadline, home_of(client, broker_id, topic)
                    time.sleep(0.2)
                assert not (Path(home) / f"{topic}-0").exists()
                write(f"after-{broker_id}", 100)
        finally:
            client.close()
        got = consume(cluster.bootstrap, topic, {0: len(sent)})[0]
        assert [m.value() for m in got] == [m.value for m in sent]
        cluster.brokers[follower_id].stop()
        cluster.restart(follower_id)
        cluster.wait_registered({0, 1})
        cluster.wait_isr(topic, 0, {0, 1})
        cluster.brokers[leader_id].stop()  # the restarted follower's moved log serves now
        cluster.wait_leader(topic, 0, not_in=(leader_id,))
        got = consume(cluster.bootstrap, topic, {0: len(sent)}, timeout=40)[0]
        assert [m.value() for m in got] == [m.value for m in sent]
