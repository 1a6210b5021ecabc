"""TLS contexts of the registry: which keys are accepted, which are refused, and how."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from sluice.schemas.errors import RegistryKeystoreError, RegistrySecurityConfigError
from sluice.schemas.tls import client_authentication, client_context, server_context
from sluice.testing.certificates import Certificates, make_certificates

KEY_PASSWORD = "keystore-pw-3141"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"), KEY_PASSWORD)


def keystore(certs: Certificates, **more: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.key.password": certs.key_password,
        **more,
    }


def test_pem_keystore_file(certs: Certificates) -> None:
    context = server_context(keystore(certs))
    assert context.verify_mode == ssl.CERT_NONE
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_inline_pem_keys(certs: Certificates, tmp_path: Path) -> None:
    text = certs.server.read_text()
    key_end = text.index("-----END ENCRYPTED PRIVATE KEY-----") + 35
    # as a properties continuation delivers them: one line, spaces for the breaks
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": " ".join(text[:key_end].split("\n")),
        "ssl.keystore.certificate.chain": " ".join(text[key_end:].split("\n")),
        "ssl.key.password": KEY_PASSWORD,
    }
    server_context(props)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("ssl.client.authentication", "REQUIRED", ssl.CERT_REQUIRED),
        ("ssl.client.authentication", "requested", ssl.CERT_OPTIONAL),
        ("ssl.client.authentication", "NONE", ssl.CERT_NONE),
        ("ssl.client.auth", "true", ssl.CERT_REQUIRED),  # Confluent's older boolean
        ("ssl.client.auth", "false", ssl.CERT_NONE),
        ("ssl.client.auth", "requested", ssl.CERT_OPTIONAL),  # Kafka's values
    ],
)
def test_client_authentication(certs: Certificates, key: str, value: str, expected: int) -> None:
    props = keystore(
        certs,
        **{key: value, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)},
    )
    assert server_context(props).verify_mode == expected


def test_client_auth_keys_must_agree() -> None:
    props = {"ssl.client.authentication": "REQUIRED", "ssl.client.auth": "false"}
    with pytest.raises(RegistrySecurityConfigError, match="disagree"):
        client_authentication(props)
    assert client_authentication({**props, "ssl.client.auth": "true"}) == "REQUIRED"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"ssl.keystore.type": "JKS"}, r"ssl.keystore.type: expected PEM, found JKS\. .*keytool"),
        ({"ssl.keystore.type": ""}, r"found JKS \(unset, Confluent's default\)"),
        ({"ssl.keystore.type": "PKCS12"}, "expected PEM, found PKCS12"),
        ({"ssl.keystore.password": "store-pw-2718"}, "put the private key's password in"),
        ({"ssl.keystore.location": ""}, "an https listener needs ssl.keystore.type=PEM"),
        ({"ssl.keystore.key": "-----BEGIN"}, "not both"),
        ({"ssl.client.authentication": "yes"}, "expected NONE, REQUESTED or REQUIRED"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "expected some of TLSv1.2, TLSv1.3"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "not a cipher suite OpenSSL knows"),
        (
            {"ssl.client.auth": "true", "ssl.truststore.location": "/ca.jks"},
            "ssl.truststore.type: expected PEM, found JKS",
        ),
        (
            {
                "ssl.client.auth": "true",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/absent/ca.pem",
            },
            "ssl.truststore.location=/absent/ca.pem: no such file",
        ),
    ],
)
def test_refused(certs: Certificates, change: dict[str, str], expected: str) -> None:
    with pytest.raises(RegistrySecurityConfigError, match=expected) as e:
        server_context(keystore(certs, **change))
    assert KEY_PASSWORD not in str(e.value) and "store-pw-2718" not in str(e.value)


def test_wrong_key_password_names_the_file_not_the_password(certs: Certificates) -> None:
    with pytest.raises(RegistryKeystoreError, match=f"ssl.keystore.location={certs.server}") as e:
        server_context(keystore(certs, **{"ssl.key.password": "wrong-pw-1618"}))
    assert "wrong-pw-1618" not in str(e.value)
    with pytest.raises(RegistryKeystoreError):  # no password: fails, never prompts
        server_context(keystore(certs, **{"ssl.key.password": ""}))


def test_client_context(certs: Certificates, tmp_path: Path) -> None:
    context = client_context(str(certs.ca), str(certs.client_certificate), str(certs.client_key))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    client_context(str(certs.ca))
    with pytest.raises(RegistrySecurityConfigError, match="ssl.certificate.location is required"):
        client_context(str(certs.ca), key_location=str(certs.client_key))
    with pytest.raises(RegistryKeystoreError, match="ssl.ca.location=.*: no such file"):
        client_context(str(tmp_path / "absent.pem"))
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    with pytest.raises(RegistryKeystoreError, match="expected PEM"):
        client_context(str(not_pem))
