"""Three real brokers talking to each other over SASL_SSL (issue 19 item 4): replication and
the transaction markers authenticate with SCRAM or PLAIN over TLS, and a broker whose
inter-broker password is wrong is kept out of the ISR with the reason in its log.

The cluster is ``tests.broker.cluster.secured``; clients are confluent-kafka over SASL_SSL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient

from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.cluster.secured import (
    BROKER_PASSWORD,
    KEY_PASSWORD,
    broker_settings,
    secured_cluster,
    store_broker_credentials,
)
from tests.broker.server import clients
from tests.broker.server.clients import ContinuousProducer, unique
from tests.broker.server.clients import read_partition as read_plain_partition

pytestmark = pytest.mark.broker

PARTITIONS = 3


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)


@pytest.fixture
def cluster(
    tmp_path: Path, zk_connect: str, zk_client: KazooClient, certs: Certificates
) -> Iterator[BrokerCluster]:
    store_broker_credentials(zk_client)
    with secured_cluster(tmp_path, zk_connect, certs) as c:
        yield c


def read_partition(cluster: BrokerCluster, topic: str, partition: int) -> list[bytes | None]:
    """Every committed message of the partition, read over SASL_SSL (see the plain twin)."""
    return read_plain_partition(cluster.bootstrap, topic, partition, **cluster.client_config)


@pytest.mark.slow
def test_leader_kill_under_sasl_ssl_loses_nothing(cluster: BrokerCluster) -> None:
    topic = unique("secured-failover")
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = ContinuousProducer(
        cluster.bootstrap, topic, interval=0.002, acks="all", **QUIET, **cluster.client_config
    ).start()
    try:
        producer.wait_acked(100)
        for _round in range(2):
            leader = cluster.wait_leader(topic, 0).leader
            cluster.kill(leader)
            moved = cluster.wait_leader(topic, 0, not_in={leader})
            assert leader not in moved.isrs
            producer.wait_acked(len(producer.acked) + 100)  # the new leader takes writes
            cluster.restart(leader)
            # The old leader logs in to the new one, truncates, catches up and rejoins.
            cluster.wait_isr(topic, 0, {0, 1, 2})
        producer.wait_acked(len(producer.acked) + 100)
    finally:
        producer.stop()
    producer.assert_exactly_once(read_partition(cluster, topic, 0))
    for i, broker in cluster.brokers.items():
        assert "authentication failed" not in broker.output_tail(10_000), f"broker {i}"


def test_transaction_markers_cross_the_secured_channel(cluster: BrokerCluster) -> None:
    topic = unique("secured-txn")
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    leaders = {cluster.wait_leader(topic, p).leader for p in range(PARTITIONS)}
    assert leaders == {0, 1, 2}, f"expected the partitions led by 3 brokers, found {leaders}"
    config: dict[str, Any] = {**QUIET, **cluster.client_config}
    producer = clients.txn_producer(cluster.bootstrap, unique("tx"), init_timeout=60, **config)
    committed = [f"c-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(3)]
    producer.begin_transaction()
    for value in committed:
        producer.produce(topic, value=value, partition=int(value.split(b"-")[1]))
    producer.commit_transaction(60)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, value=f"a-{p}".encode(), partition=p)
    assert producer.flush(30) == 0  # written, then aborted (abort alone would purge them)
    producer.abort_transaction(60)
    got = clients.read_values(
        cluster.bootstrap, topic, range(PARTITIONS), "read_committed", len(committed),
        timeout=45, **config,
    )  # fmt: skip
    assert sorted(got) == sorted(committed)
    # every partition got both markers: read_uncommitted sees the aborted values too, and
    # read_committed readers are not stuck behind an open transaction
    everything = clients.read_values(
        cluster.bootstrap, topic, range(PARTITIONS), "read_uncommitted",
        len(committed) + PARTITIONS, timeout=45, **config,
    )  # fmt: skip
    assert len(everything) == len(committed) + PARTITIONS


def test_wrong_inter_broker_password_keeps_the_follower_out(
    tmp_path: Path, zk_connect: str, zk_client: KazooClient, certs: Certificates
) -> None:
    wrong = "wrong-broker-pw-5512"
    store_broker_credentials(zk_client)
    cluster = secured_cluster(
        tmp_path, zk_connect, certs, mechanism="PLAIN",
        broker_overrides={2: broker_settings(certs, "PLAIN", password=wrong)},
    )  # fmt: skip
    with cluster:
        topic = unique("locked-out")
        cluster.admin(0).create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=15)
        leaders = {p: cluster.wait_leader(topic, p).leader for p in range(PARTITIONS)}
        followed = [p for p, leader in leaders.items() if leader != 2]
        assert followed, f"expected a partition broker 2 follows, found leaders {leaders}"
        for p in followed:  # 2 never catches up, so it leaves the ISR (or is never in it)
            cluster.wait_isr(topic, p, {0, 1})
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET,
             **cluster.client_config}
        )  # fmt: skip
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:  # bounded: 8 s of traffic, 2 never joins
            for p in followed:
                producer.produce(topic, b"x", partition=p)
            assert producer.flush(10) == 0
            for p in followed:
                assert 2 not in cluster.partition(topic, p, 0).isrs
            time.sleep(0.3)
        wait_until(
            lambda: "inter-broker authentication failed" in cluster.brokers[2].output_tail(10_000),
            10, "broker 2 to log why it cannot follow",
        )  # fmt: skip
        out = cluster.brokers[2].output_tail(10_000)
        assert "Invalid username or password" in out, out[-2000:]
        logs = "".join(b.output_tail(100_000) for b in cluster.brokers.values())
        assert wrong not in logs and BROKER_PASSWORD not in logs
