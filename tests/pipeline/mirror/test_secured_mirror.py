"""The mirror between two secured clusters (issue 19 item 4): its source consumer and its
target producer and admin log in over SASL_SSL with the ``<alias>.*`` / ``target.*``
librdkafka keys, and every record comes across with its lineage."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.pipeline.lineage import LINEAGE_HEADER
from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.mirror import Mirror
from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import make_chroots
from tests.broker.cluster.secured import (
    KEY_PASSWORD,
    client_config,
    secured_cluster,
)
from tests.pipeline.mirror_fixture import CLUSTER_SETTINGS, mirror_properties

pytestmark = pytest.mark.broker

ONE_BROKER = {**CLUSTER_SETTINGS, "default.replication.factor": "1"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)


@pytest.fixture
def secured_pair(
    tmp_path: Path, zk_connect: str, certs: Certificates
) -> Iterator[tuple[BrokerCluster, BrokerCluster]]:
    """One-broker live and offline clusters, both SASL_SSL only (PLAIN between brokers)."""
    live_zk, offline_zk = make_chroots(zk_connect, "live", "offline")
    live = secured_cluster(tmp_path / "live", live_zk, certs, size=1, mechanism="PLAIN",
                           overrides=ONE_BROKER)  # fmt: skip
    offline = secured_cluster(tmp_path / "offline", offline_zk, certs, size=1,
                              mechanism="PLAIN", overrides=ONE_BROKER)  # fmt: skip
    try:
        live.start()
        offline.start()
        yield live, offline
    finally:
        live.stop()
        offline.stop()


def read_topic(bootstrap: str, topic: str, config: dict[str, Any], count: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
         "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET, **config}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: list[Any] = []
    try:
        for _ in range(150):  # bounded: 30 s
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


def test_mirror_copies_between_sasl_ssl_clusters(
    secured_pair: tuple[BrokerCluster, BrokerCluster], certs: Certificates
) -> None:
    live, offline = secured_pair
    topic = f"secured-{uuid.uuid4().hex[:6]}"
    live.create_topic(topic, 2, 1)
    config = client_config(certs)
    producer = Producer({"bootstrap.servers": live.bootstrap, "acks": "all", **QUIET, **config})
    for i in range(40):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    security = {
        f"{side}.{key}": str(value) for side in ("live", "target") for key, value in config.items()
    }
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, topic, uuid.uuid4().hex, **security
    )
    mirror = Mirror(MirrorConfig.from_properties(props)).start()
    try:

        def copied() -> list[Any] | None:
            got = read_topic(offline.bootstrap, topic, config, 40)
            return got if len(got) >= 40 else None

        copies = wait_until(copied, 90, f"40 records of {topic} on the offline cluster")
    finally:
        mirror.stop()
        assert mirror.wait(60) == 0, f"the mirror failed: {mirror.errors}"
    assert sorted(m.value() for m in copies) == sorted(f"v{i}".encode() for i in range(40))
    for m in copies:
        headers = dict(m.headers() or [])
        assert headers[LINEAGE_HEADER].startswith(f"live/{topic}/".encode())
    # the offline cluster refuses a client without credentials: the copy went through SASL
    anonymous = Consumer(
        {"bootstrap.servers": offline.bootstrap, "group.id": "x", **QUIET,
         "security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    )  # fmt: skip
    try:
        with pytest.raises(Exception):  # noqa: B017,PT011  (librdkafka: a transport error)
            anonymous.list_topics(topic, timeout=3)
    finally:
        anonymous.close()
