"""The SCRAM exchange (RFC 5802, RFC 7677) as two small state machines, bytes in and out.

The four messages, UTF-8, as Kafka's ``ScramMessages`` accepts them::

    client-first   n,[a=<authzid>],n=<saslname>,r=<c-nonce>[,<ext>=<value>]...
    server-first   r=<c-nonce><s-nonce>,s=<b64 salt>,i=<iterations>
    client-final   c=<b64 gs2-header>,r=<c-nonce><s-nonce>[,<ext>=<value>]...,p=<b64 proof>
    server-final   v=<b64 server signature>

    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientSignature = HMAC(StoredKey, AuthMessage)     ClientProof = ClientKey XOR ClientSignature
    ServerSignature = HMAC(ServerKey, AuthMessage)

``client-first-bare`` is client-first after its gs2 header (``n,,`` or ``n,a=<authzid>,``);
``client-final-without-proof`` is client-final up to ``,p=``. Both are taken from the bytes
the client sent (RFC 5802 §3), which is what Kafka's re-formatted strings equal for every
client in use.

Server (``ScramServer``), states ``CLIENT_FIRST`` → ``CLIENT_FINAL`` → ``COMPLETE`` (or
``FAILED`` after any error; any message then is a ``SaslStateError``, as is one after
``COMPLETE``). Checks, in order, each a ``SaslMessageError`` unless said otherwise:

1. client-first: gs2 flag ``n`` only (Kafka supports no channel binding); a mandatory
   extension ``m=`` is refused (RFC 5802 §5.1); ``saslname`` escapes ``=2C`` / ``=3D`` only;
   the nonce printable ASCII without ``,``. Extensions ``<alpha>=<value>`` are ignored as
   Kafka ignores them, except ``tokenauth=true`` (a delegation token login), refused with a
   ``SaslAuthenticationError`` since Sluice has no delegation tokens;
2. an authzid other than empty or the user name → ``SaslAuthenticationError`` (Kafka's rule);
3. the credential lookup. An unknown user gets a server-first message with a fake salt
   derived from the name and a per-server secret, and fails at step 5 with the wrong-password
   message, so the exchange does not tell which users exist (RFC 5802 §9; Kafka fails at once);
4. client-final: the channel binding must be the Base64 of the client's gs2 header (``biws``
   for ``n,,``), the nonce exactly ``c-nonce + s-nonce``;
5. the proof: ``H(ClientProof XOR ClientSignature) == StoredKey``, compared in constant time
   → ``SaslAuthenticationError("Authentication failed: Invalid user credentials")``.

Client (``ScramClient``, for inter-broker links and tests): ``first_message()`` →
``final_message(server_first)`` → ``verify_server_final(server_final)``; it refuses a server
nonce that does not extend its own, fewer than 4096 iterations, and a server signature that
does not match (``ScramServerProofError``).

Neither object is thread-safe: one per connection, driven by that connection's reader.
Neither keeps the password after use, nor shows a key, nonce or proof in its ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
import os
import re
import secrets
from collections.abc import Callable
from typing import Final

from .errors import (
    SaslAuthenticationError,
    SaslMessageError,
    SaslStateError,
    ScramServerProofError,
)
from .scram_credential import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    client_key,
    salted_password,
)

__all__ = [
    "ScramServerState",
    "ScramServer",
    "ScramClient",
    "CredentialLookup",
    "to_saslname",
    "from_saslname",
]

CredentialLookup = Callable[[str], ScramCredential | None]
"""user name → that user's credential for the server's mechanism, or ``None`` if unknown."""

INVALID_CREDENTIALS: Final = "Authentication failed: Invalid user credentials"
FOREIGN_AUTHZID: Final = (
    "Authentication failed: Client requested an authorization id that is different from username"
)
TOKEN_AUTH: Final = "Authentication failed: delegation tokens are not supported"

# Kafka's ScramMessages patterns, with RFC 5802's grammar where Kafka is looser (m=).
_SASLNAME = r"(?:[^=,\x00]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # %x21-7E except ","
_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_EXTENSIONS = r"(?:,[A-Za-z]+=[^,\x00]+)*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))",
    re.DOTALL,
)
_SERVER_FIRST = re.compile(
    rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,10}})"
    rf"{_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[\x01-\x2B\x2D-\x3C\x3E-\x7F]+)|v=(?P<v>{_BASE64})).*")
# Client-first messages larger than this are refused before matching (names and nonces are
# short; Kafka's SaslAuthenticate frames are capped by sasl.server.max.receive.size anyway).
MAX_MESSAGE_BYTES: Final = 8192


def to_saslname(username: str) -> str:
    """RFC 5802's escaping of a user name: ``=`` → ``=3D``, ``,`` → ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def from_saslname(saslname: str) -> str:
    """The user name of an escaped ``saslname``; ``SaslMessageError`` for a bare ``=``."""
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise SaslMessageError("Invalid SCRAM client first message: bad escape in the user name")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _text(data: bytes, what: str) -> str:
    if len(data) > MAX_MESSAGE_BYTES:
        raise SaslMessageError(f"Invalid SCRAM {what}: longer than {MAX_MESSAGE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslMessageError(f"Invalid SCRAM {what}: not UTF-8") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # the patterns admit only valid Base64; belt and braces
        raise SaslMessageError("Invalid SCRAM message: bad Base64") from None


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _new_nonce() -> str:
    # 24 random bytes in URL-safe Base64: printable and comma-free, as the grammar wants
    return secrets.token_urlsafe(24)


class ScramServerState(enum.Enum):
    CLIENT_FIRST = "expecting client-first"
    CLIENT_FINAL = "expecting client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """The server side of one SCRAM exchange. See the module docstring for the checks."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        *,
        fake_salt_key: bytes | None = None,
        nonce_factory: Callable[[], str] = _new_nonce,
    ) -> None:
        """``fake_salt_key``: a per-server secret for unknown users' salts (step 3); share
        one across a broker's connections so a name always gets the same fake salt."""
        self.mechanism = mechanism
        self._lookup = lookup
        self._fake_salt_key = fake_salt_key if fake_salt_key is not None else os.urandom(32)
        self._nonce_factory = nonce_factory
        self.state = ScramServerState.CLIENT_FIRST
        self._username: str | None = None
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = ""
        self._nonce = ""
        self._first_bare = ""
        self._server_first = ""

    def __repr__(self) -> str:
        return f"ScramServer({self.mechanism.mechanism_name}, {self.state.value})"

    @property
    def complete(self) -> bool:
        return self.state is ScramServerState.COMPLETE

    @property
    def username(self) -> str:
        """The authenticated user (the principal is ``User:<username>``); after COMPLETE."""
        if not self.complete or self._username is None:
            raise SaslStateError("the SCRAM exchange has not completed")
        return self._username

    def receive(self, data: bytes) -> bytes:
        """Take the client's next message; return the server's answer (to send as the
        SaslAuthenticate response's ``auth_bytes``). Raises a ``SaslError`` on failure, after
        which the exchange is FAILED."""
        if self.state is ScramServerState.CLIENT_FIRST:
            step = self._client_first
        elif self.state is ScramServerState.CLIENT_FINAL:
            step = self._client_final
        else:
            raise SaslStateError(f"Unexpected SCRAM message: the exchange is {self.state.value}")
        try:
            return step(data)
        except Exception:
            self.state = ScramServerState.FAILED
            self._credential = None
            raise

    def _client_first(self, data: bytes) -> bytes:
        text = _text(data, "client first message")
        if text.startswith(("y,", "p=")):
            raise SaslMessageError(
                "Invalid SCRAM client first message: channel binding is not supported"
            )
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            if re.match(rf"n,(?:a={_SASLNAME})?,m=", text):
                raise SaslMessageError(
                    "Invalid SCRAM client first message: mandatory extensions are not supported"
                )
            raise SaslMessageError("Invalid SCRAM client first message format")
        username = from_saslname(match["saslname"])
        authzid = from_saslname(match["authzid"]) if match["authzid"] else ""
        for extension in filter(None, match["extensions"].split(",")):
            name, _, value = extension.partition("=")
            if name == "tokenauth" and value.lower() == "true":
                raise SaslAuthenticationError(TOKEN_AUTH)
        if authzid and authzid != username:
            raise SaslAuthenticationError(FOREIGN_AUTHZID)

        credential = self._lookup(username)
        if credential is not None and credential.mechanism is not self.mechanism:
            credential = None  # a lookup for the wrong mechanism: treat as unknown
        self._known_user = credential is not None
        if credential is None:
            credential = self._fake_credential(username)
        self._credential = credential
        self._username = username
        self._gs2_header = text[: match.start("bare")]
        self._first_bare = match["bare"]
        self._nonce = match["nonce"] + self._nonce_factory()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self.state = ScramServerState.CLIENT_FINAL
        return self._server_first.encode()

    def _fake_credential(self, username: str) -> ScramCredential:
        # Deterministic per (server secret, name), so probing a name twice shows the same
        # salt; never matches (its keys come from no password anyone knows).
        seed = self.mechanism.hmac(self._fake_salt_key, username.encode())
        size = self.mechanism.digest_size
        return ScramCredential(
            self.mechanism,
            salt=seed[:16],
            stored_key=self.mechanism.hash(seed + b"stored"),
            server_key=bytes(size),
            iterations=MIN_ITERATIONS,
        )

    def _client_final(self, data: bytes) -> bytes:
        text = _text(data, "client final message")
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslMessageError("Invalid SCRAM client final message format")
        if _unb64(match["channel"]) != self._gs2_header.encode():
            raise SaslMessageError("Invalid SCRAM client final message: wrong channel binding")
        if not hmac.compare_digest(match["nonce"].encode(), self._nonce.encode()):
            raise SaslMessageError("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None  # set by _client_first
        auth_message = f"{self._first_bare},{self._server_first},{match['without_proof']}".encode()
        proof = _unb64(match["proof"])
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        computed = self.mechanism.hash(_xor(proof, signature))
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known_user:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self.state = ScramServerState.COMPLETE
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side of one SCRAM exchange (no authzid, gs2 header ``n,,``)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self.username = username
        self._password: str | None = password
        self._nonce = nonce if nonce is not None else _new_nonce()
        if not re.fullmatch(_PRINTABLE, self._nonce):
            raise ValueError("a SCRAM nonce must be printable ASCII without ','")
        self._first_bare = f"n={to_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self.complete = False

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism.mechanism_name}, user={self.username!r})"

    def first_message(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        """The client-final message answering ``server_first``; raises ``SaslMessageError``
        if the server's message is malformed, its nonce foreign or its iterations too few."""
        if self._password is None:
            raise SaslStateError("final_message called twice on one SCRAM exchange")
        text = _text(server_first, "server first message")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise SaslMessageError("Invalid SCRAM server first message format")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslMessageError("Invalid SCRAM server first message: foreign nonce")
        iterations = int(match["iterations"])
        if iterations < MIN_ITERATIONS:
            raise SaslMessageError(
                f"Invalid SCRAM server first message: expected at least {MIN_ITERATIONS} "
                f"iterations, found {iterations}"
            )
        salted = salted_password(self.mechanism, self._password, _unb64(match["salt"]), iterations)
        self._password = None
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        signature = self.mechanism.hmac(self.mechanism.hash(key), auth_message)
        server_key = self.mechanism.hmac(salted, b"Server Key")
        self._server_signature = self.mechanism.hmac(server_key, auth_message)
        return f"{without_proof},p={_b64(_xor(key, signature))}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature; ``ScramServerProofError`` if it does not match."""
        if self._server_signature is None:
            raise SaslStateError("verify_server_final called before final_message")
        text = _text(server_final, "server final message")
        match = _SERVER_FINAL.fullmatch(text)
        if match is None:
            raise SaslMessageError("Invalid SCRAM server final message format")
        if match["error"] is not None:
            raise SaslAuthenticationError(f"SCRAM server refused: {match['error']}")
        if not hmac.compare_digest(_unb64(match["v"]), self._server_signature):
            raise ScramServerProofError("SCRAM server sent a wrong signature")
        self.complete = True
