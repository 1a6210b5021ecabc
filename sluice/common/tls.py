"""TLS contexts from Kafka's ``ssl.*`` keys, for every Sluice server and client.

The one place where configuration keys become an ``ssl.SSLContext``: the broker's listeners
and inter-broker links (``sluice.broker.security.tls``), the schema registry's HTTPS listener
and its clients (``sluice.schemas.tls``), and Sluice's own Kafka clients. Callers add only
their own key names on top (the registry's ``ssl.client.authentication``; the broker's
``listener.name.<l>.`` prefix).

Keys read by :func:`server_context` and :func:`client_context` (Kafka's, Java client and
broker alike)::

    ssl.keystore.type                       PEM (Kafka's default, JKS, and PKCS12 / BCFKS are
                                            refused: convert them to PEM)
    ssl.keystore.location                   a PEM file with the private key and the chain
    ssl.keystore.certificate.chain +        the chain and the PKCS#8 key inline (line breaks
    ssl.keystore.key                        may be lost to properties continuations)
    ssl.key.password                        the private key's password, if it is encrypted
    ssl.truststore.type                     PEM
    ssl.truststore.location /               CA certificates in a file, or inline; without
    ssl.truststore.certificates             either, the system's default CAs (Java's cacerts)
    ssl.client.auth                         none | requested | required (server; a caller
                                            may pass its own reading instead)
    ssl.enabled.protocols                   default TLSv1.2,TLSv1.3; a contiguous range
    ssl.protocol                            default TLSv1.3; caps the highest version
    ssl.cipher.suites                       IANA (Java) or OpenSSL names, TLS <= 1.2 only
    ssl.endpoint.identification.algorithm   https (default: check the server's name) or
                                            empty (client side)

:func:`location_client_context` takes librdkafka's (confluent-kafka's) client keys instead:
``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``.

Where Python's ``ssl`` differs from the JVM, and what Sluice does:

* TLS 1.3 cipher suites cannot be restricted in Python's ``ssl``: the TLS 1.3 names in
  ``ssl.cipher.suites`` are accepted and the TLS 1.3 suites stay OpenSSL's defaults.
* Kafka insists that a PEM keystore *file* has an encrypted key and ``ssl.key.password``;
  Sluice also accepts an unencrypted key (no password).
* A password is always supplied through a callback, so OpenSSL never prompts on a terminal.
* ``ssl.keystore.password`` / ``ssl.truststore.password`` are refused with PEM, as Kafka
  refuses them.
* Zero-copy ``sendfile`` cannot cross a TLS transport (no kTLS in Python's ``ssl``): a server
  must copy file bytes through the TLS layer.

:func:`certificate_subject` reads a DER certificate's subject in RFC 2253 form as Java's
``X500Principal.getName()`` writes it — RDNs from last to first, ``CN, L, ST, O, OU, C,
STREET, DC, UID`` by keyword and other attributes as ``<oid>=#<hex DER>``, ``, = + < > # ;
" \\`` escaped with a backslash, leading and trailing spaces escaped — with a small parser
here, so no third-party package is needed. Kafka's default principal of a TLS peer is
``User:`` and that subject.

Errors, one family (:class:`TlsError`): :class:`TlsConfigError` for keys that are missing,
unknown or contradictory; :class:`KeystoreError` when a file or inline PEM cannot be loaded.
Neither quotes a password, a key or PEM text; keys and file paths are named.

Functions build a new context per call and keep no state; thread-safe. The returned
``SSLContext`` may be shared by every connection of a listener.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from sluice.common.options import names, text

__all__ = [
    "TlsError",
    "TlsConfigError",
    "KeystoreError",
    "CLIENT_AUTH",
    "server_context",
    "client_context",
    "location_client_context",
    "certificate_subject",
    "normalize_pem",
]


class TlsError(ValueError):
    """Base of the TLS configuration errors; names keys and paths, never a secret."""


class TlsConfigError(TlsError):
    """The ``ssl.*`` keys do not describe a usable TLS setup (missing, unknown, contradictory)."""


class KeystoreError(TlsError):
    """A keystore or truststore could not be read (missing file, not PEM, wrong key password)."""


_VERSIONS: Final = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_ORDER: Final = list(_VERSIONS)
# ssl.protocol → the highest version it allows (Java's SSLContext.getInstance(protocol)).
_PROTOCOL_CAP: Final = {"TLS": "TLSv1.3", **{v: v for v in _VERSIONS}}
#: ``ssl.client.auth`` values (Kafka's) → the server's verify mode.
CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
# IANA (Java) names of the TLS <= 1.2 suites in common use → OpenSSL names.
_IANA_TO_OPENSSL: Final = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}
_TLS13_SUITES: Final = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_CONVERTIBLE: Final = ("JKS", "PKCS12", "BCFKS")
_CONVERT: Final = (
    "Python's ssl reads PEM only: convert it to PEM and set {key}=PEM (for example: keytool "
    "-importkeystore -srckeystore <jks> -destkeystore <p12> -deststoretype PKCS12, then "
    "openssl pkcs12 -in <p12> -out <pem>)"
)


def server_context(
    properties: Mapping[str, str],
    *,
    client_auth: str | None = None,
    listener: str = "an SSL listener",
    store_default: str = "Kafka's default",
) -> ssl.SSLContext:
    """The context of a TLS listener; a keystore is required.

    ``client_auth`` (``none`` | ``requested`` | ``required``) overrides ``ssl.client.auth``
    for callers with their own key; ``listener`` names the listener in the missing-keystore
    error; ``store_default`` says whose default an unset store type is (JKS).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_ciphers(context, properties)
    if not _load_keystore(context, properties, store_default):
        raise TlsConfigError(
            f"{listener} needs ssl.keystore.type=PEM and ssl.keystore.location (or "
            "ssl.keystore.certificate.chain and ssl.keystore.key)"
        )
    auth = (client_auth or text(properties, "ssl.client.auth") or "none").lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(
            f"ssl.client.auth: expected none, requested or required, found {auth!r}"
        )
    context.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        _load_truststore(context, properties, ssl.Purpose.CLIENT_AUTH, store_default)
    return context


