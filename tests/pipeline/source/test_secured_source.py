"""The Spark source reading from a SASL_SSL broker (issue 19 item 4) with real Spark: the
Java client's options (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.*``) are all a job needs, as with Spark's
own Kafka source; PLAIN (a JAAS user table) and SCRAM-SHA-512 (a credential in ZooKeeper)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from confluent_kafka import Producer
from kazoo.client import KazooClient

from sluice.broker.security.scram_credential import ScramMechanism, create_credential
from sluice.broker.security.scram_store import ZkScramStore
from sluice.pipeline.source.data_source import register
from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.cluster import QUIET, BrokerCluster
from tests.broker.cluster.secured import ALICE_PASSWORD, KEY_PASSWORD, secured_cluster

pytestmark = pytest.mark.broker

SPARK_PASSWORD = "spark-scram-pw-6650"
COUNT = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)


@pytest.fixture
def secured(
    tmp_path: Path, zk_connect: str, zk_client: KazooClient, certs: Certificates
) -> Iterator[BrokerCluster]:
    ZkScramStore(zk_client).set_credential(
        "spark", ScramMechanism.SCRAM_SHA_512,
        create_credential(ScramMechanism.SCRAM_SHA_512, SPARK_PASSWORD),
    )  # fmt: skip
    with secured_cluster(tmp_path, zk_connect, certs, size=1, mechanism="PLAIN") as cluster:
        yield cluster


def login_options(mechanism: str) -> dict[str, str]:
    if mechanism == "PLAIN":
        module, user, password = "plain.PlainLoginModule", "alice", ALICE_PASSWORD
    else:
        module, user, password = "scram.ScramLoginModule", "spark", SPARK_PASSWORD
    return {
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": (
            f"org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{password}";'
        ),
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_spark_reads_a_sasl_ssl_broker(
    spark: Any, secured: BrokerCluster, certs: Certificates, mechanism: str
) -> None:
    topic = f"secured-spark-{mechanism.lower()}"
    secured.create_topic(topic, 2, 1)
    producer = Producer(
        {"bootstrap.servers": secured.bootstrap, "acks": "all", **QUIET, **secured.client_config}
    )
    for i in range(COUNT):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    register(spark)
    options = {
        "kafka.bootstrap.servers": secured.bootstrap,
        "subscribe": topic,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(certs.ca),
        **login_options(mechanism),
    }
    values = spark.read.format("sluice").options(**options).load().select("value")
    want = spark.createDataFrame([(f"v{i}".encode(),) for i in range(COUNT)], "value binary")
    assert_df_equality(values, want, ignore_row_order=True)
    wrong = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace(
        'password="', 'password="x')}  # fmt: skip
    with pytest.raises(Exception, match="(?i)authenticat"):  # noqa: PT011  (Spark wraps it)
        spark.read.format("sluice").options(**wrong).load().collect()
