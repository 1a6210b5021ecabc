"""The nightly load's configuration refuses keys nothing reads, naming the nearest known one
(``failOnDataLos=false`` was once accepted silently and the load published past lost data)."""

from __future__ import annotations

import pytest

from sluice.pipeline.load.run import LoadConfig, LoadConfigError

BASE = {
    "kafka.bootstrap.servers": "127.0.0.1:9092",
    "topics": "page_views",
    "warehouse.path": "/tmp/warehouse",
}


def test_a_misspelt_key_is_refused_with_the_nearest_one() -> None:
    with pytest.raises(LoadConfigError, match=r"failOnDataLos: .*did you mean 'failOnDataLoss'\?"):
        LoadConfig.from_properties({**BASE, "failOnDataLos": "false"})


def test_kafka_and_spark_keys_pass_through() -> None:
    config = LoadConfig.from_properties(
        {**BASE, "kafka.isolation.level": "read_committed", "spark.executor.memory": "1g"}
    )
    assert config.kafka == {"isolation.level": "read_committed"}  # librdkafka's: prefix cut
    assert config.spark == {"spark.executor.memory": "1g"}


# -- kafka.* keys as the source takes them (sluice.pipeline.kafka_settings) --------------------

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="loader" password="s3cret-pw";'
)


def test_a_jaas_line_is_translated_for_every_consumer_of_the_load() -> None:
    config = LoadConfig.from_properties(
        {
            **BASE,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
        }
    )
    assert config.kafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "loader",
        "sasl.password": "s3cret-pw",
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    # The planner's metadata consumer and the split writers' consumers get this one object.
    consumer = config.consumer("run-1")
    assert consumer["group.id"] == "sluice-load-run-1"  # one group id per run
    assert (consumer["sasl.username"], consumer["sasl.password"]) == ("loader", "s3cret-pw")
    assert consumer["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert not {"sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location"} & set(
        consumer
    )


def test_a_java_only_key_is_refused_as_a_config_error_with_the_alternative() -> None:
    with pytest.raises(LoadConfigError, match=r"kafka.ssl.truststore.location.*kafka.ssl.ca.loc"):
        LoadConfig.from_properties(
            {**BASE, "kafka.ssl.truststore.location": "/etc/kafka/truststore.jks"}
        )
    no_flag = JAAS.replace(" required", "")  # a JAAS line needs its control flag
    with pytest.raises(
        LoadConfigError, match=r"kafka.sasl.jaas.config': expected a control flag"
    ) as caught:
        LoadConfig.from_properties({**BASE, "kafka.sasl.jaas.config": no_flag})
    assert "s3cret" not in str(caught.value)  # no message quotes a secret


def test_java_names_renamed_and_librdkafka_keys_unchanged() -> None:
    config = LoadConfig.from_properties(
        {**BASE, "kafka.fetch.max.wait.ms": "250", "kafka.socket.timeout.ms": "9000"}
    )
    assert config.kafka == {"fetch.wait.max.ms": "250", "socket.timeout.ms": "9000"}


def test_every_consumer_of_a_run_shares_one_group_id_unless_one_is_given() -> None:
    config = LoadConfig.from_properties(BASE)
    assert config.consumer("r1")["group.id"] == "sluice-load-r1"
    assert config.consumer("r1")["bootstrap.servers"] == "127.0.0.1:9092"
    given = LoadConfig.from_properties({**BASE, "kafka.group.id": "nightly"})
    assert given.consumer("r1")["group.id"] == "nightly"
