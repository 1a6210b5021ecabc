"""Test certificates: a CA, a server certificate for 127.0.0.1/localhost and a client one.

Made with the ``cryptography`` package when it is installed, else with the ``openssl``
command. Files (PEM) in the folder given:

* ``ca.pem`` — the CA certificate (truststore of both sides);
* ``server.pem`` — the server's private key, encrypted with ``key_password``, then its
  certificate (one file: ``ssl.keystore.location``);
* ``client.pem`` / ``client.key`` — a client certificate (CN=registry-client) and its key.
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: Path
    key_password: str
    client_certificate: Path
    client_key: Path


def make_certificates(folder: Path, key_password: str) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _with_openssl(folder, key_password)
    else:
        _with_cryptography(folder, key_password)
    return Certificates(
        folder / "ca.pem",
        folder / "server.pem",
        key_password,
        folder / "client.pem",
        folder / "client.key",
    )


def _with_cryptography(folder: Path, key_password: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("sluice-test-ca"))
        .issuer_name(name("sluice-test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        common_name: str, usage: x509.ObjectIdentifier, names: list[x509.GeneralName]
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server = leaf(
        "127.0.0.1",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    client_key, client = leaf("registry-client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    encrypted = serialization.BestAvailableEncryption(key_password.encode())
    (folder / "server.pem").write_bytes(
        server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, encrypted)
        + server.public_bytes(pem)
    )
    (folder / "client.pem").write_bytes(client.public_bytes(pem))
    (folder / "client.key").write_bytes(
        client_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _with_openssl(folder: Path, key_password: str) -> None:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *new_key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=sluice-test-ca")  # fmt: skip
    for leaf, subject, extension in (
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("client", "/CN=registry-client", "extendedKeyUsage=clientAuth"),
    ):
        run("req", *new_key, "-keyout", f"{leaf}.key", "-out", f"{leaf}.csr", "-subj", subject)
        (folder / f"{leaf}.ext").write_text(extension + "\n")
        signed_by_ca = ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"]
        run("x509", "-req", "-in", f"{leaf}.csr", *signed_by_ca, "-out", f"{leaf}.pem",
            "-days", "1", "-extfile", f"{leaf}.ext")  # fmt: skip
    run("pkcs8", "-topk8", "-in", "server.key", "-out", "server.enc.key",
        "-passout", f"pass:{key_password}")  # fmt: skip
    server_pem = (folder / "server.enc.key").read_bytes() + (folder / "server.pem").read_bytes()
    (folder / "server.pem").write_bytes(server_pem)
