"""Tests for sluice.pipeline.sink.options: Spark's Kafka sink options, parsed."""

from __future__ import annotations

import pytest

from sluice.pipeline.sink.options import (
    MissingBootstrapServersError,
    SinkOptionError,
    SinkOptions,
    UnknownSinkOptionError,
    UnsupportedSerializerError,
    ValueSchemaOptionError,
    ValueSchemaOptions,
)
from sluice.pipeline.sink.wire_formats import ValueFormat

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_kafka_options_become_producer_settings_over_idempotent_defaults() -> None:
    options = SinkOptions.parse(
        {**BOOTSTRAP, "kafka.linger.ms": "20", "Topic": " t ", "kafka.client.id": "mine"}
    )
    assert options.topic == "t"
    assert options.producer["bootstrap.servers"] == "127.0.0.1:9092"
    assert options.producer["linger.ms"] == "20"
    assert options.producer["client.id"] == "mine"
    assert options.producer["enable.idempotence"] is True
    assert options.producer["acks"] == "all"
    assert options.typed is None
    assert options.flush_timeout_s == 330.0  # librdkafka's message.timeout.ms + 30 s


def test_a_kafka_option_can_turn_idempotence_off() -> None:
    options = SinkOptions.parse({**BOOTSTRAP, "kafka.enable.idempotence": "false"})
    assert options.producer["enable.idempotence"] == "false"


def test_flush_timeout_follows_message_timeout_or_its_option() -> None:
    assert (
        SinkOptions.parse({**BOOTSTRAP, "kafka.message.timeout.ms": "5000"}).flush_timeout_s == 35
    )
    assert SinkOptions.parse({**BOOTSTRAP, "flushTimeoutMs": "1500"}).flush_timeout_s == 1.5
    with pytest.raises(SinkOptionError, match="flushtimeoutms: expected a positive integer"):
        SinkOptions.parse({**BOOTSTRAP, "flushTimeoutMs": "soon"})


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(MissingBootstrapServersError, match="kafka.bootstrap.servers"):
        SinkOptions.parse({"topic": "t"})


@pytest.mark.parametrize("setting", ["key.serializer", "value.serializer"])
def test_serializers_are_refused_as_spark_does(setting: str) -> None:
    with pytest.raises(UnsupportedSerializerError, match=f"kafka.{setting}: expected no"):
        SinkOptions.parse({**BOOTSTRAP, f"kafka.{setting}": "org.Foo"})


def test_unknown_options_name_the_nearest_known_one() -> None:
    with pytest.raises(UnknownSinkOptionError, match="'topics'.*did you mean 'topic'"):
        SinkOptions.parse({**BOOTSTRAP, "topics": "t"})
    with pytest.raises(UnknownSinkOptionError, match="did you mean 'valueFormat'"):
        SinkOptions.parse({**BOOTSTRAP, "valueformats": "avro"})


def test_spark_own_options_are_accepted() -> None:
    SinkOptions.parse({**BOOTSTRAP, "checkpointLocation": "/tmp/c", "path": "x"})


def test_avro_subject_defaults_to_topic_value_and_version_latest() -> None:
    options = SinkOptions.parse(
        {**BOOTSTRAP, "topic": "views", "valueFormat": "AVRO", "schema.registry.url": "http://r"}
    )
    assert options.typed == ValueSchemaOptions("http://r", "views-value", None, "latest", None)


def test_avro_schema_file_id_and_version() -> None:
    base = {**BOOTSTRAP, "valueFormat": "avro", "schema.registry.url": "http://r"}
    with_file = SinkOptions.parse({**base, "topic": "t", "valueSchema": "/s.avsc"})
    assert with_file.typed is not None and with_file.typed.schema_path == "/s.avsc"
    by_id = SinkOptions.parse({**base, "valueSchemaId": "7"})  # no subject needed
    assert by_id.typed == ValueSchemaOptions("http://r", None, None, "latest", 7)
    pinned = SinkOptions.parse({**base, "valueSchemaSubject": "s", "valueSchemaVersion": "3"})
    assert pinned.typed == ValueSchemaOptions("http://r", "s", None, "3", None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "schema.registry.url: expected the registry's URL"),
        ({"schema.registry.url": "http://r"}, "valueSchemaSubject: expected a subject"),
        (
            {"schema.registry.url": "http://r", "topic": "t", "valueSchemaId": "1",
             "valueSchema": "/s.avsc"},
            "expected at most one of valueSchema, valueSchemaId and valueSchemaVersion",
        ),
        (
            {"schema.registry.url": "http://r", "topic": "t", "valueSchemaVersion": "new"},
            "valueSchemaVersion: expected latest or a number, found 'new'",
        ),
    ],
)  # fmt: skip
def test_bad_avro_options(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ValueSchemaOptionError, match=message):
        SinkOptions.parse({**BOOTSTRAP, "valueFormat": "avro", **extra})


def test_registry_options_need_value_format_avro() -> None:
    with pytest.raises(ValueSchemaOptionError, match="expected only with valueFormat=avro"):
        SinkOptions.parse({**BOOTSTRAP, "schema.registry.url": "http://r"})
    with pytest.raises(
        ValueSchemaOptionError, match="expected binary, avro, json-schema, protobuf, found 'json'"
    ):
        SinkOptions.parse({**BOOTSTRAP, "valueFormat": "json"})
    with pytest.raises(ValueSchemaOptionError, match="valueSchemaMessage: expected only with"):
        SinkOptions.parse(
            {**BOOTSTRAP, "valueFormat": "avro", "schema.registry.url": "r", "topic": "t",
             "valueSchemaMessage": "a.B"}
        )  # fmt: skip


def test_json_schema_and_protobuf_options() -> None:
    base = {**BOOTSTRAP, "schema.registry.url": "http://r", "topic": "views"}
    json_schema = SinkOptions.parse({**base, "valueFormat": "JSON-Schema"}).typed
    assert json_schema == ValueSchemaOptions(
        "http://r", "views-value", value_format=ValueFormat.JSON_SCHEMA
    )
    protobuf = SinkOptions.parse(
        {**base, "valueFormat": "protobuf", "valueSchemaMessage": "sluice.Order"}
    ).typed
    assert protobuf == ValueSchemaOptions(
        "http://r", "views-value", value_format=ValueFormat.PROTOBUF, message="sluice.Order"
    )


def test_a_jaas_line_copied_from_a_spark_job_becomes_librdkafkas_credentials() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="writer" password="s3cret";'
    )
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": jaas,
            "topic": "t",
        }
    )
    assert options.producer["sasl.username"] == "writer"
    assert options.producer["sasl.password"] == "s3cret"
    assert "sasl.jaas.config" not in options.producer
