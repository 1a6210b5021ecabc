"""SASL listeners with real clients: PLAIN from the JAAS line, SCRAM-SHA-256/512 with users
made through AlterUserScramCredentials (KIP-554); wrong passwords and unknown users refused
with Kafka's error; nothing served before authentication; no secret in the broker's log."""

from __future__ import annotations

import socket
import warnings
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.security.plain import encode_plain_message
from sluice.testing.certificates import Certificates
from tests.broker.security_wiring.clients import roundtrip
from tests.broker.security_wiring.conftest import (
    ADMIN_PASSWORD,
    ALICE_PASSWORD,
    PLAIN_JAAS,
    SecureBroker,
    StartSecure,
    client_tls,
    keystore,
    recv_exactly,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

pytestmark = [
    pytest.mark.broker,
    # kafka-python leaks its wake-up socket pair when authentication fails in a constructor;
    # the garbage collector reports it during a later test.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
SASL = {"sasl.enabled.mechanisms": MECHANISMS, "sasl.jaas.config": PLAIN_JAAS}
BOB_PASSWORD = "bob-scram-pw-4471"
WRONG_PASSWORD = "wrong-pw-9931"


def sasl_client(broker: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def refused(config: dict[str, Any]) -> str:
    """The errors a client reports when authentication fails (librdkafka hands the broker's
    message to ``error_cb``)."""
    errors: list[str] = []
    admin = AdminClient(config | {"error_cb": lambda error: errors.append(str(error))})
    with pytest.raises(KafkaException) as caught:
        admin.list_topics(timeout=10)
    admin.poll(1)  # error_cb runs from poll
    return "\n".join([str(caught.value), *errors])


@pytest.fixture
def sasl_broker(start_secure: StartSecure) -> SecureBroker:
    return start_secure("SASL_PLAINTEXT", SASL, log_level="debug")


def test_plain_users_from_the_jaas_line(sasl_broker: SecureBroker) -> None:
    config = sasl_client(sasl_broker, "PLAIN", "alice", ALICE_PASSWORD)
    assert roundtrip(config, "plain-topic") == [f"m{i}".encode() for i in range(20)]
    assert "authenticated as User:alice (PLAIN)" in sasl_broker.output()
    wrong = refused(sasl_client(sasl_broker, "PLAIN", "alice", WRONG_PASSWORD))
    unknown = refused(sasl_client(sasl_broker, "PLAIN", "mallory", WRONG_PASSWORD))
    for message in (wrong, unknown):
        assert "Authentication failed: Invalid username or password" in message
    output = sasl_broker.output()
    for secret in (ALICE_PASSWORD, ADMIN_PASSWORD, WRONG_PASSWORD):
        assert secret not in output


def test_kafka_python_plain(sasl_broker: SecureBroker) -> None:
    settings: dict[str, Any] = {
        "bootstrap_servers": sasl_broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": ALICE_PASSWORD,
    }
    producer = KafkaProducer(**settings)
    for i in range(10):
        producer.send("kp-plain", f"v{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        "kp-plain", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings
    )
    assert [r.value for r in consumer] == [f"v{i}".encode() for i in range(10)]
    consumer.close()
    with pytest.raises(KafkaPythonError):
        KafkaProducer(**settings | {"sasl_plain_password": WRONG_PASSWORD}).close()


@pytest.mark.parametrize(
    ("mechanism", "kind"),
    [
        ("SCRAM-SHA-256", ScramMechanism.SCRAM_SHA_256),
        ("SCRAM-SHA-512", ScramMechanism.SCRAM_SHA_512),
    ],
)
def test_scram_users_made_through_the_admin_api(
    sasl_broker: SecureBroker, mechanism: str, kind: ScramMechanism
) -> None:
    admin = AdminClient(sasl_client(sasl_broker, "PLAIN", "admin", ADMIN_PASSWORD))
    upsert = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(kind, 8192), BOB_PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=15)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=15)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(kind, 8192)]

    config = sasl_client(sasl_broker, mechanism, "bob", BOB_PASSWORD)
    assert len(roundtrip(config, f"scram-{kind.name}", 10)) == 10
    assert f"authenticated as User:bob ({mechanism})" in sasl_broker.output()
    for user, password in (("bob", WRONG_PASSWORD), ("nobody", BOB_PASSWORD)):
        assert "Authentication failed" in refused(
            sasl_client(sasl_broker, mechanism, user, password)
        )

    # kafka-python speaks SCRAM too
    producer = KafkaProducer(
        bootstrap_servers=sasl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_plain_username="bob", sasl_plain_password=BOB_PASSWORD,
    )  # fmt: skip
    producer.send(f"scram-{kind.name}", b"from kafka-python").get(timeout=15)
    producer.close()

    # deleted: refused from now on, and deleting again is RESOURCE_NOT_FOUND
    delete = UserScramCredentialDeletion("bob", kind)
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(timeout=15)
    assert "Authentication failed" in refused(config)
    with pytest.raises(KafkaException, match="does not exist"):
        for future in admin.alter_user_scram_credentials([delete]).values():
            future.result(timeout=15)
    assert BOB_PASSWORD not in sasl_broker.output()


