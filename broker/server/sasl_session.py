"""``SaslSession``: one connection's SASL exchange (SaslHandshake, SaslAuthenticate), and
``ListenerAuth``, a SASL listener's mechanisms and PLAIN users.

Authentication is the connection's business, not a handler's: the connection loop
(``sluice.broker.server.connection``) keeps one :class:`SaslSession` per connection of a
``SASL_PLAINTEXT`` / ``SASL_SSL`` listener and hands it the two SASL requests; until the
session is authenticated it lets through only ApiVersions, SaslHandshake and
SaslAuthenticate and closes the connection on any other request, as Kafka's
``SaslServerAuthenticator`` does. The exchange, as Kafka runs it:

1. SaslHandshake names a mechanism. One not enabled on the listener is answered
   UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes. v0 means
   the SASL tokens follow as bare size-prefixed frames (Kafka 0.10's framing,
   :meth:`SaslSession.legacy_token`); v1 wraps them in SaslAuthenticate.
2. SaslAuthenticate carries the tokens: PLAIN's one message, checked against the listener's
   ``user_<name>`` JAAS options (``PlainAuthenticator``), or SCRAM's two, answered by a
   ``ScramServer`` over the broker's ``ScramStore``. A ``SaslError`` is answered with its
   code (SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE) and its message — written for the
   client: it never says whether the user exists — and the connection closes.
3. Success makes the principal ``User:<name>``. ``session_lifetime_ms`` is 0: Sluice does not
   re-authenticate (KIP-368); a ``connections.max.reauth.ms`` > 0 is warned about at start.

Tokens are never logged; a failure is logged with the listener, the peer, the mechanism and
the error class only.

Invariants: the state only moves forward (HANDSHAKE → AUTHENTICATE → AUTHENTICATED, or to
FAILED from any of them, after which ``close_after_response`` is set and the connection
closes once the answer is sent); ``principal`` is set only on success.

Thread-safety: one session per connection, used from that connection's task only;
:meth:`SaslSession.authenticate` may block on the credential store, so the connection runs it
off the event loop.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Final

from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest

from sluice.broker.config import BrokerConfig, ConfigError, Listener, sasl_mechanisms
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.errors import SaslError, SaslStateError
from sluice.broker.security.jaas import jaas_config_for_listener
from sluice.broker.security.plain import PlainAuthenticator
from sluice.broker.security.scram import ScramServer
from sluice.broker.security.scram_credential import ScramCredential, ScramMechanism
from sluice.broker.security.scram_store import ScramStore
from sluice.broker.server.responses import respond
from sluice.common.jaas import JaasConfigError

log = logging.getLogger(__name__)

# The API keys, from Kafka's message definitions (kio), until ApiKey lists them.
SASL_HANDSHAKE: Final = int(SaslHandshakeRequest.__api_key__)
SASL_AUTHENTICATE: Final = int(SaslAuthenticateRequest.__api_key__)
SASL_API_KEYS: Final = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})


@dataclass(frozen=True)
class ListenerAuth:
    """A SASL listener's mechanisms and PLAIN users, read once at start."""

    listener: Listener
    mechanisms: tuple[str, ...]
    plain: PlainAuthenticator | None

    @classmethod
    def build(cls, config: BrokerConfig, listener: Listener) -> ListenerAuth:
        """Raises ``ConfigError`` for a JAAS line Kafka would refuse, or PLAIN without one."""
        props = config.security_properties
        mechanisms = sasl_mechanisms(props, listener.name)
        plain = None
        if "PLAIN" in mechanisms:
            try:
                source = jaas_config_for_listener(props, listener.name, "PLAIN")
            except JaasConfigError as exc:
                raise ConfigError(str(exc)) from None
            if source is None or not source.entry.plain_users:
                raise ConfigError(
                    f'listener {listener} enables PLAIN: expected user_<name>="<password>" '
                    f"options in listener.name.{listener.name.lower()}.plain.sasl.jaas.config "
                    "(or sasl.jaas.config), found none"
                )
            plain = PlainAuthenticator(source.entry.plain_users)
        return cls(listener, mechanisms, plain)