def client_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The context of a client with Kafka's (Java) keys — inter-broker links, tests: verifies
    the server; presents a certificate if a keystore is configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions_and_ciphers(context, properties)
    algorithm = properties.get("ssl.endpoint.identification.algorithm", "https").strip()
    if algorithm.lower() not in ("https", ""):
        raise TlsConfigError(
            f"ssl.endpoint.identification.algorithm: expected https or empty, found {algorithm!r}"
        )
    context.check_hostname = algorithm.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, properties, ssl.Purpose.SERVER_AUTH, "Kafka's default")
    _load_keystore(context, properties, "Kafka's default")
    return context


def location_client_context(
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """A client context from librdkafka's keys: checks the server and its host name against
    ``ca_location`` (a PEM file or a directory; the system's CAs without it) and presents a
    certificate if one is given (``key_location`` may be omitted when the key is in the
    certificate file). TLS 1.2 at least."""
    try:
        if ca_location is None:
            context = ssl.create_default_context()
        elif os.path.isdir(ca_location):
            context = ssl.create_default_context(capath=ca_location)
        else:
            context = ssl.create_default_context(cafile=ca_location)
    except FileNotFoundError:
        raise KeystoreError(f"ssl.ca.location={ca_location}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise KeystoreError(
            f"ssl.ca.location={ca_location}: could not load CA certificates "
            f"({type(exc).__name__}); expected PEM"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if certificate_location is None:
        if key_location is not None or key_password is not None:
            raise TlsConfigError(
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
    enabled = names(properties, "ssl.enabled.protocols") or ("TLSv1.2", "TLSv1.3")
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown:
        raise TlsConfigError(
            f"ssl.enabled.protocols: expected some of {', '.join(_ORDER)}, found "
            f"{', '.join(unknown)}"
        )
    indexes = sorted({_ORDER.index(v) for v in enabled})
    if indexes != list(range(indexes[0], indexes[-1] + 1)):
        raise TlsConfigError(
            "ssl.enabled.protocols: expected a contiguous range of versions (Python's ssl "
            f"sets a minimum and a maximum), found {', '.join(enabled)}"
        )
    protocol = text(properties, "ssl.protocol") or "TLSv1.3"
    if protocol not in _PROTOCOL_CAP:
        raise TlsConfigError(
            f"ssl.protocol: expected TLS or one of {', '.join(_ORDER)}, found {protocol!r}"
        )
    high = min(indexes[-1], _ORDER.index(_PROTOCOL_CAP[protocol]))
    if high < indexes[0]:
        raise TlsConfigError(
            f"ssl.protocol={protocol} excludes every version of ssl.enabled.protocols"
        )
    context.minimum_version = _VERSIONS[_ORDER[indexes[0]]]
    context.maximum_version = _VERSIONS[_ORDER[high]]

    suites = names(properties, "ssl.cipher.suites")
    openssl = [_IANA_TO_OPENSSL.get(s, s) for s in suites if s not in _TLS13_SUITES]
    if openssl:
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        for name in openssl:
            try:
                probe.set_ciphers(name)
            except ssl.SSLError:
                raise TlsConfigError(
                    f"ssl.cipher.suites: expected IANA or OpenSSL names, found {name!r}, "
                    "not a cipher suite OpenSSL knows"
                ) from None
        context.set_ciphers(":".join(openssl))


# --------------------------------------------------------------------------------------------
# Keystore and truststore
# --------------------------------------------------------------------------------------------


def _require_pem(properties: Mapping[str, str], key: str, store_default: str) -> None:
    given = text(properties, key)
    store_type = (given or "JKS").upper()
    if store_type in _CONVERTIBLE:
        unset = "" if given else f" (unset, {store_default})"
        raise TlsConfigError(
            f"{key}: expected PEM, found {store_type}{unset}. " + _CONVERT.format(key=key)
        )
    if store_type != "PEM":
        raise TlsConfigError(f"{key}: expected PEM, found {store_type!r}")


def _password(password: str | None) -> Callable[[], bytes]:
    def callback() -> bytes:
        # An empty password fails an encrypted key instead of prompting on the terminal.
        return (password or "").encode()

    return callback


def _load_keystore(
    context: ssl.SSLContext, properties: Mapping[str, str], store_default: str
) -> bool:
    """Load the key and chain if any is configured; whether one was."""
    location = text(properties, "ssl.keystore.location")
    chain = text(properties, "ssl.keystore.certificate.chain")
    key = text(properties, "ssl.keystore.key")
    if location is None and chain is None and key is None:
        if text(properties, "ssl.keystore.password") is not None:
            raise TlsConfigError("ssl.keystore.password is set but no keystore is")
        return False
    _require_pem(properties, "ssl.keystore.type", store_default)
    if text(properties, "ssl.keystore.password") is not None:
        raise TlsConfigError(
            "ssl.keystore.password cannot be used with ssl.keystore.type=PEM: put the private "
            "key's password in ssl.key.password"
        )
    password = _password(properties.get("ssl.key.password"))
    if location is not None:
        if chain is not None or key is not None:
            raise TlsConfigError(
                "set ssl.keystore.location, or ssl.keystore.certificate.chain and "
                "ssl.keystore.key, not both"
            )
        _load_chain(context, location, None, password, f"ssl.keystore.location={location}")
        return True
    if chain is None or key is None:
        raise TlsConfigError(
            "ssl.keystore.certificate.chain and ssl.keystore.key must be set together"
        )
    # Python's ssl loads keys from files only: write both to a private directory, load, and
    # remove it at once.
    folder = tempfile.mkdtemp(prefix="sluice-tls-")
    try:
        os.chmod(folder, 0o700)
        path = os.path.join(folder, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(normalize_pem(key, "ssl.keystore.key"))
            file.write(normalize_pem(chain, "ssl.keystore.certificate.chain"))
        _load_chain(context, path, None, password, "ssl.keystore.key/certificate.chain")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return True


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
        raise KeystoreError(f"{what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise KeystoreError(
            f"{what}: could not load the private key and certificate chain ({reason}); "
            "expected PEM with the key and its chain, and the key's password in "
            "ssl.key.password if it is encrypted"
        ) from None


def _load_truststore(
    context: ssl.SSLContext,
    properties: Mapping[str, str],
    purpose: ssl.Purpose,
    store_default: str,
) -> None:
    location = text(properties, "ssl.truststore.location")
    certificates = text(properties, "ssl.truststore.certificates")
    if location is None and certificates is None:
        context.load_default_certs(purpose)
        return
    _require_pem(properties, "ssl.truststore.type", store_default)
    if text(properties, "ssl.truststore.password") is not None:
        raise TlsConfigError("ssl.truststore.password cannot be used with ssl.truststore.type=PEM")
    if location is not None and certificates is not None:
        raise TlsConfigError("set ssl.truststore.location or ssl.truststore.certificates, not both")
    what = f"ssl.truststore.location={location}" if location else "ssl.truststore.certificates"
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        else:
            assert certificates is not None
            context.load_verify_locations(
                cadata=normalize_pem(certificates, "ssl.truststore.certificates")
            )
    except FileNotFoundError:
        raise KeystoreError(f"{what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise KeystoreError(
            f"{what}: could not load CA certificates ({type(exc).__name__}); expected PEM"
        ) from None


_PEM_BLOCK: Final = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]+)-----(?P<body>.*?)-----END (?P=label)-----", re.DOTALL
)


def normalize_pem(value: str, key: str) -> str:
    """PEM blocks with their line breaks restored: a properties value continued over lines
    arrives as one line with spaces where the breaks were (Kafka's PEM reader tolerates it)."""
    blocks = []
    for match in _PEM_BLOCK.finditer(value):
        body = re.sub(r"\s+", "", match["body"])
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        label = match["label"]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise KeystoreError(f"{key}: expected PEM (-----BEGIN ...-----), found none")
    return "\n".join(blocks) + "\n"


# --------------------------------------------------------------------------------------------
# The subject of a DER certificate
# --------------------------------------------------------------------------------------------


_KEYWORDS: Final = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types → Python codec
_STRINGS: Final = {
    0x0C: "utf-8",  # UTF8String
    0x13: "ascii",  # PrintableString
    0x14: "latin-1",  # TeletexString (Java reads it as ISO-8859-1)
    0x16: "ascii",  # IA5String
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPED: Final = ',=+<>#;"\\'


def certificate_subject(der: bytes) -> str:
    """The subject of a DER certificate as ``X500Principal.getName()`` (RFC 2253) writes it."""
    try:
        certificate = _children(der, *_tlv(der, 0)[1:])
        tbs = next(certificate)
        fields = list(_children(der, tbs[1], tbs[2]))
        if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
            fields = fields[1:]
        subject = fields[4]  # serialNumber, signature, issuer, validity, subject
        rdns = []
        for rdn in _children(der, subject[1], subject[2]):
            avas = [_ava(der, ava) for ava in _children(der, rdn[1], rdn[2])]
            rdns.append("+".join(avas))
        return ",".join(reversed(rdns))
    except (IndexError, StopIteration, ValueError) as exc:
        raise KeystoreError(f"the peer certificate is not valid DER ({exc})") from None


def _ava(der: bytes, ava: tuple[int, int, int]) -> str:
    (oid_tag, oid_start, oid_end), value = list(_children(der, ava[1], ava[2]))
    if oid_tag != 0x06:
        raise ValueError("expected an OID in an attribute")
    oid = _oid(der[oid_start:oid_end])
    tag, start, end = value
    keyword = _KEYWORDS.get(oid)
    codec = _STRINGS.get(tag)
    if keyword is None or codec is None:
        header = _header_length(der, start, end)
        return f"{keyword or oid}=#{der[start - header : end].hex()}"
    return f"{keyword}={_escape(der[start:end].decode(codec))}"


def _escape(value: str) -> str:
    n = len(value)
    lead = n - len(value.lstrip(" "))
    trail = n - len(value.rstrip(" ")) if lead < n else 0
    out = []
    for i, c in enumerate(value):
        if c == "\x00":
            out.append("\\00")
        elif c in _ESCAPED or (c == " " and (i < lead or i >= n - trail)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _tlv(data: bytes, i: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``i``."""
    tag = data[i]
    length = data[i + 1]
    i += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[i : i + count], "big")
        i += count
    if i + length > len(data):
        raise ValueError("DER element longer than its container")
    return tag, i, i + length


def _header_length(data: bytes, start: int, end: int) -> int:
    length = end - start
    if length < 0x80:
        return 2
    return 2 + (length.bit_length() + 7) // 8


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    i = start
    while i < end:
        element = _tlv(data, i)
        yield element
        i = element[2]


def _oid(data: bytes) -> str:
    parts: list[int] = []
    value = 0
    for byte in data:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    if not parts:
        raise ValueError("empty OID")
    first = parts[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(p) for p in [*head, *parts[1:]])
