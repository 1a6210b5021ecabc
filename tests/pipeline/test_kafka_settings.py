"""Tests for sluice.pipeline.kafka_settings: a Java client's keys translated for librdkafka or
refused saying what to use, for the source's consumers and the sink's producers alike. No
message may quote a secret."""

from __future__ import annotations

import pytest

from sluice.pipeline.kafka_settings import (
    JaasTranslationError,
    JavaOnlyKafkaOptionError,
    translate_java_settings,
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


def test_librdkafka_keys_pass_through() -> None:
    settings = {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "linger.ms": "5"}
    assert translate_java_settings(settings) == settings


def test_a_plain_jaas_line_becomes_username_and_password() -> None:
    params = translate_java_settings({"sasl.jaas.config": PLAIN, "sasl.mechanism": "PLAIN"})
    assert params == {"sasl.username": "alice", "sasl.password": SECRET, "sasl.mechanism": "PLAIN"}
    # PlainLoginModule implies PLAIN when no mechanism is given.
    assert translate_java_settings({"sasl.jaas.config": PLAIN})["sasl.mechanism"] == "PLAIN"


def test_a_scram_jaas_line_takes_its_mechanism_from_sasl_mechanism() -> None:
    params = translate_java_settings({"sasl.jaas.config": SCRAM, "sasl.mechanism": "SCRAM-SHA-512"})
    assert params == {
        "sasl.username": "bob",
        "sasl.password": SECRET,
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    with pytest.raises(JaasTranslationError, match="SCRAM-SHA-256 or SCRAM-SHA-512.*found none"):
        translate_java_settings({"sasl.jaas.config": SCRAM})


def test_kerberos_keytab_is_translated() -> None:
    line = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/etc/k.keytab" principal="spark@EXAMPLE.COM";'
    )
    assert translate_java_settings({"sasl.jaas.config": line}) == {
        "sasl.kerberos.keytab": "/etc/k.keytab",
        "sasl.kerberos.principal": "spark@EXAMPLE.COM",
        "sasl.mechanism": "GSSAPI",
    }


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        (
            {"sasl.jaas.config": PLAIN.replace("PlainLoginModule", "Nope")},
            JaasTranslationError,
            "expected PlainLoginModule, ScramLoginModule or Krb5LoginModule",
        ),
        (
            {"sasl.jaas.config": f'x required password="{SECRET}"'},
            JaasTranslationError,
            "kafka.sasl.jaas.config",
        ),
        (
            {"sasl.jaas.config": PLAIN, "sasl.password": SECRET},
            JaasTranslationError,
            "expected one of them, found both",
        ),
        (
            {"ssl.truststore.location": "/t.jks", "ssl.truststore.password": SECRET},
            JavaOnlyKafkaOptionError,
            "no JKS truststore; convert it to PEM .* set kafka.ssl.ca.location",
        ),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
             "ssl.truststore.password": SECRET},
            JavaOnlyKafkaOptionError,
            "a PEM truststore takes no password",
        ),
        (
            {"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"},
            JavaOnlyKafkaOptionError,
            "no JKS keystore; convert it to PKCS#12",
        ),
        ({"ssl.protocol": "TLSv1.3"}, JavaOnlyKafkaOptionError, "negotiates the TLS"),
        ({"max.poll.records": "5"}, JavaOnlyKafkaOptionError, "arrowBatchRows"),
        ({"sasl.login.retry.backoff.ms": "5"}, JavaOnlyKafkaOptionError, "login refresh"),
    ],
)  # fmt: skip
def test_refusals_say_what_to_do_and_never_quote_a_secret(
    settings: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        translate_java_settings(settings)
    assert SECRET not in str(caught.value)


def test_pem_stores_and_renamed_keys() -> None:
    assert translate_java_settings(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/me.p12",
            "ssl.keystore.password": SECRET,
            "ssl.endpoint.identification.algorithm": "",
            "fetch.max.wait.ms": "100",
            "receive.buffer.bytes": "65536",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
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
    assert translate_java_settings(
        {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----B"}
    ) == {"ssl.ca.pem": "-----B"}