class SaslState(enum.Enum):
    HANDSHAKE = "expecting SaslHandshake"
    AUTHENTICATE = "expecting SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslSession:
    """One connection's SASL exchange. See the module docstring."""

    def __init__(
        self,
        auth: ListenerAuth,
        store: ScramStore,
        fake_salt_key: bytes,
        peer: str,
    ) -> None:
        self.auth = auth
        self._store = store
        self._fake_salt_key = fake_salt_key
        self._peer = peer
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        #: SaslHandshake v0: the tokens follow as bare frames
        self.legacy_tokens = False
        #: the last answer was a failure: send it, then close the connection
        self.close_after_response = False
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.AUTHENTICATED

    def handshake(self, request: Request) -> bytes:
        """Answer a SaslHandshake."""
        mechanism = str(request.body.mechanism)
        enabled = list(self.auth.mechanisms)
        if self.state is not SaslState.HANDSHAKE:
            self._fail()
            return respond(
                request, {"error_code": Errors.ILLEGAL_SASL_STATE, "mechanisms": enabled}
            )
        if mechanism not in enabled:
            log.info(
                "closing %s on %s: SASL mechanism %r is not enabled",
                self._peer, self.auth.listener.name, mechanism[:64],
            )  # fmt: skip
            self._fail()
            return respond(
                request, {"error_code": Errors.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
            )
        self.mechanism = mechanism
        scram = ScramMechanism.by_name(mechanism)
        if scram is not None:
            self._scram = ScramServer(scram, self._lookup, fake_salt_key=self._fake_salt_key)
        self.legacy_tokens = request.api_version == 0
        self.state = SaslState.AUTHENTICATE
        return respond(request, {"error_code": Errors.NONE, "mechanisms": enabled})

    def authenticate(self, request: Request) -> bytes:
        """Answer a SaslAuthenticate (may block on the credential store: call it off the
        event loop in cluster mode)."""
        try:
            answer = self._token(bytes(request.body.auth_bytes))
        except SaslError as exc:
            return respond(
                request,
                {"error_code": exc.code, "error_message": str(exc), "auth_bytes": b""},
            )
        return respond(
            request,
            {
                "error_code": Errors.NONE,
                "error_message": None,
                "auth_bytes": answer,
                "session_lifetime_ms": 0,
            },
        )

    def legacy_token(self, token: bytes) -> bytes | None:
        """After a SaslHandshake v0: the answer to a bare token (sent size-prefixed), or
        ``None`` when it fails (Kafka then closes without a word)."""
        try:
            return self._token(token)
        except SaslError:
            return None

    def _token(self, token: bytes) -> bytes:
        if self.state is not SaslState.AUTHENTICATE:
            self._fail()
            raise SaslStateError(f"Unexpected SaslAuthenticate: the exchange is {self.state.value}")
        try:
            if self._scram is not None:
                answer = self._scram.receive(token)
                if self._scram.complete:
                    self._succeed(self._scram.username)
                return answer
            assert self.auth.plain is not None  # PLAIN is the only other mechanism enabled
            self._succeed(self.auth.plain.authenticate(token))
            return b""
        except SaslError as exc:
            log.info(
                "closing %s on %s: %s authentication failed (%s)",
                self._peer, self.auth.listener.name, self.mechanism, type(exc).__name__,
            )  # fmt: skip
            self._fail()
            raise

    def _lookup(self, user: str) -> ScramCredential | None:
        scram = self._scram
        assert scram is not None
        return self._store.credential(user, scram.mechanism)

    def _succeed(self, user: str) -> None:
        self.state = SaslState.AUTHENTICATED
        self.principal = f"User:{user}"
        self._scram = None

    def _fail(self) -> None:
        self.state = SaslState.FAILED
        self.close_after_response = True
        self._scram = None
