"""``ZkScramStore`` against a real ZooKeeper shared by three brokers: a SCRAM credential set
with AlterUserScramCredentials through one broker lets a client log in at another, and the
znode is Kafka's ``/config/users/<user>`` payload (``{"version":1,"config":{"SCRAM-SHA-256":
"salt=…,stored_key=…,server_key=…,iterations=…"}}``), which Kafka's own brokers read."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.cluster import QUIET, BrokerCluster
from tests.broker.cluster.secured import (
    KEY_PASSWORD,
    client_config,
    secured_cluster,
    store_broker_credentials,
)

pytestmark = pytest.mark.broker

CAROL_PASSWORD = "carol-secret-7781"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)


@pytest.fixture
def cluster(
    tmp_path: Path, zk_connect: str, zk_client: KazooClient, certs: Certificates
) -> Iterator[BrokerCluster]:
    store_broker_credentials(zk_client)
    with secured_cluster(tmp_path, zk_connect, certs, mechanism="SCRAM-SHA-256") as c:
        yield c


def login_at(cluster: BrokerCluster, broker: int, certs: Certificates, password: str) -> bool:
    """Whether carol logs in with SCRAM-SHA-256 at ``broker`` alone (a Metadata answer)."""
    admin = AdminClient(
        {"bootstrap.servers": cluster.brokers[broker].bootstrap, **QUIET,
         **client_config(certs, "carol", password, "SCRAM-SHA-256")}
    )  # fmt: skip
    try:
        admin.list_topics(timeout=8)
    except KafkaException:
        return False
    return True


def test_credentials_set_through_one_broker_work_at_another(
    cluster: BrokerCluster, certs: Certificates, zk_client: KazooClient
) -> None:
    assert not login_at(cluster, 1, certs, CAROL_PASSWORD)  # no such user yet
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), CAROL_PASSWORD.encode()
    )
    futures = cluster.admin(0).alter_user_scram_credentials([upsert])
    futures["carol"].result(timeout=15)

    assert login_at(cluster, 1, certs, CAROL_PASSWORD)
    assert login_at(cluster, 2, certs, CAROL_PASSWORD)
    assert not login_at(cluster, 2, certs, "not-carols-password")

    data, _stat = zk_client.get("/config/users/carol")
    payload = json.loads(data)
    assert set(payload) == {"version", "config"} and payload["version"] == 1
    assert set(payload["config"]) == {"SCRAM-SHA-256"}
    fields = dict(item.split("=", 1) for item in payload["config"]["SCRAM-SHA-256"].split(","))
    assert list(fields) == ["salt", "stored_key", "server_key", "iterations"]
    assert fields["iterations"] == "8192"
    assert len(base64.b64decode(fields["stored_key"])) == 32  # SHA-256
    assert len(base64.b64decode(fields["server_key"])) == 32
    assert CAROL_PASSWORD.encode() not in data
