"""A three-broker cluster whose one listener is SASL_SSL, inter-broker traffic included.

Every broker: ``listeners=SASL_SSL://127.0.0.1:<port>`` (also the inter-broker listener), the
test CA's server certificate as keystore and the CA as truststore, PLAIN and SCRAM-SHA-256/512
enabled; PLAIN's user table holds ``broker`` and ``alice``. The brokers log in to each other as
``broker`` with ``sasl.mechanism.inter.broker.protocol`` (SCRAM-SHA-512 by default: its
credential is written to ``/config/users/broker`` before the brokers start, as Kafka's
``kafka-configs --zookeeper`` does). Test clients log in as ``alice`` with PLAIN over TLS
(:func:`client_config`).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from sluice.broker.security.scram_credential import ScramMechanism, create_credential
from sluice.broker.security.scram_store import ZkScramStore
from sluice.testing.certificates import Certificates
from sluice.testing.cluster import BrokerCluster

LISTENER = "sasl_ssl"
BROKER_PASSWORD = "inter-broker-pw-4471"
ALICE_PASSWORD = "alice-secret-9930"
KEY_PASSWORD = "cluster-key-pw-1187"


def plain_jaas(password: str = BROKER_PASSWORD) -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="broker" password="{password}" user_broker="{BROKER_PASSWORD}" '
        f'user_alice="{ALICE_PASSWORD}";'
    )


def scram_jaas(password: str = BROKER_PASSWORD) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{password}";'
    )


def broker_settings(
    certs: Certificates, mechanism: str = "SCRAM-SHA-512", password: str = BROKER_PASSWORD
) -> dict[str, str]:
    """The server.properties lines of a broker of the secured cluster (``password``: the one
    it logs in to the other brokers with)."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.key.password": certs.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.{LISTENER}.plain.sasl.jaas.config": plain_jaas(password),
        f"listener.name.{LISTENER}.scram-sha-256.sasl.jaas.config": scram_jaas(password),
        f"listener.name.{LISTENER}.scram-sha-512.sasl.jaas.config": scram_jaas(password),
    }


def client_config(
    certs: Certificates, user: str = "alice", password: str = ALICE_PASSWORD,
    mechanism: str = "PLAIN",
) -> dict[str, Any]:  # fmt: skip
    """librdkafka's settings for a client of the secured cluster."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(certs.ca),
    }


def store_broker_credentials(zk: KazooClient) -> None:
    """The inter-broker user's SCRAM credentials, in ZooKeeper before any broker starts."""
    store = ZkScramStore(zk)
    for mechanism in ScramMechanism:
        store.set_credential("broker", mechanism, create_credential(mechanism, BROKER_PASSWORD))


def secured_cluster(
    base_dir: Path,
    zk_connect: str,
    certs: Certificates,
    *,
    size: int = 3,
    mechanism: str = "SCRAM-SHA-512",
    broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> BrokerCluster:
    """The (not yet started) cluster; see the module docstring."""
    return BrokerCluster(
        base_dir,
        zk_connect,
        size,
        overrides={**broker_settings(certs, mechanism), **(overrides or {})},
        protocol="SASL_SSL",
        probe_tls=certs_context(certs),
        client_config=client_config(certs),
        broker_overrides=broker_overrides,
    )


def certs_context(certs: Certificates) -> ssl.SSLContext:
    """A client TLS context trusting the test CA (the readiness probe's)."""
    return ssl.create_default_context(cafile=str(certs.ca))
