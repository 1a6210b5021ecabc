"""Tests for sluice.pipeline.source.kafka_params: the prefix cut, Spark's refusals, the Java
client's keys translated (``sluice.pipeline.kafka_settings``, tested there) and the consumer
group ids. No message may quote a secret."""

from __future__ import annotations

import logging

import pytest

from sluice.pipeline.kafka_settings import JaasTranslationError, JavaOnlyKafkaOptionError
from sluice.pipeline.source.isolation import InvalidIsolationLevelError
from sluice.pipeline.source.kafka_params import (
    SparkRefusedKafkaOptionError,
    group_ids,
    kafka_params,
)

SECRET = "s3cr3t-Pa55"
PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{SECRET}";'
)


def test_librdkafka_keys_pass_through_and_the_prefix_is_cut() -> None:
    assert kafka_params(
        {"kafka.bootstrap.servers": "h:1", "KAFKA.Security.Protocol": "SASL_SSL", "subscribe": "t"}
    ) == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}


def test_java_client_keys_are_translated_as_for_the_sink() -> None:
    assert kafka_params(
        {
            "kafka.sasl.jaas.config": PLAIN,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.isolation.level": "READ_UNCOMMITTED",
        }
    ) == {
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/ca.pem",
        "isolation.level": "read_uncommitted",
    }


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"kafka.sasl.jaas.config": f'x required password="{SECRET}"'},
            JaasTranslationError,
            "kafka.sasl.jaas.config",
        ),
        ({"kafka.max.poll.records": "5"}, JavaOnlyKafkaOptionError, "arrowBatchRows"),
        ({"kafka.isolation.level": "snapshot"}, InvalidIsolationLevelError, "read_committed"),
        ({"kafka.auto.offset.reset": "earliest"}, SparkRefusedKafkaOptionError, "startingOffsets"),
        ({"kafka.key.deserializer": "x"}, SparkRefusedKafkaOptionError, "DataFrame operations"),
        ({"kafka.value.deserializer": "x"}, SparkRefusedKafkaOptionError, "DataFrame operations"),
        ({"kafka.enable.auto.commit": "false"}, SparkRefusedKafkaOptionError, "'kafka.enable"),
        ({"kafka.interceptor.classes": "x"}, SparkRefusedKafkaOptionError, "interceptors"),
        ({"kafka.enable.partition.eof": "true"}, SparkRefusedKafkaOptionError, "split reader"),
    ],
)
def test_refusals_say_what_to_do_and_never_quote_a_secret(
    options: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        kafka_params(options)
    assert SECRET not in str(caught.value)


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