def test_scram_credentials_survive_a_restart(sasl_broker: SecureBroker) -> None:
    admin = AdminClient(sasl_client(sasl_broker, "PLAIN", "admin", ADMIN_PASSWORD))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("carol", info, BOB_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=15)
    sasl_broker.restart()
    config = sasl_client(sasl_broker, "SCRAM-SHA-256", "carol", BOB_PASSWORD)
    assert len(roundtrip(config, "scram-restart", 5)) == 5
    stored = (sasl_broker.log_dir / "sluice-users.json").read_text()
    assert "carol" in stored and BOB_PASSWORD not in stored


def test_sasl_over_tls(certs: Certificates, start_secure: StartSecure) -> None:
    broker = start_secure("SASL_SSL", {**SASL, **keystore(certs)}, tls=client_tls(certs))
    config = {
        "bootstrap.servers": f"localhost:{broker.port}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": ALICE_PASSWORD,
    }
    assert len(roundtrip(config, "sasl-ssl", 10)) == 10
    assert "Invalid username or password" in refused(config | {"sasl.password": WRONG_PASSWORD})


# -- the wire, by hand ---------------------------------------------------------------------


def exchange(sock: socket.socket, api_key: int, version: int, values: dict[str, Any]) -> Any:
    sock.sendall(encode_request(7, "wire", build(request_type(api_key, version), values)))
    size = int.from_bytes(recv_exactly(sock, 4), "big")
    return decode_response(recv_exactly(sock, size), api_key, version)[1]


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_failed_authentication_answers_then_closes(sasl_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        handshake = exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert int(handshake.error_code) == 0 and "SCRAM-SHA-512" in handshake.mechanisms
        message = encode_plain_message("alice", WRONG_PASSWORD)
        answer = exchange(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": message})
        assert int(answer.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert closed(sock)


def test_unsupported_mechanism_lists_the_enabled_ones(sasl_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        answer = exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert int(answer.error_code) == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == MECHANISMS.split(",")
        assert closed(sock)


def test_nothing_but_sasl_before_authentication(sasl_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        software = {"client_software_name": "w", "client_software_version": "1"}
        versions = exchange(sock, ApiKey.API_VERSIONS, 3, software)
        keys = {int(k.api_key) for k in versions.api_keys}
        assert {17, 36} <= keys
        sock.sendall(
            encode_request(8, "wire", build(request_type(ApiKey.METADATA, 1), {"topics": None}))
        )
        assert closed(sock)
    # then authenticated, a SaslAuthenticate v0 session: Metadata is served
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        message = encode_plain_message("alice", ALICE_PASSWORD)
        answer = exchange(sock, ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": message})
        assert int(answer.error_code) == 0
        metadata = exchange(sock, ApiKey.METADATA, 1, {"topics": None})
        assert [b.port for b in metadata.brokers] == [sasl_broker.port]


def test_legacy_handshake_v0_with_bare_tokens(sasl_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        assert int(exchange(sock, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code) == 0
        token = encode_plain_message("alice", ALICE_PASSWORD)
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_exactly(sock, 4) == b"\x00\x00\x00\x00"  # an empty answer: success
        assert exchange(sock, ApiKey.METADATA, 1, {"topics": None}).brokers
