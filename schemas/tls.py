"""TLS for the registry: its own key names on top of ``sluice.common.tls``.

The keystore, truststore, versions and ciphers keys are Kafka's PEM keys, read by
``sluice.common.tls`` exactly as the broker reads them::

    ssl.keystore.type=PEM                       # JKS (Confluent's default) and PKCS12 refused
    ssl.keystore.location=server.pem            # the private key and its certificate chain
    ssl.keystore.certificate.chain=-----BEGIN…  # or both inline (Kafka's keys), instead of a
    ssl.keystore.key=-----BEGIN…                #   location
    ssl.key.password=…                          # only if the private key is encrypted
    ssl.truststore.type=PEM
    ssl.truststore.location=ca.pem              # CAs that sign client certificates, or inline
    ssl.truststore.certificates=-----BEGIN…     #   (without either: the system's CAs)
    ssl.enabled.protocols=TLSv1.2,TLSv1.3       # a contiguous range; no older versions here
    ssl.cipher.suites=                          # IANA or OpenSSL names, TLS <= 1.2

What is the registry's own (Confluent's rest-utils):

* ``ssl.client.authentication=NONE|REQUESTED|REQUIRED``, and the older boolean
  ``ssl.client.auth=true|false`` (Kafka's ``none|requested|required`` also read); the two
  must agree (:func:`client_authentication`);
* an unset store type is "Confluent's default" (JKS) in the error;
* TLS 1.0 and 1.1 are not offered, whatever ``ssl.enabled.protocols`` says.

Client side (:func:`client_context`) takes confluent-kafka's ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location`` and ``ssl.key.password`` and always checks
the server's certificate and host name.

``sluice.common.tls``'s errors come out as the registry's: ``TlsConfigError`` as
``RegistrySecurityConfigError``, ``KeystoreError`` as ``RegistryKeystoreError``, with the
same message (keys and file paths, never a password or PEM text). Functions keep no state
and build a new context per call; thread-safe. A context may serve every connection.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator, Mapping
from typing import Final

from sluice.common import tls
from sluice.common.options import names, text
from sluice.schemas.errors import RegistryKeystoreError, RegistrySecurityConfigError

CLIENT_AUTH_KEY: Final = "ssl.client.authentication"
LEGACY_CLIENT_AUTH_KEY: Final = "ssl.client.auth"

_OFFERED_VERSIONS: Final = ("TLSv1.2", "TLSv1.3")
_CLIENT_AUTH: Final = ("NONE", "REQUESTED", "REQUIRED")
# ssl.client.auth: Confluent's boolean, or Kafka's broker values.
_LEGACY_CLIENT_AUTH: Final = {
    "false": "NONE",
    "true": "REQUIRED",
    "none": "NONE",
    "requested": "REQUESTED",
    "required": "REQUIRED",
}


@contextlib.contextmanager
def _as_registry_errors() -> Iterator[None]:
    try:
        yield
    except tls.KeystoreError as exc:
        raise RegistryKeystoreError(str(exc)) from None
    except tls.TlsConfigError as exc:
        raise RegistrySecurityConfigError(str(exc)) from None


def server_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The context of an ``https://`` listener; a PEM keystore is required."""
    enabled = names(properties, "ssl.enabled.protocols")
    older = [v for v in enabled if v not in _OFFERED_VERSIONS]
    if older:
        raise RegistrySecurityConfigError(
            f"ssl.enabled.protocols: expected some of {', '.join(_OFFERED_VERSIONS)} (older "
            f"versions are not offered), found {', '.join(older)}"
        )
    auth = client_authentication(properties)
    with _as_registry_errors():
        return tls.server_context(
            properties,
            client_auth=auth.lower(),
            listener="an https listener",
            store_default="Confluent's default",
        )


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
    with _as_registry_errors():
        return tls.location_client_context(
            ca_location, certificate_location, key_location, key_password
        )
