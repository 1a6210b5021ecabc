"""tls.py: contexts from ssl.* keys, real handshakes over a socketpair, peer principals.

Certificates are made here with the ``cryptography`` package: a CA, a server certificate for
localhost/127.0.0.1 and a client certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from sluice.broker.security.tls import ANONYMOUS, peer_principal  # noqa: E402
from sluice.common.tls import (  # noqa: E402
    KeystoreError,
    TlsConfigError,
    certificate_subject,
    client_context,
    normalize_pem,
    server_context,
)

KEY_PASSWORD = "key-pass-Zq81"
PEM = serialization.Encoding.PEM


def _name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


def _certificate(
    subject: x509.Name,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    folder: Path
    ca_pem: str
    server_keystore: Path  # encrypted PKCS#8 key + certificate + CA, one PEM file
    server_key_pem: str
    server_chain_pem: str
    client_keystore: Path  # unencrypted key + certificate
    truststore: Path
    client_subject: x509.Name
    other_ca: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name((NameOID.COMMON_NAME, "Sluice Test CA"))
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server = _certificate(
        _name((NameOID.COMMON_NAME, "localhost")),
        server_key,
        ca_name,
        ca_key,
        sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_subject = _name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.ORGANIZATION_NAME, "Acme"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        (NameOID.COMMON_NAME, "client"),
    )
    client = _certificate(client_subject, client_key, ca_name, ca_key)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_name = _name((NameOID.COMMON_NAME, "Other CA"))
    other = _certificate(other_name, other_key, other_name, other_key, ca=True)

    ca_pem = ca.public_bytes(PEM).decode()
    server_key_pem = server_key.private_bytes(
        PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    ).decode()
    server_chain_pem = server.public_bytes(PEM).decode() + ca_pem
    client_key_pem = client_key.private_bytes(
        PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    paths = {
        "server.pem": server_key_pem + server_chain_pem,
        "client.pem": client_key_pem + client.public_bytes(PEM).decode(),
        "ca.pem": ca_pem,
        "other-ca.pem": other.public_bytes(PEM).decode(),
    }
    for name, content in paths.items():
        (folder / name).write_text(content)
    return Pki(
        folder=folder,
        ca_pem=ca_pem,
        server_keystore=folder / "server.pem",
        server_key_pem=server_key_pem,
        server_chain_pem=server_chain_pem,
        client_keystore=folder / "client.pem",
        truststore=folder / "ca.pem",
        client_subject=client_subject,
        other_ca=folder / "other-ca.pem",
    )


def server_props(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.truststore),
        **extra,
    }


def client_props(pki: Pki, *, certificate: bool = False, **extra: str) -> dict[str, str]:
    props = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.truststore)}
    if certificate:
        props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.client_keystore)}
    return props | extra


@dataclass
class Handshake:
    server: ssl.SSLSocket | None
    client: ssl.SSLSocket | None
    server_error: BaseException | None
    client_error: BaseException | None


Runner = Callable[..., Handshake]


@pytest.fixture
def handshake() -> Iterator[Runner]:
    opened: list[socket.socket] = []

    def run(
        server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext | None, hostname: str = "localhost"
    ) -> Handshake:
        left, right = socket.socketpair()
        left.settimeout(10)
        right.settimeout(10)
        opened.extend([left, right])
        result = Handshake(None, None, None, None)

        def serve() -> None:
            try:
                tls = server_ctx.wrap_socket(left, server_side=True)
                opened.append(tls)
                tls.sendall(tls.recv(5) + b"-ack")  # a round trip proves the session works
                result.server = tls
            except (ssl.SSLError, OSError) as exc:
                result.server_error = exc

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            if client_ctx is None:  # a plaintext client: a Kafka request header, unwrapped
                right.sendall(b"\x00\x00\x00\x16\x00\x12\x00\x03" + b"\x00" * 18)
            else:
                tls = client_ctx.wrap_socket(right, server_hostname=hostname)
                opened.append(tls)
                tls.sendall(b"hello")
                assert tls.recv(16) == b"hello-ack"
                result.client = tls
        except (ssl.SSLError, OSError, AssertionError) as exc:
            result.client_error = exc
            right.close()
        thread.join(15)
        return result

    yield run
    for sock in opened:
        sock.close()


def test_server_only_tls(pki: Pki, handshake: Runner) -> None:
    result = handshake(server_context(server_props(pki)), client_context(client_props(pki)))
    assert result.server_error is None and result.client_error is None
    assert peer_principal(result.server) == ANONYMOUS
    assert result.client.version() == "TLSv1.3"


def test_client_certificate_gives_the_principal(pki: Pki, handshake: Runner) -> None:
    server = server_context(server_props(pki, **{"ssl.client.auth": "required"}))
    result = handshake(server, client_context(client_props(pki, certificate=True)))
    assert result.server_error is None, result.server_error
    assert peer_principal(result.server) == "User:CN=client,OU=eng,O=Acme,C=US"
    assert peer_principal(result.server) == f"User:{pki.client_subject.rfc4514_string()}"


def test_required_client_certificate_missing_is_refused(pki: Pki, handshake: Runner) -> None:
    server = server_context(server_props(pki, **{"ssl.client.auth": "required"}))
    result = handshake(server, client_context(client_props(pki)))
    assert isinstance(result.server_error, ssl.SSLError)
    assert result.server is None


def test_requested_client_certificate_is_optional(pki: Pki, handshake: Runner) -> None:
    server = server_context(server_props(pki, **{"ssl.client.auth": "requested"}))
    result = handshake(server, client_context(client_props(pki)))
    assert result.server_error is None and peer_principal(result.server) == ANONYMOUS
    with_cert = handshake(server, client_context(client_props(pki, certificate=True)))
    assert peer_principal(with_cert.server) == "User:CN=client,OU=eng,O=Acme,C=US"


def test_plaintext_client_on_a_tls_port_is_refused(pki: Pki, handshake: Runner) -> None:
    result = handshake(server_context(server_props(pki)), None)
    assert isinstance(result.server_error, ssl.SSLError)


def test_client_refuses_an_unknown_ca_and_a_wrong_host(pki: Pki, handshake: Runner) -> None:
    server = server_context(server_props(pki))
    wrong_ca = client_props(pki, **{"ssl.truststore.location": str(pki.other_ca)})
    result = handshake(server, client_context(wrong_ca))
    assert isinstance(result.client_error, ssl.SSLCertVerificationError)
    result = handshake(server, client_context(client_props(pki)), hostname="wrong.example")
    assert isinstance(result.client_error, ssl.SSLCertVerificationError)
    no_check = client_props(pki, **{"ssl.endpoint.identification.algorithm": ""})
    result = handshake(server, client_context(no_check), hostname="wrong.example")
    assert result.client_error is None


def _continued(pem: str) -> str:
    """How a PEM value looks after a properties file's backslash continuations: one line."""
    return " ".join(line.strip() for line in pem.splitlines())


