"""The client half of a broker's inter-broker security: what a follower's fetcher and the
transaction marker channel present to another broker, sans-IO.

**Settings** (:func:`inter_broker_security`), read as Kafka's inter-broker client reads them
from the broker's own config, for the inter-broker listener ``<l>`` (name lower case in keys):

* TLS (``SSL`` / ``SASL_SSL``): the ``ssl.*`` keys with ``listener.name.<l>.ssl.*`` laid over
  them (``sluice.broker.security.tls.listener_properties``, Kafka's
  ``valuesWithPrefixOverride``); the SSLContext is ``sluice.common.tls.client_context`` of
  them: it trusts ``ssl.truststore.*`` (PEM) and presents the broker's own keystore when the
  other broker asks for a certificate (``ssl.client.auth``). A truststore is required: the
  brokers' certificates are checked against it (Kafka would fall back to the JVM's CAs; a
  cluster's own CA is never among those, so Sluice refuses to start instead).
* SASL (``SASL_PLAINTEXT`` / ``SASL_SSL``): the mechanism is
  ``sasl.mechanism.inter.broker.protocol`` — Kafka's default is GSSAPI, which Sluice does not
  speak, so it must be set to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 and be enabled on the
  listener; the login is the ``username`` / ``password`` options of the listener's JAAS line
  for that mechanism (``listener.name.<l>.<mechanism>.sasl.jaas.config``, else
  ``sasl.jaas.config``; ``sluice.broker.security.jaas.jaas_config_for_listener``).

Any of these missing or wrong raises :class:`InterBrokerConfigError` naming the key (the
broker maps it to ``ConfigError`` and refuses to start).

**The SASL exchange** (:class:`SaslClientExchange`), Kafka's client side of SaslHandshake v1 +
SaslAuthenticate: the handshake names the mechanism (:func:`check_handshake`), then tokens go
out in SaslAuthenticate requests until the mechanism completes — PLAIN one message (RFC 4616,
``plain.encode_plain_message``), SCRAM two with the server's signature checked at the end
(``scram.ScramClient``). A refused exchange raises :class:`InterBrokerAuthenticationError`
(the server's own message: never a secret; Kafka's server never says which part was wrong)
or :class:`UnsupportedSaslMechanismError`.

Neither the settings' ``repr`` nor any error shows a password or a token. Immutable settings
(thread-safe); one exchange per connection, not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Final

from sluice.broker.protocol.errors import Errors
from sluice.common.options import text

from .errors import SaslError, SaslStateError, SecurityError
from .jaas import jaas_config_for_listener
from .plain import encode_plain_message
from .scram import ScramClient
from .scram_credential import ScramMechanism
from .tls import listener_properties

__all__ = [
    "INTER_BROKER_MECHANISM_KEY",
    "InterBrokerConfigError",
    "InterBrokerAuthenticationError",
    "UnsupportedSaslMechanismError",
    "SaslLogin",
    "InterBrokerSecurity",
    "inter_broker_security",
    "SaslClientExchange",
    "check_handshake",
    "check_authenticate",
]

INTER_BROKER_MECHANISM_KEY: Final = "sasl.mechanism.inter.broker.protocol"
#: The mechanisms this client speaks (the ones the broker serves).
CLIENT_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_TLS_PROTOCOLS: Final = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS: Final = ("SASL_PLAINTEXT", "SASL_SSL")


class InterBrokerConfigError(SecurityError):
    """The broker's config does not say how to reach the other brokers securely (no
    truststore, no mechanism or a GSSAPI one, no JAAS login); names the key."""


class InterBrokerAuthenticationError(SaslError):
    """Another broker refused this broker's SASL login (wrong password, unknown user) or sent
    an answer the mechanism cannot accept. Carries the server's message, never a secret."""


class UnsupportedSaslMechanismError(SaslError):
    """The other broker's listener does not enable the inter-broker mechanism."""

    code: ClassVar[Errors] = Errors.UNSUPPORTED_SASL_MECHANISM


@dataclass(frozen=True)
class SaslLogin:
    """Who this broker logs in as, with which mechanism, and the key the login came from."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    #: the configuration key of the JAAS line (for messages)
    source: str = ""


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How this broker connects to the others: the inter-broker listener's protocol, its TLS
    keys (``None``: plaintext) and its SASL login (``None``: no SASL)."""

    listener: str
    protocol: str
    #: the ``ssl.*`` keys with the listener's overrides applied (secrets: not in repr)
    tls_properties: Mapping[str, str] | None = field(default=None, repr=False)
    sasl: SaslLogin | None = None

    @property
    def uses_tls(self) -> bool:
        return self.tls_properties is not None


def _listener_key(listener: str, key: str) -> str:
    return f"listener.name.{listener.lower()}.{key}"


def inter_broker_security(
    properties: Mapping[str, str],
    listener: str,
    protocol: str,
    enabled_mechanisms: Sequence[str] = CLIENT_MECHANISMS,
) -> InterBrokerSecurity:
    """The settings of the inter-broker listener ``listener`` (security ``protocol``) from a
    broker's ``properties``; ``enabled_mechanisms`` are the listener's
    (``sasl.enabled.mechanisms``). Raises :class:`InterBrokerConfigError` (see the module
    docstring)."""
    tls_properties = None
    if protocol in _TLS_PROTOCOLS:
        merged = listener_properties(properties, listener)
        if not (
            text(merged, "ssl.truststore.location") or text(merged, "ssl.truststore.certificates")
        ):
            raise InterBrokerConfigError(
                f"ssl.truststore.location: the inter-broker listener {listener} is {protocol}: "
                f"expected a truststore (ssl.truststore.location or "
                f"ssl.truststore.certificates, or their {_listener_key(listener, 'ssl.')}* "
                "form) holding the CA of the brokers' certificates, found none"
            )
        tls_properties = MappingProxyType({k: v for k, v in merged.items() if k.startswith("ssl.")})
    sasl = None
    if protocol in _SASL_PROTOCOLS:
        sasl = _sasl_login(properties, listener, protocol, enabled_mechanisms)
    return InterBrokerSecurity(listener, protocol, tls_properties, sasl)


