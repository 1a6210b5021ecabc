"""Tests for sluice.pipeline.load.config: the nightly load's keys, declared once.

The configuration refuses keys nothing reads, naming the nearest known one
(``failOnDataLos=false`` was once accepted silently and the load published past lost data);
every key of ``conf/nightly_load.properties`` is declared, and a bad value is refused naming
the key, what was expected and what was found."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.common.properties import load_properties
from sluice.pipeline.load.config import CONFIG_DEF, LoadConfig, LoadConfigError

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


# -- the declaration ----------------------------------------------------------------------------

CONF = Path(__file__).resolve().parents[3] / "conf" / "nightly_load.properties"


def test_the_keys_are_declared_once_with_their_defaults() -> None:
    assert CONFIG_DEF.names() == {
        "kafka.bootstrap.servers", "topics", "warehouse.path", "table", "reports.path", "run.id",
        "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "spark.master",
        "valueFormat", "schema.registry.url", "valueSchemaSubject", "valueSchemaVersion",
        "valueSchemaId", "valueSchemaMessage", "valueColumns", "onDecodeError", "stallTimeoutMs",
        "kafkaConsumer.pollTimeoutMs", "allowMissingTopics", "subscribePattern",
        "startingOffsets", "startingTimestamp", "rowsPerTask", "table.format",
    }  # fmt: skip
    assert CONFIG_DEF.prefixes == ("kafka.", "spark.", "iceberg.")
    config = LoadConfig.from_properties(BASE)
    assert (config.table, config.fail_on_data_loss, config.value_format) == (
        "events",
        True,
        "binary",
    )
    assert (config.min_partitions, config.max_records_per_partition, config.run_id) == (
        None,
        None,
        None,
    )
    assert config.reports_uri == "file:///tmp/warehouse/_reports"
    assert (config.stall_timeout_ms, config.poll_timeout_ms, config.allow_missing_topics) == (
        300_000,
        120_000,
        False,
    )
    assert config.split_timeout_s == 120.0
    table = CONFIG_DEF.to_markdown()
    for name in CONFIG_DEF.names():
        assert f"| `{name}` |" in table
    assert "| `kafka.<key>` |" in table and "| `spark.<key>` |" in table
    assert "| `iceberg.<key>` |" in table
    assert config.iceberg is None


def test_every_key_of_the_shipped_file_is_declared_and_it_parses() -> None:
    """The file's keys, set and commented out (``# key=value``), are all known."""
    written = re.findall(r"^#? ?([A-Za-z][\w.]*)=\S*$", CONF.read_text(), re.MULTILINE)
    assert len(written) > 15
    for key in written:
        assert key in CONFIG_DEF.names() or key.startswith(CONFIG_DEF.prefixes), key
    config = LoadConfig.from_properties(load_properties(CONF))
    assert (config.topics, config.min_partitions) == (("page_views",), 2)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("topics", "", "topics: expected a value, found none"),
        ("topics", " , ,", "topics: expected a comma list, found ', ,'"),
        ("table", "a/b", "table: expected a plain directory name, found 'a/b'"),
        ("table", "_x", "table: expected a plain directory name, found '_x'"),
        ("table", "  ", "table: expected a plain directory name, found ''"),
        (
            "valueFormat",
            "Parquet",
            "valueFormat: expected binary, avro, json-schema, protobuf, found 'parquet'",
        ),
        ("valueColumns", "struct", "valueColumns: expected only with valueFormat=avro"),
        ("valueFormat", "avro", "schema.registry.url: expected a value, found none"),
        ("warehouse.path", "s3a://b/w", "warehouse.path: s3a://b/w: expected a filesystem"),
        ("table.format", "delta", "table.format: expected parquet or iceberg, found 'delta'"),
        (
            "iceberg.catalog.uri",
            "sqlite:///x.db",
            "iceberg.catalog.uri: expected only with table.format=iceberg, found table.format=parq",
        ),
        ("kafka.bootstrap.servers", " ", "kafka.bootstrap.servers: expected a value, found none"),
        ("failOnDataLoss", "maybe", "failOnDataLoss: expected true or false, found 'maybe'"),
        ("minPartitions", "0", "minPartitions: expected a positive integer, found '0'"),
    ],
)
def test_a_bad_value_names_the_key_the_expectation_and_the_value(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(LoadConfigError) as caught:
        LoadConfig.from_properties({**BASE, key: value})
    assert str(caught.value).startswith(message)


def test_a_blank_key_takes_its_default() -> None:
    config = LoadConfig.from_properties({**BASE, "table": "", "failOnDataLoss": " "})
    assert (config.table, config.fail_on_data_loss) == ("events", True)


def test_table_format_iceberg_parses_the_iceberg_keys_and_allows_an_object_store() -> None:
    config = LoadConfig.from_properties(
        {
            **BASE,
            "table.format": "iceberg",
            "iceberg.tables.default-partition-by": "day(event_time)",
        }
    )
    assert config.iceberg is not None
    assert (
        config.iceberg.catalog_properties["uri"] == "sqlite:////tmp/warehouse/_iceberg_catalog.db"
    )
    assert str(config.iceberg.default_partition_by.terms[0].field) == "event_time"
    on_s3 = LoadConfig.from_properties(
        {**BASE, "table.format": "iceberg", "warehouse.path": "s3://bucket/wh",
         "iceberg.catalog.uri": "postgresql+psycopg2://u:p@db/cat"}
    )  # fmt: skip
    assert on_s3.iceberg is not None and on_s3.warehouse == "s3://bucket/wh"
    with pytest.raises(LoadConfigError, match="iceberg.catalog.uri: expected a value when the"):
        LoadConfig.from_properties(
            {**BASE, "table.format": "iceberg", "warehouse.path": "s3://b/w"}
        )
    with pytest.raises(LoadConfigError, match="iceberg.tables.default-partition-by"):
        LoadConfig.from_properties(
            {**BASE, "table.format": "iceberg", "iceberg.tables.default-partition-by": "week(x)"}
        )


def test_a_parquet_load_starts_without_importing_pyiceberg() -> None:
    """The load's modules and a Parquet configuration parse in a fresh interpreter without
    pyiceberg (about half a second at every ``sluice load``); only Iceberg loads import it."""
    script = f"""
import sys
from sluice.pipeline.load.run import LoadConfig
LoadConfig.from_properties({BASE!r})
print(sorted(m for m in sys.modules if m.split(".")[0] == "pyiceberg"))
from sluice.pipeline.table.partition_spec import PartitionBy
PartitionBy.parse("day(timestamp)").terms[0].iceberg_transform()
print("pyiceberg.transforms" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()  # fmt: skip
    assert out[0] == "[]", f"expected no pyiceberg module after a Parquet config, found {out[0]}"
    assert out[1] == "True", "expected the Iceberg path to import pyiceberg when it is used"