def test_inline_pem_keystore_and_truststore(pki: Pki, handshake: Runner) -> None:
    server = server_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": _continued(pki.server_chain_pem),
            "ssl.keystore.key": _continued(pki.server_key_pem),
            "ssl.key.password": KEY_PASSWORD,
        }
    )
    client = client_context(
        {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": _continued(pki.ca_pem)}
    )
    result = handshake(server, client)
    assert result.server_error is None and result.client_error is None


def test_versions_and_cipher_suites(pki: Pki, handshake: Runner) -> None:
    server = server_context(
        server_props(
            pki,
            **{
                "ssl.enabled.protocols": "TLSv1.2",
                "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
            },
        )
    )
    result = handshake(server, client_context(client_props(pki)))
    assert result.client.version() == "TLSv1.2"
    assert result.client.cipher()[0] == "ECDHE-RSA-AES128-GCM-SHA256"
    capped = server_context(server_props(pki, **{"ssl.protocol": "TLSv1.2"}))
    assert handshake(capped, client_context(client_props(pki))).client.version() == "TLSv1.2"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "convert it to PEM"),
        ({"ssl.keystore.type": "PKCS12"}, "convert it to PEM"),
        ({"ssl.keystore.type": ""}, r"found JKS \(unset, Kafka's default\)"),  # Kafka's default
        ({"ssl.keystore.type": "BKS"}, "expected PEM"),
        ({"ssl.truststore.type": "JKS", "ssl.client.auth": "required"}, "convert it to PEM"),
        ({"ssl.keystore.password": "x"}, "ssl.key.password"),
        ({"ssl.client.auth": "always"}, "none, requested or required"),
        ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "expected some of"),
        ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "contiguous"),
        ({"ssl.protocol": "QUIC"}, "ssl.protocol"),
        ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"}, "excludes"),
        ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "not a cipher suite"),
        ({"ssl.keystore.certificate.chain": "x"}, "not both"),
    ],
)
def test_bad_server_settings(pki: Pki, extra: dict[str, str], message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        server_context(server_props(pki, **extra))


def test_missing_keystore_and_files(pki: Pki) -> None:
    with pytest.raises(
        TlsConfigError, match="needs ssl.keystore.type=PEM and ssl.keystore.location"
    ):
        server_context({})
    with pytest.raises(TlsConfigError, match="together"):
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"})
    with pytest.raises(KeystoreError, match="no such file"):
        server_context(server_props(pki, **{"ssl.keystore.location": "/nonexistent.pem"}))
    with pytest.raises(KeystoreError, match="ssl.truststore.location=/nonexistent.pem"):
        client_context(client_props(pki, **{"ssl.truststore.location": "/nonexistent.pem"}))
    with pytest.raises(TlsConfigError, match="https or empty"):
        client_context(client_props(pki, **{"ssl.endpoint.identification.algorithm": "ldap"}))
    with pytest.raises(KeystoreError, match="expected PEM"):
        normalize_pem("not pem", "ssl.keystore.key")


def test_wrong_key_password_never_appears(pki: Pki) -> None:
    wrong = "wrong-pass-Jx7"
    for props in (
        server_props(pki, **{"ssl.key.password": wrong}),
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pki.server_chain_pem,
            "ssl.keystore.key": pki.server_key_pem,
            "ssl.key.password": wrong,
        },
    ):
        with pytest.raises(KeystoreError, match="ssl.key.password") as caught:
            server_context(props)
        text = str(caught.value) + repr(caught.value)
        assert wrong not in text and KEY_PASSWORD not in text
        assert "PRIVATE KEY" not in text and caught.value.__cause__ is None
    no_password = server_props(pki)
    del no_password["ssl.key.password"]
    with pytest.raises(KeystoreError):  # and no interactive prompt
        server_context(no_password)


