"""Tests for sluice.pipeline.source.kafka_params: Spark's refusals, Java-only keys translated
or refused, and the consumer group ids. No message may quote a secret."""

from __future__ import annotations

import logging

import pytest

from sluice.pipeline.source.kafka_params import (
    JaasTranslationError,
    JavaOnlyKafkaOptionError,
    SparkRefusedKafkaOptionError,
    group_ids,
    kafka_params,
)

SECRET = "s3cr3t-Pa55"
PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{SECRET}";'
)
SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="bob" password="{SECRET}";'
)


def test_librdkafka_keys_pass_through_and_the_prefix_is_cut() -> None:
    assert kafka_params(
        {"kafka.bootstrap.servers": "h:1", "KAFKA.Security.Protocol": "SASL_SSL", "subscribe": "t"}
    ) == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}


def test_a_plain_jaas_line_becomes_username_and_password() -> None:
    params = kafka_params({"kafka.sasl.jaas.config": PLAIN, "kafka.sasl.mechanism": "PLAIN"})
    assert params == {"sasl.username": "alice", "sasl.password": SECRET, "sasl.mechanism": "PLAIN"}
    # PlainLoginModule implies PLAIN when no mechanism is given.
    assert kafka_params({"kafka.sasl.jaas.config": PLAIN})["sasl.mechanism"] == "PLAIN"


def test_a_scram_jaas_line_takes_its_mechanism_from_sasl_mechanism() -> None:
    params = kafka_params(
        {"kafka.sasl.jaas.config": SCRAM, "kafka.sasl.mechanism": "SCRAM-SHA-512"}
    )
    assert params == {
        "sasl.username": "bob",
        "sasl.password": SECRET,
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    with pytest.raises(JaasTranslationError, match="SCRAM-SHA-256 or SCRAM-SHA-512.*found none"):
        kafka_params({"kafka.sasl.jaas.config": SCRAM})


def test_kerberos_keytab_is_translated() -> None:
    line = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/etc/k.keytab" principal="spark@EXAMPLE.COM";'
    )
    assert kafka_params({"kafka.sasl.jaas.config": line}) == {
        "sasl.kerberos.keytab": "/etc/k.keytab",
        "sasl.kerberos.principal": "spark@EXAMPLE.COM",
        "sasl.mechanism": "GSSAPI",
    }


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"kafka.sasl.jaas.config": PLAIN.replace("PlainLoginModule", "Nope")},
            JaasTranslationError,
            "expected PlainLoginModule, ScramLoginModule or Krb5LoginModule",
        ),
        (
            {"kafka.sasl.jaas.config": f'x required password="{SECRET}"'},
            JaasTranslationError,
            "kafka.sasl.jaas.config",
        ),
        (
            {"kafka.sasl.jaas.config": PLAIN, "kafka.sasl.password": SECRET},
            JaasTranslationError,
            "expected one of them, found both",
        ),
        (
            {"kafka.ssl.truststore.location": "/t.jks", "kafka.ssl.truststore.password": SECRET},
            JavaOnlyKafkaOptionError,
            "no JKS truststore; convert it to PEM .* set kafka.ssl.ca.location",
        ),
        (
            {"kafka.ssl.keystore.location": "/k.jks", "kafka.ssl.keystore.type": "JKS"},
            JavaOnlyKafkaOptionError,
            "no JKS keystore; convert it to PKCS#12",
        ),
        ({"kafka.ssl.protocol": "TLSv1.3"}, JavaOnlyKafkaOptionError, "negotiates the TLS"),
        ({"kafka.max.poll.records": "5"}, JavaOnlyKafkaOptionError, "arrowBatchRows"),
        ({"kafka.auto.offset.reset": "earliest"}, SparkRefusedKafkaOptionError, "startingOffsets"),
        ({"kafka.key.deserializer": "x"}, SparkRefusedKafkaOptionError, "DataFrame operations"),
        ({"kafka.value.deserializer": "x"}, SparkRefusedKafkaOptionError, "DataFrame operations"),
        ({"kafka.enable.auto.commit": "false"}, SparkRefusedKafkaOptionError, "'kafka.enable"),
        ({"kafka.interceptor.classes": "x"}, SparkRefusedKafkaOptionError, "interceptors"),
    ],
)
def test_refusals_say_what_to_do_and_never_quote_a_secret(
    options: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        kafka_params(options)
    assert SECRET not in str(caught.value)


def test_pem_stores_and_renamed_keys() -> None:
    assert kafka_params(
        {
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.location": "/me.p12",
            "kafka.ssl.keystore.password": SECRET,
            "kafka.ssl.endpoint.identification.algorithm": "",
            "kafka.fetch.max.wait.ms": "100",
            "kafka.receive.buffer.bytes": "65536",
            "kafka.partition.assignment.strategy": (
                "org.apache.kafka.clients.consumer.RangeAssignor"
            ),
        }
    ) == {
        "ssl.ca.location": "/ca.pem",
        "ssl.keystore.location": "/me.p12",
        "ssl.keystore.password": SECRET,
        "ssl.endpoint.identification.algorithm": "none",
        "fetch.wait.max.ms": "100",
        "socket.receive.buffer.bytes": "65536",
        "partition.assignment.strategy": "range",
    }
    assert kafka_params(
        {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.certificates": "-----B"}
    ) == {"ssl.ca.pem": "-----B"}


def test_group_ids_as_spark_makes_them(caplog: pytest.LogCaptureFixture) -> None:
    batch = group_ids({}, None, streaming=False)
    assert batch.driver.startswith("spark-kafka-relation-") and batch.driver.endswith("-driver")
    assert batch.executor == batch.driver[: -len("driver")] + "executor"
    assert group_ids({}, None, streaming=False) != batch  # a new uuid per query
    assert group_ids({}, None, streaming=True).executor.startswith("spark-kafka-source-")
    assert group_ids({}, "etl", streaming=True).driver.startswith("etl-")
    with caplog.at_level(logging.WARNING, logger="sluice.source"):
        given = group_ids({"kafka.group.id": "mine"}, "etl", streaming=True)
    assert (given.driver, given.executor) == ("mine", "mine")
    assert "groupIdPrefix is ignored" in caplog.text
