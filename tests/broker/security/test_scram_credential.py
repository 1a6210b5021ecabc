"""scram_credential.py: salted credentials and Kafka's stored forms."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from sluice.broker.security.errors import CredentialFormatError, ScramCredentialError
from sluice.broker.security.scram_credential import (
    ScramCredential,
    ScramMechanism,
    UserConfigZnode,
    create_credential,
    credential_from_string,
    credential_to_string,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def test_rfc7677_keys() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = create_credential(SHA256, "pencil", 4096, salt=salt)
    # StoredKey / ServerKey of RFC 7677's example, computed independently with hashlib/hmac
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert credential.stored_key == hashlib.sha256(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha256").digest()


def test_mechanisms() -> None:
    assert ScramMechanism.by_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.by_name("scram-sha-512") is None
    assert ScramMechanism.by_kafka_type(1) is SHA256 and ScramMechanism.by_kafka_type(0) is None
    assert (SHA256.digest_size, SHA512.digest_size) == (32, 64)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_string_round_trip(mechanism: ScramMechanism) -> None:
    credential = create_credential(mechanism, "pw", 5000)
    text = credential_to_string(credential)
    assert text.startswith("salt=") and text.endswith(",iterations=5000")
    assert [part.split("=", 1)[0] for part in text.split(",")] == [
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    ]
    assert credential_from_string(mechanism, text) == credential


def test_reads_a_kafka_written_credential() -> None:
    # Kafka's salts are the ASCII text of a base-36 number (ScramFormatter.secureRandomBytes)
    salt = b"1rmtgp6ag9zk7tsfdkvtmnzd2t"
    credential = create_credential(SHA512, "alice-secret", 4096, salt=salt)
    kafka_text = (
        f"salt={base64.b64encode(salt).decode()},"
        f"stored_key={base64.b64encode(credential.stored_key).decode()},"
        f"server_key={base64.b64encode(credential.server_key).decode()},iterations=4096"
    )
    assert credential_from_string(SHA512, kafka_text) == credential


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("salt=AA==,stored_key=AA==,server_key=AA==", "expected the fields"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,extra=1", "expected the"),
        ("nonsense", "without '='"),
        ("salt=!!,stored_key=AA==,server_key=AA==,iterations=4096", "Base64 in the salt"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=x", "decimal iteration"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096", "32-byte stored_key"),
    ],
)
def test_bad_strings(text: str, message: str) -> None:
    with pytest.raises(CredentialFormatError, match=message):
        credential_from_string(SHA256, text)


def test_invariants() -> None:
    with pytest.raises(ScramCredentialError, match="at least 4096 iterations, found 4095"):
        create_credential(SHA256, "pw", 4095)
    good = create_credential(SHA256, "pw")
    with pytest.raises(ScramCredentialError, match="at least 4096"):
        ScramCredential(SHA256, good.salt, good.stored_key, good.server_key, 1)
    with pytest.raises(ScramCredentialError, match="non-empty salt"):
        ScramCredential(SHA256, b"", good.stored_key, good.server_key, 4096)
    with pytest.raises(ScramCredentialError, match="64-byte stored_key"):
        ScramCredential(SHA512, good.salt, good.stored_key, good.server_key, 4096)


def test_user_config_znode() -> None:
    credential = create_credential(SHA256, "pw")
    znode = UserConfigZnode({"producer_byte_rate": "1024"}).with_credential(SHA256, credential)
    payload = json.loads(znode.encode())
    assert payload["version"] == 1
    assert payload["config"] == {
        "producer_byte_rate": "1024",
        "SCRAM-SHA-256": credential_to_string(credential),
    }
    decoded = UserConfigZnode.decode(znode.encode())
    assert decoded.credentials() == {SHA256: credential}
    assert decoded.with_credential(SHA256, None).config == {"producer_byte_rate": "1024"}
    assert "stored_key" not in repr(decoded)
    with pytest.raises(ScramCredentialError):
        znode.with_credential(SHA512, credential)


def test_user_config_paths_are_sanitized_as_kafka() -> None:
    assert UserConfigZnode.path("alice") == "/config/users/alice"
    assert UserConfigZnode.path("CN=a b,O=x*~") == "/config/users/CN%3Da%20b%2CO%3Dx%2A%7E"
    assert UserConfigZnode.user_of(UserConfigZnode.path("CN=a b,O=x*~")) == "CN=a b,O=x*~"
    with pytest.raises(CredentialFormatError):
        UserConfigZnode.user_of("/config/topics/t")


@pytest.mark.parametrize(
    "data", [b"not json", b"[]", b'{"version":2}', b'{"version":1,"config":{"a":1}}']
)
def test_bad_user_config_payloads(data: bytes) -> None:
    with pytest.raises(CredentialFormatError):
        UserConfigZnode.decode(data)