def _self_signed_der(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return _certificate(subject, key, subject, key).public_bytes(serialization.Encoding.DER)


def test_subject_in_javas_rfc2253_form() -> None:
    der = _self_signed_der(
        _name(
            (NameOID.DOMAIN_COMPONENT, "com"),
            (NameOID.COUNTRY_NAME, "US"),
            (NameOID.STATE_OR_PROVINCE_NAME, "CA"),
            (NameOID.LOCALITY_NAME, "SF"),
            (NameOID.EMAIL_ADDRESS, "a@b.c"),
            (NameOID.COMMON_NAME, ' a,b+c=d#e;"<>\\ '),
        )
    )
    # Java escapes , = + < > # ; " \ anywhere and spaces at either end; emailAddress has
    # no RFC 2253 keyword, so it is the OID and the hex of its DER (IA5String, tag 0x16)
    email = "1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex()
    cn = r"CN=\ a\,b\+c\=d\#e\;\"\<\>\\\ "
    assert certificate_subject(der) == f"{cn},{email},L=SF,ST=CA,C=US,DC=com"


def test_multi_valued_rdn_and_unicode() -> None:
    subject = x509.Name(
        [
            x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COUNTRY_NAME, "DE")]),
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "Jürgen"),
                    x509.NameAttribute(NameOID.USER_ID, "jm"),
                ]
            ),
        ]
    )
    value = certificate_subject(_self_signed_der(subject))
    assert value in ("CN=Jürgen+UID=jm,C=DE", "UID=jm+CN=Jürgen,C=DE")  # DER sorts the SET


def test_garbage_certificate() -> None:
    with pytest.raises(KeystoreError, match="not valid DER"):
        certificate_subject(b"\x30\x05\x01")
