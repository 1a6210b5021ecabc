"""``RegistryClientConfig``: a registry client's URL, credentials and TLS from Confluent's keys.

The keys are those of confluent-kafka's ``SchemaRegistryClient`` and of Confluent's serdes;
each is read bare (``url``, as in ``SchemaRegistryClient({...})``) or with the
``schema.registry.`` prefix (``schema.registry.url``, as in a producer's or a Spark job's
options); the prefixed key wins:

=================================  ==========================================================
``url``                            ``http[s]://host:port``; one URL (failover lists refused)
``basic.auth.credentials.source``  ``USER_INFO``: ``basic.auth.user.info``; ``URL``: the
                                   ``user:password@`` of the URL; unset: ``USER_INFO`` when
                                   ``basic.auth.user.info`` is set, else ``URL``.
                                   ``SASL_INHERIT`` is refused (no SASL client here)
``basic.auth.user.info``           ``user:password``
``ssl.ca.location``                CA file (or directory) that signed the registry's
                                   certificate; unset: the system's CAs
``ssl.certificate.location``       client certificate (PEM), for ``ssl.client.authentication``
``ssl.key.location``               its private key, if not in the certificate file
``ssl.key.password``               the key's password, if it is encrypted
=================================  ==========================================================

``bearer.auth.*`` (OAuth) is refused. Percent-escapes in a URL's user info are decoded, as
confluent-kafka does. Nothing secret appears in an error, in ``repr`` or in :attr:`url`.
Immutable; thread-safe.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from sluice.common.options import text
from sluice.schemas import tls
from sluice.schemas.errors import RegistrySecurityConfigError

PREFIX = "schema.registry."
SOURCE_KEY = "basic.auth.credentials.source"
USER_INFO_KEY = "basic.auth.user.info"
SOURCES = ("URL", "USER_INFO", "SASL_INHERIT")


@dataclass(frozen=True)
class RegistryClientConfig:
    """Where the registry is (``url``, never with credentials) and how to reach it."""

    url: str
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @classmethod
    def from_url(
        cls,
        url: str,
        basic_auth: tuple[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> RegistryClientConfig:
        """``url`` with any ``user:password@`` moved into ``basic_auth`` (Confluent's ``URL``
        source); both at once is refused."""
        bare, in_url = split_user_info(url)
        if in_url is not None and basic_auth is not None:
            raise RegistrySecurityConfigError(
                "credentials given both in the registry URL and as basic.auth.user.info; remove one"
            )
        return cls(bare.rstrip("/"), in_url or basic_auth, ssl_context)

    @classmethod
    def from_config(cls, conf: Mapping[str, str]) -> RegistryClientConfig:
        """Read the keys above; raise :class:`RegistrySecurityConfigError` on a bad one."""

        def get(key: str) -> str | None:
            return text(conf, PREFIX + key) or text(conf, key)

        for key in ("bearer.auth.credentials.source", "bearer.auth.token"):
            if get(key) is not None:
                raise RegistrySecurityConfigError(
                    f"{key}: bearer (OAuth) authentication is not supported; use "
                    f"{SOURCE_KEY}=USER_INFO"
                )
        url = get("url")
        if url is None:
            raise RegistrySecurityConfigError(
                f"{PREFIX}url: expected the registry's URL, found none"
            )
        if "," in url:
            raise RegistrySecurityConfigError(
                f"{PREFIX}url: expected one URL (Sluice's client does not fail over), found "
                f"{url.count(',') + 1}"
            )
        user_info = get(USER_INFO_KEY)
        source = (get(SOURCE_KEY) or ("USER_INFO" if user_info else "URL")).upper()
        if source not in SOURCES:
            raise RegistrySecurityConfigError(
                f"{SOURCE_KEY}: expected URL or USER_INFO, found {source!r}"
            )
        if source == "SASL_INHERIT":
            raise RegistrySecurityConfigError(
                f"{SOURCE_KEY}=SASL_INHERIT is not supported (Sluice's registry client has no "
                f"SASL credentials to inherit); use USER_INFO with {USER_INFO_KEY}=user:password"
            )
        basic_auth = None
        if source == "USER_INFO":
            if user_info is None:
                raise RegistrySecurityConfigError(
                    f"{SOURCE_KEY}=USER_INFO needs {USER_INFO_KEY}=user:password"
                )
            name, colon, password = user_info.partition(":")
            if not colon or not name:
                raise RegistrySecurityConfigError(
                    f"{USER_INFO_KEY}: expected user:password, found a value without "
                    "'user:' (not shown)"
                )
            basic_auth = (name, password)
        elif user_info is not None:
            raise RegistrySecurityConfigError(
                f"{USER_INFO_KEY} is set but {SOURCE_KEY}=URL ignores it; set "
                f"{SOURCE_KEY}=USER_INFO or remove it"
            )
        context = None
        ca, certificate = get("ssl.ca.location"), get("ssl.certificate.location")
        key_location, key_password = get("ssl.key.location"), get("ssl.key.password")
        if any(v is not None for v in (ca, certificate, key_location, key_password)):
            context = tls.client_context(ca, certificate, key_location, key_password)
        return cls.from_url(url, basic_auth, context)


def split_user_info(url: str) -> tuple[str, tuple[str, str] | None]:
    """``(url without user info, (user, password) or None)``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    user_info, _, host = parts.netloc.rpartition("@")
    name, _, password = user_info.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, (urllib.parse.unquote(name), urllib.parse.unquote(password))
