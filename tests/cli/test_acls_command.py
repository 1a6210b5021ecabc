"""``sluice acls`` after kafka-acls.sh, run as a user runs it (``python -m sluice``) against a
real broker with SASL PLAIN and the ACL authorizer: add, list, remove, the producer and
consumer conveniences, and exit statuses that tell what happened."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.cli.acls_command import command_config
from sluice.cli.errors import CommandUsageError
from sluice.testing.net import free_port
from tests.broker.security_wiring.acl_clients import (
    ACL_BROKER,
    ADMIN_PASSWORD,
    ALICE_PASSWORD,
    codes,
    create_topic,
    produce,
)
from tests.broker.security_wiring.conftest import SecureBroker

pytestmark = pytest.mark.broker


def sluice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def properties(path: Path, user: str, password: str) -> str:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}";\n'
    )
    return str(path)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with SecureBroker(tmp_path_factory.mktemp("acl-cli"), "SASL_PLAINTEXT", ACL_BROKER) as b:
        yield b


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    return properties(tmp_path_factory.mktemp("cfg") / "admin.properties", "admin", ADMIN_PASSWORD)


@pytest.fixture(scope="module")
def alice_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    return properties(tmp_path_factory.mktemp("cfg") / "alice.properties", "alice", ALICE_PASSWORD)


def test_command_config_translates_kafka_client_properties(tmp_path: Path) -> None:
    path = properties(tmp_path / "c.properties", "bob", "pw-1")
    assert command_config(path) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "pw-1",
    }
    (tmp_path / "bad.properties").write_text("ssl.keystore.location=/x.jks\n")
    with pytest.raises(CommandUsageError, match=r"ssl.keystore.location is not"):
        command_config(str(tmp_path / "bad.properties"))


def test_add_list_remove_in_kafkas_spelling(broker: SecureBroker, admin_config: str) -> None:
    create_topic(broker.bootstrap, "cli-orders")
    assert codes(produce(broker.bootstrap, "alice", "cli-orders")) == {29}
    added = sluice(
        "acls", "--bootstrap-server", broker.bootstrap, "--command-config", admin_config,
        "--add", "--allow-principal", "User:alice", "--operation", "Write",
        "--topic", "cli-orders",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert codes(produce(broker.bootstrap, "alice", "cli-orders")) == {None}
    listed = sluice("acls", "--list", "--bootstrap-server", broker.bootstrap,
                    "--command-config", admin_config, "--topic", "cli-orders")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-orders, "
        "patternType=LITERAL)`:" in listed.stdout
    )
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    removed = sluice("acls", "--remove", "--force", "--bootstrap-server", broker.bootstrap,
                     "--command-config", admin_config, "--topic", "cli-orders")  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert "Removed 1 ACLs" in removed.stdout
    assert codes(produce(broker.bootstrap, "alice", "cli-orders")) == {29}


def test_producer_and_consumer_conveniences(broker: SecureBroker, admin_config: str) -> None:
    common = ["--bootstrap-server", broker.bootstrap, "--command-config", admin_config]
    producer = sluice("acls", "add", *common, "--allow-principal", "User:bob", "--producer",
                      "--topic", "cli-pay-", "--resource-pattern-type", "prefixed",
                      "--transactional-id", "bob-tx", "--idempotent")  # fmt: skip
    assert producer.returncode == 0, producer.stderr
    consumer = sluice("acls", "add", *common, "--allow-principal", "User:bob", "--consumer",
                      "--topic", "cli-events", "--group", "bob-readers")  # fmt: skip
    assert consumer.returncode == 0, consumer.stderr
    listed = sluice("acls", "list", *common, "--principal", "User:bob")
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    for resource, operations in (
        (
            "resourceType=TOPIC, name=cli-pay-, patternType=PREFIXED",
            ("WRITE", "DESCRIBE", "CREATE"),
        ),
        ("resourceType=TRANSACTIONAL_ID, name=bob-tx", ("WRITE", "DESCRIBE")),
        ("resourceType=CLUSTER, name=kafka-cluster", ("IDEMPOTENT_WRITE",)),
        ("resourceType=TOPIC, name=cli-events, patternType=LITERAL", ("READ", "DESCRIBE")),
        ("resourceType=GROUP, name=bob-readers", ("READ",)),
    ):
        section = out[out.index(resource) :].split("\n\n")[0]
        for operation in operations:
            assert f"operation={operation}," in section, (resource, out)


def test_refusals_exit_1_usage_errors_2_unreachable_3(
    broker: SecureBroker, admin_config: str, alice_config: str
) -> None:
    refused = sluice("acls", "add", "--bootstrap-server", broker.bootstrap, "--command-config",
                     alice_config, "--allow-principal", "User:alice", "--topic", "x")  # fmt: skip
    assert refused.returncode == 1
    assert "Cluster authorization failed" in refused.stderr
    # librdkafka hides DescribeAcls errors: an empty listing for alice is checked, not trusted
    listed = sluice("acls", "list", "--bootstrap-server", broker.bootstrap, "--command-config",
                    alice_config)  # fmt: skip
    assert listed.returncode == 1, listed.stdout
    assert "may be a refusal" in listed.stderr
    wrong_operation = sluice("acls", "add", "--bootstrap-server", broker.bootstrap,
                             "--command-config", admin_config, "--allow-principal", "User:a",
                             "--operation", "Write", "--group", "g")  # fmt: skip
    assert wrong_operation.returncode == 2
    assert "does not apply to GROUP" in wrong_operation.stderr
    no_principal = sluice("acls", "add", "--bootstrap-server", broker.bootstrap, "--topic", "t")
    assert no_principal.returncode == 2
    unreachable = sluice("acls", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}")
    assert unreachable.returncode == 3, unreachable.stderr


def test_list_without_an_authorizer_fails(tmp_path: Path) -> None:
    with SecureBroker(tmp_path, "PLAINTEXT", {}) as plain:
        listed = sluice("acls", "list", "--bootstrap-server", plain.bootstrap)
    assert listed.returncode == 1
    assert "SECURITY_DISABLED" in listed.stderr
