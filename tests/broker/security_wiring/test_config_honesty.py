"""Honest configuration (issue 17 part 4, the broker): unknown keys warned about by name, a
listener whose protocol is not served refused, bind errors naming the key and the address."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.broker.config import BrokerConfig, ConfigError, unknown_keys
from sluice.testing.broker import BrokerProcess
from sluice.testing.net import free_port


def test_unknown_keys_are_named() -> None:
    props = {
        "log.cleaner.threads": "2",  # Kafka's, unused by Sluice: no warning
        "num.network.threads": "3",
        "listener.name.sasl_ssl.ssl.keystore.location": "/k.pem",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "x",
        "metrics.listener": "",  # Sluice's own
        "failOnDataLos": "false",
        "listener.name.ssl.ssl.keystore.locaton": "/k.pem",
    }
    assert unknown_keys(props) == ["failOnDataLos", "listener.name.ssl.ssl.keystore.locaton"]


def test_unknown_key_is_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sluice.broker.config"):
        BrokerConfig.from_properties({"retention.msx": "1", "log.retention.hours": "1"})
    assert [r.getMessage() for r in caplog.records] == [
        "The configuration 'retention.msx' was supplied but isn't a known config."
    ]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "SASL_SSL://:9093"}, r"GSSAPI \(Kafka's default\) is not served"),
        (
            {"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "OAUTHBEARER"},
            "OAUTHBEARER is not served",
        ),
        ({"listeners": "CONTROLLER://:9093"}, "CONTROLLER has no security protocol"),
        (
            {"listeners": "X://:1", "listener.security.protocol.map": "X:KERBEROS"},
            "X maps to KERBEROS",
        ),
        (
            {"listeners": "SSL://:9093", "zookeeper.connect": "zk:2181"},
            "ssl.truststore.location: the inter-broker listener SSL is SSL",
        ),
        ({"listeners": "PLAINTEXT://:1", "inter.broker.listener.name": "OTHER"}, "OTHER"),
    ],
)
def test_unserved_listeners_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_listeners_and_the_inter_broker_one() -> None:
    config = BrokerConfig.from_properties({
        "listeners": "CLIENT://:9093,PLAINTEXT://127.0.0.1:9092",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "CLIENT://kafka.example:9093,PLAINTEXT://10.0.0.1:9092",
        "sasl.enabled.mechanisms": "PLAIN",
        "ssl.key.password": "key-pw-6612",
    })  # fmt: skip
    assert [(x.name, x.security_protocol) for x in config.listeners] == [
        ("CLIENT", "SASL_SSL"),
        ("PLAINTEXT", "PLAINTEXT"),
    ]
    assert (config.listener.port, config.advertised.host) == (9092, "10.0.0.1")
    assert "key-pw-6612" not in repr(config)  # the security keys hold passwords


def run_broker(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "sluice", "broker", "start"]
    for item in (f"log.dirs={tmp_path / 'data'}", *overrides):
        args += ["--override", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_a_refused_listener_stops_the_start(tmp_path: Path) -> None:
    done = run_broker(tmp_path, f"listeners=SASL_SSL://127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert "GSSAPI (Kafka's default) is not served" in done.stdout + done.stderr


@pytest.mark.parametrize("key", ["listeners", "metrics.listener"])
def test_bind_errors_name_the_key_and_the_address(tmp_path: Path, key: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if key == "listeners":
            done = run_broker(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}")
            expected = f"listeners=PLAINTEXT://127.0.0.1:{port}: cannot bind 127.0.0.1:{port}"
        else:
            done = run_broker(
                tmp_path,
                f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                f"metrics.listener=http://127.0.0.1:{port}",
            )
            expected = f"metrics.listener=http://127.0.0.1:{port}: cannot bind 127.0.0.1:{port}"
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert expected in output and "Address already in use" in output


@pytest.mark.broker
def test_a_real_server_properties_warns_only_for_typos(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path,
        {"num.io.threads": "8", "log.cleaner.threads": "1", "zookeeper.set.acl": "false",
         "log.retention.hourz": "1"},
    )  # fmt: skip
    with broker:  # starts it, and stops it on the way out
        pass
    output = broker.output()
    assert "The configuration 'log.retention.hourz' was supplied" in output
    assert "num.io.threads" not in output and "zookeeper.set.acl" not in output