def _sasl_login(
    properties: Mapping[str, str], listener: str, protocol: str, enabled: Sequence[str]
) -> SaslLogin:
    mechanism = (text(properties, INTER_BROKER_MECHANISM_KEY) or "").upper()
    if not mechanism:
        raise InterBrokerConfigError(
            f"{INTER_BROKER_MECHANISM_KEY}: the inter-broker listener {listener} is {protocol}: "
            f"expected one of {', '.join(CLIENT_MECHANISMS)}, found it unset (Kafka's "
            "default, GSSAPI, is not supported)"
        )
    if mechanism not in CLIENT_MECHANISMS:
        raise InterBrokerConfigError(
            f"{INTER_BROKER_MECHANISM_KEY}: expected one of {', '.join(CLIENT_MECHANISMS)}, "
            f"found {mechanism}"
        )
    if mechanism not in enabled:
        raise InterBrokerConfigError(
            f"{INTER_BROKER_MECHANISM_KEY}={mechanism}: expected a mechanism enabled on the "
            f"inter-broker listener {listener} (sasl.enabled.mechanisms), found "
            f"{', '.join(enabled)}"
        )
    key = _listener_key(listener, f"{mechanism.lower()}.sasl.jaas.config")
    source = jaas_config_for_listener(properties, listener, mechanism)  # JaasConfigError: a key
    if source is None:
        raise InterBrokerConfigError(
            f"{key}: the inter-broker listener {listener} logs in with {mechanism}: expected "
            "a JAAS line with username and password options (or sasl.jaas.config), found none"
        )
    missing = [name for name in ("username", "password") if not source.entry.options.get(name)]
    if missing:
        raise InterBrokerConfigError(
            f"{source.key}: the inter-broker login with {mechanism} needs the "
            f"{' and '.join(missing)} option{'s' if len(missing) > 1 else ''}, found "
            f"{', '.join(sorted(source.entry.options)) or 'no options'}"
        )
    username, password = source.entry.options["username"], source.entry.options["password"]
    return SaslLogin(mechanism, username, password, source.key)


def check_handshake(mechanism: str, error_code: int, mechanisms: Sequence[str], peer: str) -> None:
    """A SaslHandshake answer: ``UnsupportedSaslMechanismError`` unless it accepted
    ``mechanism``."""
    if error_code == Errors.UNSUPPORTED_SASL_MECHANISM:
        raise UnsupportedSaslMechanismError(
            f"{peer}: expected the listener to enable {mechanism}, found "
            f"{', '.join(mechanisms) or 'none'}"
        )
    if error_code != Errors.NONE:
        raise InterBrokerAuthenticationError(
            f"{peer}: SaslHandshake for {mechanism} answered with error code {error_code}"
        )


def check_authenticate(error_code: int, error_message: str | None, peer: str, user: str) -> None:
    """A SaslAuthenticate answer: ``InterBrokerAuthenticationError`` with the server's message
    unless it carries no error."""
    if error_code != Errors.NONE:
        raise InterBrokerAuthenticationError(
            f"{peer}: SASL authentication as {user!r} failed (error code {error_code}): "
            f"{error_message or 'no message'}"
        )


class SaslClientExchange:
    """One login's SASL tokens: :meth:`first_token`, then :meth:`respond` to each server
    answer until it returns ``None`` (complete)."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self.complete = False
        self._scram: ScramClient | None = None
        self._sent_first = False
        self._final_sent = False
        if login.mechanism != "PLAIN":
            scram = ScramMechanism.by_name(login.mechanism)
            if scram is None:  # inter_broker_security admits only the three
                raise InterBrokerConfigError(
                    f"{INTER_BROKER_MECHANISM_KEY}: expected one of "
                    f"{', '.join(CLIENT_MECHANISMS)}, found {login.mechanism}"
                )
            self._scram = ScramClient(scram, login.username, login.password)

    def __repr__(self) -> str:
        return f"SaslClientExchange({self.login.mechanism}, user={self.login.username!r})"

    def first_token(self) -> bytes:
        if self._sent_first:
            raise SaslStateError("first_token called twice on one SASL exchange")
        self._sent_first = True
        if self._scram is None:
            return encode_plain_message(self.login.username, self.login.password)
        return self._scram.first_message()

    def respond(self, server_token: bytes) -> bytes | None:
        """The next token answering ``server_token``, or ``None`` once the exchange is
        complete. Raises ``InterBrokerAuthenticationError`` for a server answer the
        mechanism refuses (a foreign nonce, a wrong server signature)."""
        if not self._sent_first or self.complete:
            raise SaslStateError("no SASL token expected now")
        if self._scram is None:  # PLAIN: the server's (empty) answer ends it
            self.complete = True
            return None
        try:
            if self._final_sent:
                self._scram.verify_server_final(server_token)
                self.complete = True
                return None
            self._final_sent = True
            return self._scram.final_message(server_token)
        except SaslError as exc:
            raise InterBrokerAuthenticationError(
                f"SCRAM exchange as {self.login.username!r} refused the server's answer: {exc}"
            ) from None
