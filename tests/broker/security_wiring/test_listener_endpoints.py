"""Per-listener metadata: a client is told the brokers' endpoints of the listener it connected
to (Kafka's behaviour), so a broker with a PLAINTEXT and an SSL listener — the usual split
of inter-broker and client traffic — sends TLS clients to TLS ports and plaintext clients to
plaintext ports, standalone and in a ZooKeeper cluster.

Checked with confluent-kafka: the brokers in Metadata, then a produce and a group consume
(FindCoordinator answers with the coordinator's endpoint too) entirely over TLS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from sluice.broker.cluster.zk_data import BrokerIdZNode
from sluice.testing.broker import BrokerProcess
from sluice.testing.certificates import Certificates
from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import free_port
from tests.broker.security_wiring.conftest import keystore

pytestmark = pytest.mark.broker


def tls_client(certs: Certificates) -> dict[str, Any]:
    return {"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)}


def two_listeners(plain: int, tls: int, certs: Certificates) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "inter.broker.listener.name": "PLAINTEXT",
        **keystore(certs),
    }


def advertised_ports(bootstrap: str, client: dict[str, Any]) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **client})
    return {b.id: b.port for b in admin.list_topics(timeout=15).brokers.values()}


def round_trip(bootstrap: str, client: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """Produce ``count`` values with acks=all, then read them back as a group member."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **client})
    for i in range(count):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
         **client}
    )  # fmt: skip
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        for _ in range(200):
            for m in consumer.consume(100, 0.3):
                if m.error() is None:
                    got.append(m.value())
            if len(got) >= count:
                break
        consumer.commit(asynchronous=False)  # through the coordinator FindCoordinator named
    finally:
        consumer.close()
    return got


def test_registration_lists_every_listener_as_kafka_does() -> None:
    endpoints = [("PLAINTEXT", "PLAINTEXT", "10.0.0.1", 9092), ("SSL", "SSL", "b1.example", 9093)]
    data = BrokerIdZNode.encode("10.0.0.1", 9092, endpoints=endpoints, timestamp_ms=1)
    doc = json.loads(data)
    assert doc["endpoints"] == ["PLAINTEXT://10.0.0.1:9092", "SSL://b1.example:9093"]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert (doc["host"], doc["port"]) == ("10.0.0.1", 9092)  # the PLAINTEXT listener's
    info = BrokerIdZNode.decode(1, data, "SSL")  # a broker whose inter-broker listener is SSL
    assert (info.host, info.port) == ("b1.example", 9093)
    assert info.endpoint("PLAINTEXT") == ("10.0.0.1", 9092)
    assert info.endpoint("SSL") == ("b1.example", 9093)
    assert info.endpoint("SASL_SSL") is None
    # Kafka writes host null and port -1 when no listener is PLAINTEXT.
    only_tls = BrokerIdZNode.encode("x", 1, endpoints=[("SSL", "SSL", "b2", 9093)])
    assert json.loads(only_tls)["host"] is None and json.loads(only_tls)["port"] == -1
    assert BrokerIdZNode.decode(2, only_tls).endpoint("SSL") == ("b2", 9093)


def test_standalone_clients_get_the_endpoints_of_their_listener(
    tmp_path: Path, certs: Certificates
) -> None:
    plain, tls = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "broker", two_listeners(plain, tls, certs), port=plain)
    broker.start()
    try:
        assert advertised_ports(f"127.0.0.1:{plain}", {}) == {0: plain}
        assert advertised_ports(f"127.0.0.1:{tls}", tls_client(certs)) == {0: tls}
        values = round_trip(f"127.0.0.1:{tls}", tls_client(certs), "over-tls", 20)
        assert sorted(values) == sorted(b"v%d" % i for i in range(20))
    finally:
        assert broker.stop() == 0, broker.output_tail()


@pytest.fixture
def split_cluster(
    tmp_path: Path, zk_connect: str, certs: Certificates
) -> Iterator[tuple[BrokerCluster, dict[int, int]]]:
    """Three brokers replicating over PLAINTEXT, serving clients on SSL as well."""
    cluster = BrokerCluster(tmp_path, zk_connect)
    tls_ports = {}
    for broker_id, broker in cluster.brokers.items():
        tls_ports[broker_id] = free_port()
        broker.overrides.update(two_listeners(broker.port, tls_ports[broker_id], certs))
    with cluster:
        yield cluster, tls_ports


def test_cluster_clients_on_tls_are_sent_to_tls_ports(
    split_cluster: tuple[BrokerCluster, dict[int, int]], certs: Certificates
) -> None:
    cluster, tls_ports = split_cluster
    tls_bootstrap = ",".join(f"127.0.0.1:{p}" for p in tls_ports.values())
    plain_ports = {i: b.port for i, b in cluster.brokers.items()}
    assert advertised_ports(cluster.bootstrap, {}) == plain_ports
    assert advertised_ports(tls_bootstrap, tls_client(certs)) == tls_ports
    cluster.create_topic("split", 3, 3)
    for p in range(3):
        cluster.wait_isr("split", p, {0, 1, 2})
    values = round_trip(tls_bootstrap, tls_client(certs), "split", 60)
    assert sorted(values) == sorted(b"v%d" % i for i in range(60))
