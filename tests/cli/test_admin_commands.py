"""The admin verbs after Kafka's tools: configs, topics alter, groups delete, get-offsets,
delete-records — run as a user runs them (``python -m sluice``) against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.cli.admin_commands import parse_config_list
from sluice.cli.errors import CommandUsageError
from sluice.testing.broker import BrokerProcess, create_topic

pytestmark = pytest.mark.broker


def sluice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("admin-broker")) as process:  # started
        yield process


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def test_config_lists_in_kafkas_syntax() -> None:
    assert parse_config_list("retention.ms=1000, cleanup.policy=[compact,delete]") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    with pytest.raises(CommandUsageError, match="open bracket"):
        parse_config_list("a=[b,c")
    with pytest.raises(CommandUsageError, match="expected KEY=VALUE"):
        parse_config_list("retention.ms")


def test_configs_alter_then_describe(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cfg-topic")
    altered = sluice("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-topic",
                     "--add-config", "retention.ms=3600000,segment.bytes=1048576",
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    described = sluice("configs", "describe", "--entity-type", "topics", "--entity-name",
                       "cfg-topic", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "retention.ms=3600000" in described.stdout
    assert "segment.bytes=1048576" in described.stdout
    topics = sluice("topics", "describe", "--topic", "cfg-topic",
                    "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert "Configs: " in topics.stdout and "retention.ms=3600000" in topics.stdout
    deleted = sluice("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-topic",
                     "--delete-config", "retention.ms",
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    after = sluice("configs", "describe", "--entity-type", "topics", "--entity-name",
                   "cfg-topic", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert "retention.ms=3600000" not in after.stdout


def test_configs_of_a_missing_topic_fail(broker: BrokerProcess) -> None:
    proc = sluice("configs", "describe", "--entity-type", "topics", "--entity-name", "nope",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert proc.returncode == 1
    assert "nope" in proc.stderr


def test_topics_alter_adds_partitions_that_take_writes(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "grow", partitions=1)
    proc = sluice("topics", "alter", "--topic", "grow", "--partitions", "3",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    produce(broker.bootstrap, "grow", 2, partition=2)
    offsets = sluice("get-offsets", "--topic", "grow", "--bootstrap-server", broker.bootstrap)
    assert offsets.stdout.split() == ["grow:0:0", "grow:1:0", "grow:2:2"]


def test_get_offsets_and_delete_records(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "trim")
    produce(broker.bootstrap, "trim", 5)
    latest = sluice("get-offsets", "--topic", "trim", "--bootstrap-server", broker.bootstrap)
    assert latest.stdout.split() == ["trim:0:5"], latest.stderr
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "trim", "partition": 0, "offset": 3}]}))
    deleted = sluice("delete-records", "--offset-json-file", str(plan),
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    assert "trim:0 low watermark 3" in deleted.stdout
    earliest = sluice("get-offsets", "--topic", "trim", "--time", "-2",
                      "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert earliest.stdout.split() == ["trim:0:3"]


def test_groups_delete_an_empty_group_and_report_a_missing_one(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "grouped")
    produce(broker.bootstrap, "grouped", 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "to-delete"})
    consumer.commit(offsets=[TopicPartition("grouped", 0, 1)], asynchronous=False)
    consumer.close()
    deleted = sluice("groups", "delete", "--group", "to-delete",
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted consumer group to-delete." in deleted.stdout
    listed = sluice("groups", "list", "--bootstrap-server", broker.bootstrap)
    assert "to-delete" not in listed.stdout.split()
    missing = sluice("groups", "delete", "--group", "never-was",
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert missing.returncode == 1
    assert "never-was" in missing.stderr


def test_bad_time_is_a_usage_error(broker: BrokerProcess) -> None:
    proc = sluice("get-offsets", "--topic", "x", "--time", "yesterday",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert proc.returncode == 2
    assert "expected -1, -2, -3 or epoch milliseconds" in proc.stderr


def test_broker_configs_per_broker_and_default(broker: BrokerProcess) -> None:
    """kafka-configs.sh's spelling: --entity-type brokers with --entity-name N or
    --entity-default; the default is described with its source, and read-only keys fail
    naming the key."""
    common = ("--entity-type", "brokers", "--bootstrap-server", broker.bootstrap)
    altered = sluice("configs", "alter", *common, "--entity-name", "0",
                     "--add-config", "log.retention.ms=3600000")  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert "Completed updating config for broker 0." in altered.stdout
    described = sluice("configs", "describe", *common, "--entity-name", "0")
    assert described.returncode == 0, described.stderr
    assert "log.retention.ms=3600000 sensitive=false source=DYNAMIC_BROKER_CONFIG" in (
        described.stdout
    )
    default = sluice("configs", "alter", *common, "--entity-default",
                     "--add-config", "log.segment.bytes=2097152")  # fmt: skip
    assert default.returncode == 0, default.stderr
    assert "Completed updating default config for brokers in the cluster." in default.stdout
    shown = sluice("configs", "describe", *common, "--entity-default")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.segment.bytes=2097152 sensitive=false source=DYNAMIC_DEFAULT_BROKER_CONFIG",
    ]
    refused = sluice("configs", "alter", *common, "--entity-default",
                     "--add-config", "broker.id=3")  # fmt: skip
    assert refused.returncode != 0
    assert "INVALID_REQUEST" in refused.stderr and "broker.id" in refused.stderr
    for args in (("--entity-name", "0", "--delete-config", "log.retention.ms"),
                 ("--entity-default", "--delete-config", "log.segment.bytes")):  # fmt: skip
        assert sluice("configs", "alter", *common, *args).returncode == 0
    assert sluice("configs", "describe", *common, "--entity-default").stdout.splitlines() == [
        "Default configs for brokers in the cluster are:"
    ]


def test_entity_default_is_for_brokers_only(broker: BrokerProcess) -> None:
    proc = sluice("configs", "describe", "--entity-type", "topics", "--entity-default",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert proc.returncode != 0
    assert "--entity-default: expected --entity-type brokers" in proc.stderr
