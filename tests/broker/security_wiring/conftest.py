"""Fixtures for the security wiring tests: certificates, and brokers on a secured listener.

``SecureBroker`` is a ``BrokerProcess`` whose one listener (``listeners=<PROTOCOL>://...``)
is the one under test; its readiness probe speaks TLS when the listener does (ApiVersions is
served before SASL authentication, so SASL listeners need nothing more).
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.testing.broker import BrokerProcess
from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.net import free_port

KEY_PASSWORD = "broker-key-pw-5309"
ADMIN_PASSWORD = "admin-secret-8817"
ALICE_PASSWORD = "alice-secret-2203"

_SIZE = struct.Struct(">i")


class SecureBroker(BrokerProcess):
    """A standalone broker whose only listener is ``protocol``; see the module docstring."""

    def __init__(
        self,
        base_dir: Path,
        protocol: str,
        overrides: Mapping[str, str],
        *,
        tls: ssl.SSLContext | None = None,
        **kwargs: Any,
    ) -> None:
        port = free_port()
        settings = {"listeners": f"{protocol}://127.0.0.1:{port}", **overrides}
        super().__init__(base_dir, settings, port=port, **kwargs)
        self.tls = tls

    def ready(self) -> bool:
        return api_versions(self.port, self.tls) is not None


def api_versions(port: int, tls: ssl.SSLContext | None, timeout: float = 2.0) -> Any:
    """The ApiVersions v0 response of 127.0.0.1:port, or None."""
    body = build(request_type(ApiKey.API_VERSIONS, 0), {})
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            sock = tls.wrap_socket(raw, server_hostname="localhost") if tls else raw
            with sock:
                sock.sendall(encode_request(1, "probe", body))
                size = _SIZE.unpack(recv_exactly(sock, 4))[0]
                frame = recv_exactly(sock, size)
    except (OSError, ValueError):
        return None
    return decode_response(frame, ApiKey.API_VERSIONS, 0)[1]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ValueError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)


def keystore(certs: Certificates, **more: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.key.password": certs.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        **more,
    }


def client_tls(certs: Certificates, *, certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if certificate:
        context.load_cert_chain(str(certs.client_certificate), str(certs.client_key))
    return context


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
    f'user_alice="{ALICE_PASSWORD}";'
)


StartSecure = Callable[..., SecureBroker]


@pytest.fixture
def start_secure(tmp_path: Path) -> Iterator[StartSecure]:
    started: list[SecureBroker] = []

    def start(protocol: str, overrides: Mapping[str, str], **kwargs: Any) -> SecureBroker:
        broker = SecureBroker(tmp_path / f"broker{len(started)}", protocol, overrides, **kwargs)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        if broker.running:
            code = broker.stop()
            assert code == 0, broker.output_tail()
