"""Inter-broker security in the broker's config (issue 19 item 4): a cluster's inter-broker
listener may be SSL, SASL_PLAINTEXT or SASL_SSL; what it lacks to connect to the other
brokers refuses the start with a ConfigError naming the key, never quoting a password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sluice.broker.config import BrokerConfig, ConfigError
from sluice.testing.certificates import Certificates
from sluice.testing.net import free_port
from tests.broker.security_wiring.conftest import keystore

PASSWORD = "inter-broker-secret-3391"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="broker" password="{PASSWORD}" user_broker="{PASSWORD}";'
)


def cluster_props(certs: Certificates, **more: str) -> dict[str, str]:
    return {
        "listeners": "INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "zookeeper.connect": "127.0.0.1:2181/x",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS,
        **keystore(certs),
        **more,
    }


def test_a_sasl_ssl_inter_broker_listener_is_accepted(certs: Certificates) -> None:
    config = BrokerConfig.from_properties(cluster_props(certs))
    security = config.inter_broker_security
    assert security is not None and security.protocol == "SASL_SSL"
    assert security.sasl is not None and security.sasl.username == "broker"
    assert security.tls_properties is not None
    assert PASSWORD not in repr(config) and PASSWORD not in repr(security)


def test_standalone_has_no_inter_broker_security(certs: Certificates) -> None:
    props = cluster_props(certs)
    del props["zookeeper.connect"], props["sasl.mechanism.inter.broker.protocol"]
    assert BrokerConfig.from_properties(props).inter_broker_security is None


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"sasl.mechanism.inter.broker.protocol": ""}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"},
         "sasl.mechanism.inter.broker.protocol"),
        ({"listener.name.internal.plain.sasl.jaas.config": ""},
         "listener.name.internal.plain.sasl.jaas.config"),
        ({"listener.name.internal.plain.sasl.jaas.config": JAAS.replace("username", "user")},
         "listener.name.internal.plain.sasl.jaas.config"),
        ({"ssl.truststore.location": ""}, "ssl.truststore.location"),
        ({"ssl.truststore.location": "/nowhere/ca.pem"}, "ssl.truststore.location"),
    ],
)  # fmt: skip
def test_what_is_missing_is_named(certs: Certificates, change: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key) as caught:
        BrokerConfig.from_properties(cluster_props(certs, **change))
    assert PASSWORD not in str(caught.value)


def test_the_broker_refuses_to_start(tmp_path: Path, certs: Certificates) -> None:
    props = cluster_props(certs, **{"sasl.mechanism.inter.broker.protocol": "GSSAPI"})
    props["listeners"] = f"INTERNAL://127.0.0.1:{free_port()}"
    props["log.dirs"] = str(tmp_path / "data")
    args = [sys.executable, "-m", "sluice", "broker", "start"]
    for key, value in props.items():
        args += ["--override", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "sasl.mechanism.inter.broker.protocol" in output and PASSWORD not in output
