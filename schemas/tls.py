"""TLS for the registry: the server's context from ``ssl.*`` keys, and the client's.

Server keys (read when the listener is ``https://``). The keystore keys are Kafka's PEM keys,
as the broker reads them; ``ssl.client.authentication`` is Confluent's (rest-utils)::

    ssl.keystore.type=PEM                       # JKS and PKCS12 are refused: convert to PEM
    ssl.keystore.location=server.pem            # the private key and its certificate chain
    ssl.keystore.certificate.chain=-----BEGIN…  # or both inline (Kafka's keys), instead of a
    ssl.keystore.key=-----BEGIN…                #   location
    ssl.key.password=…                          # only if the private key is encrypted
    ssl.truststore.type=PEM
    ssl.truststore.location=ca.pem              # CAs that sign client certificates, or inline
    ssl.truststore.certificates=-----BEGIN…     #   (without either: the system's CAs)
    ssl.client.authentication=NONE              # NONE | REQUESTED | REQUIRED
    ssl.client.auth=false                       # Confluent's older boolean (true = REQUIRED);
                                                #   Kafka's none|requested|required also read
    ssl.enabled.protocols=TLSv1.2,TLSv1.3       # a contiguous range
    ssl.cipher.suites=                          # OpenSSL names, TLS <= 1.2 (1.3 suites fixed)

Refused, with the reason: ``ssl.keystore.type`` / ``ssl.truststore.type`` other than PEM
(Python's ``ssl`` reads PEM only); ``ssl.keystore.password`` / ``ssl.truststore.password``
with PEM (a PEM key's password is ``ssl.key.password``); both a location and inline PEM.

Client side (:func:`client_context`) takes confluent-kafka's ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location`` and ``ssl.key.password`` and always checks
the server's certificate and host name.

A key's password is handed to OpenSSL through a callback, so OpenSSL never prompts on a
terminal; errors name keys and file paths, never a password or PEM text. Functions keep no
state and build a new context per call; thread-safe. A context may serve every connection.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Callable, Mapping
from typing import Final

from sluice.common.options import names, text
from sluice.schemas.errors import RegistryKeystoreError, RegistrySecurityConfigError

CLIENT_AUTH_KEY: Final = "ssl.client.authentication"
LEGACY_CLIENT_AUTH_KEY: Final = "ssl.client.auth"

_VERSIONS: Final = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH: Final = {
    "NONE": ssl.CERT_NONE,
    "REQUESTED": ssl.CERT_OPTIONAL,
    "REQUIRED": ssl.CERT_REQUIRED,
}
# ssl.client.auth: Confluent's boolean, or Kafka's broker values.
_LEGACY_CLIENT_AUTH: Final = {
    "false": "NONE",
    "true": "REQUIRED",
    "none": "NONE",
    "requested": "REQUESTED",
    "required": "REQUIRED",
}
_CONVERT: Final = (
    "Python's ssl reads PEM only: convert the store and set {key}=PEM (for example: keytool "
    "-importkeystore -srckeystore <jks> -destkeystore <p12> -deststoretype PKCS12, then "
    "openssl pkcs12 -in <p12> -out <pem>)"
)
_PEM_BLOCK: Final = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]+)-----(?P<body>.*?)-----END (?P=label)-----", re.DOTALL
)


def server_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The context of an ``https://`` listener; a PEM keystore is required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_ciphers(context, properties)
    _load_keystore(context, properties)
    auth = client_authentication(properties)
    context.verify_mode = _CLIENT_AUTH[auth]
    if auth != "NONE":
        _load_truststore(context, properties)
    return context


def client_authentication(properties: Mapping[str, str]) -> str:
    """``NONE``, ``REQUESTED`` or ``REQUIRED`` from either client-auth key (they must agree)."""
    found: dict[str, str] = {}
    value = text(properties, CLIENT_AUTH_KEY)
    if value is not None:
        if value.upper() not in _CLIENT_AUTH:
            raise RegistrySecurityConfigError(
                f"{CLIENT_AUTH_KEY}: expected NONE, REQUESTED or REQUIRED, found {value!r}"
            )
        found[CLIENT_AUTH_KEY] = value.upper()
    legacy = text(properties, LEGACY_CLIENT_AUTH_KEY)
    if legacy is not None:
        if legacy.lower() not in _LEGACY_CLIENT_AUTH:
            raise RegistrySecurityConfigError(
                f"{LEGACY_CLIENT_AUTH_KEY}: expected true, false, none, requested or required, "
                f"found {legacy!r}"
            )
        found[LEGACY_CLIENT_AUTH_KEY] = _LEGACY_CLIENT_AUTH[legacy.lower()]
    if len(set(found.values())) > 1:
        raise RegistrySecurityConfigError(
            f"{CLIENT_AUTH_KEY}={found[CLIENT_AUTH_KEY]} and {LEGACY_CLIENT_AUTH_KEY}="
            f"{legacy} disagree; set one of them"
        )
    return next(iter(found.values()), "NONE")


def client_context(
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """A client context that checks the server against ``ca_location`` (a PEM file or a
    directory; the system's CAs without it) and presents a certificate if one is given
    (``key_location`` may be omitted when the key is in the certificate file)."""
    try:
        if ca_location is None:
            context = ssl.create_default_context()
        elif os.path.isdir(ca_location):
            context = ssl.create_default_context(capath=ca_location)
        else:
            context = ssl.create_default_context(cafile=ca_location)
    except FileNotFoundError:
        raise RegistryKeystoreError(f"ssl.ca.location={ca_location}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise RegistryKeystoreError(
            f"ssl.ca.location={ca_location}: could not load CA certificates "
            f"({type(exc).__name__}); expected PEM"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if certificate_location is None:
        if key_location is not None or key_password is not None:
            raise RegistrySecurityConfigError(
                "ssl.certificate.location is required with ssl.key.location or ssl.key.password"
            )
        return context
    what = f"ssl.certificate.location={certificate_location}"
    if key_location is not None:
        what += f", ssl.key.location={key_location}"
    _load_chain(context, certificate_location, key_location, _password(key_password), what)
    return context


# --------------------------------------------------------------------------------------------
# Versions and ciphers
# --------------------------------------------------------------------------------------------


def _versions_and_ciphers(context: ssl.SSLContext, properties: Mapping[str, str]) -> None:
    enabled = names(properties, "ssl.enabled.protocols") or tuple(_VERSIONS)
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown:
        raise RegistrySecurityConfigError(
            f"ssl.enabled.protocols: expected some of {', '.join(_VERSIONS)} (older versions "
            f"are not offered), found {', '.join(unknown)}"
        )
    order = list(_VERSIONS)
    context.minimum_version = _VERSIONS[min(enabled, key=order.index)]
    context.maximum_version = _VERSIONS[max(enabled, key=order.index)]
    suites = names(properties, "ssl.cipher.suites")
    tls12 = [s for s in suites if not s.startswith("TLS_AES_") and not s.startswith("TLS_CHACHA")]
    for suite in tls12:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(suite)
        except ssl.SSLError:
            raise RegistrySecurityConfigError(
                f"ssl.cipher.suites: expected OpenSSL cipher names, found {suite!r} (OpenSSL "
                "does not know it)"
            ) from None
    if tls12:
        context.set_ciphers(":".join(tls12))


# --------------------------------------------------------------------------------------------
# Keystore and truststore
# --------------------------------------------------------------------------------------------


def _require_pem(properties: Mapping[str, str], key: str) -> None:
    store_type = (text(properties, key) or "JKS").upper()
    if store_type in ("JKS", "PKCS12", "BCFKS"):
        unset = "" if text(properties, key) else " (unset, Confluent's default)"
        raise RegistrySecurityConfigError(
            f"{key}: expected PEM, found {store_type}{unset}. " + _CONVERT.format(key=key)
        )
    if store_type != "PEM":
        raise RegistrySecurityConfigError(f"{key}: expected PEM, found {store_type!r}")


def _password(password: str | None) -> Callable[[], bytes]:
    def callback() -> bytes:
        # An empty password fails an encrypted key instead of prompting on the terminal.
        return (password or "").encode()

    return callback


def _load_keystore(context: ssl.SSLContext, properties: Mapping[str, str]) -> None:
    location = text(properties, "ssl.keystore.location")
    chain = text(properties, "ssl.keystore.certificate.chain")
    key = text(properties, "ssl.keystore.key")
    if location is None and chain is None and key is None:
        raise RegistrySecurityConfigError(
            "an https listener needs ssl.keystore.type=PEM and ssl.keystore.location (or "
            "ssl.keystore.certificate.chain and ssl.keystore.key)"
        )
    _require_pem(properties, "ssl.keystore.type")
    if text(properties, "ssl.keystore.password") is not None:
        raise RegistrySecurityConfigError(
            "ssl.keystore.password cannot be used with ssl.keystore.type=PEM: put the private "
            "key's password in ssl.key.password"
        )
    password = _password(properties.get("ssl.key.password"))
    if location is not None:
        if chain is not None or key is not None:
            raise RegistrySecurityConfigError(
                "set ssl.keystore.location, or ssl.keystore.certificate.chain and "
                "ssl.keystore.key, not both"
            )
        _load_chain(context, location, None, password, f"ssl.keystore.location={location}")
        return
    if chain is None or key is None:
        raise RegistrySecurityConfigError(
            "ssl.keystore.certificate.chain and ssl.keystore.key must be set together"
        )
    # Python's ssl loads keys from files only: write both to a private directory, load them,
    # and remove it at once.
    folder = tempfile.mkdtemp(prefix="sluice-registry-tls-")
    try:
        path = os.path.join(folder, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(_normalize_pem(key, "ssl.keystore.key"))
            file.write(_normalize_pem(chain, "ssl.keystore.certificate.chain"))
        _load_chain(context, path, None, password, "ssl.keystore.key/certificate.chain")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _load_chain(
    context: ssl.SSLContext,
    certificate: str,
    key: str | None,
    password: Callable[[], bytes],
    what: str,
) -> None:
    try:
        context.load_cert_chain(certificate, key, password=password)
    except FileNotFoundError:
        raise RegistryKeystoreError(f"{what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise RegistryKeystoreError(
            f"{what}: could not load the private key and certificate chain ({reason}); "
            "expected PEM with the key and its chain, and the key's password if it is encrypted"
        ) from None


def _load_truststore(context: ssl.SSLContext, properties: Mapping[str, str]) -> None:
    location = text(properties, "ssl.truststore.location")
    certificates = text(properties, "ssl.truststore.certificates")
    if location is None and certificates is None:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    _require_pem(properties, "ssl.truststore.type")
    if text(properties, "ssl.truststore.password") is not None:
        raise RegistrySecurityConfigError(
            "ssl.truststore.password cannot be used with ssl.truststore.type=PEM"
        )
    if location is not None and certificates is not None:
        raise RegistrySecurityConfigError(
            "set ssl.truststore.location or ssl.truststore.certificates, not both"
        )
    what = f"ssl.truststore.location={location}" if location else "ssl.truststore.certificates"
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        else:
            assert certificates is not None
            pem = _normalize_pem(certificates, "ssl.truststore.certificates")
            context.load_verify_locations(cadata=pem)
    except FileNotFoundError:
        raise RegistryKeystoreError(f"{what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise RegistryKeystoreError(
            f"{what}: could not load CA certificates ({type(exc).__name__}); expected PEM"
        ) from None


def _normalize_pem(value: str, key: str) -> str:
    """PEM blocks with their line breaks restored: a properties value continued over lines
    arrives as one line with spaces where the breaks were (Kafka's PEM reader tolerates it)."""
    blocks = []
    for match in _PEM_BLOCK.finditer(value):
        body = re.sub(r"\s+", "", match["body"])
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        label = match["label"]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise RegistryKeystoreError(f"{key}: expected PEM (-----BEGIN ...-----), found none")
    return "\n".join(blocks) + "\n"
