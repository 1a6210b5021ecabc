"""SSL listeners with real clients: confluent-kafka and kafka-python, with and without a
client certificate; a plaintext client on the TLS port refused; the principal of a
certificate; a fetch through TLS (no sendfile) returns what was produced."""

from __future__ import annotations

import socket
import ssl
import warnings

import pytest

from sluice.testing.certificates import Certificates
from tests.broker.security_wiring.clients import roundtrip
from tests.broker.security_wiring.conftest import (
    StartSecure,
    api_versions,
    client_tls,
    keystore,
)

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def confluent_ssl(certs: Certificates, bootstrap: str, *, certificate: bool) -> dict[str, str]:
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.endpoint.identification.algorithm": "https",
    }
    if certificate:
        config |= {
            "ssl.certificate.location": str(certs.client_certificate),
            "ssl.key.location": str(certs.client_key),
        }
    return config


@pytest.mark.parametrize("client_auth", ["none", "requested"])
def test_confluent_over_tls_without_a_certificate(
    certs: Certificates, start_secure: StartSecure, client_auth: str
) -> None:
    broker = start_secure(
        "SSL", keystore(certs, **{"ssl.client.auth": client_auth}), tls=client_tls(certs)
    )
    config = confluent_ssl(certs, f"localhost:{broker.port}", certificate=False)
    got = roundtrip(config, f"tls-{client_auth}", 50)
    assert got == [f"m{i}".encode() for i in range(50)]


def test_required_client_certificate(certs: Certificates, start_secure: StartSecure) -> None:
    broker = start_secure(
        "SSL",
        keystore(certs, **{"ssl.client.auth": "required"}),
        tls=client_tls(certs, certificate=True),
        log_level="debug",
    )
    # without a certificate the handshake fails
    assert api_versions(broker.port, client_tls(certs)) is None
    config = confluent_ssl(certs, f"localhost:{broker.port}", certificate=True)
    assert len(roundtrip(config, "tls-required", 10)) == 10
    assert "as User:CN=registry-client" in broker.output()


def test_kafka_python_over_tls(certs: Certificates, start_secure: StartSecure) -> None:
    broker = start_secure(
        "SSL",
        keystore(certs, **{"ssl.client.auth": "required"}),
        tls=client_tls(certs, certificate=True),
    )
    settings = {
        "bootstrap_servers": f"localhost:{broker.port}",
        "security_protocol": "SSL",
        "ssl_cafile": str(certs.ca),
        "ssl_certfile": str(certs.client_certificate),
        "ssl_keyfile": str(certs.client_key),
    }
    producer = KafkaProducer(**settings)
    for i in range(20):
        producer.send("tls-kp", f"v{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        "tls-kp", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings
    )
    values = [record.value for record in consumer]
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(20)]


def test_plaintext_client_on_a_tls_port_is_refused(
    certs: Certificates, start_secure: StartSecure
) -> None:
    broker = start_secure("SSL", keystore(certs), tls=client_tls(certs))
    assert api_versions(broker.port, None) is None  # a Kafka request where TLS is expected
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x0a" + b"\x00" * 10)
        answer = sock.recv(64)
        assert answer == b"" or answer[0] == 0x15  # closed, or a TLS alert record
    assert api_versions(broker.port, client_tls(certs)) is not None  # still serving
    with (
        pytest.raises(ssl.SSLCertVerificationError),  # and a client checks the host name
        socket.create_connection(("127.0.0.1", broker.port), timeout=5) as raw,
    ):
        client_tls(certs).wrap_socket(raw, server_hostname="not-the-broker.example").close()
