"""SASL PLAIN (RFC 4616): the client's one message, checked against a JAAS user table.

The message, UTF-8, the only one of the exchange (the server answers with empty bytes)::

    [authzid] NUL authcid NUL passwd

Kafka's ``PlainSaslServer`` rules, which ``PlainAuthenticator`` keeps:

1. exactly three NUL-separated fields, else "expected 3 tokens" (``SaslMessageError``);
2. ``authcid`` (the user name) and ``passwd`` must not be empty (``SaslMessageError``);
3. the password must equal ``user_<authcid>`` of the listener's ``PlainLoginModule`` JAAS
   line, compared in constant time; an unknown user is compared against a dummy so that it
   takes as long and fails with the same message (``SaslAuthenticationError``);
4. ``authzid`` must be empty or equal to ``authcid`` — Kafka does not let a user act for
   another (``SaslAuthenticationError``). kafka-python and librdkafka send ``authzid`` equal
   to, or empty beside, the user name.

Bytes that are not UTF-8 are refused (Java would substitute U+FFFD and then fail the
password check). The authenticated principal is ``User:<authcid>``.

``PlainMessage``'s ``repr`` hides the password. ``PlainAuthenticator`` holds an immutable
copy of its users: thread-safe; one instance may serve every connection of a listener.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from .errors import SaslAuthenticationError, SaslMessageError

__all__ = [
    "MECHANISM",
    "PlainMessage",
    "PlainAuthenticator",
    "parse_plain_message",
    "encode_plain_message",
]

MECHANISM: Final = "PLAIN"
# Kafka's SaslAuthenticationException text: the same for unknown user and wrong password.
INVALID_CREDENTIALS: Final = "Authentication failed: Invalid username or password"
FOREIGN_AUTHZID: Final = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


@dataclass(frozen=True)
class PlainMessage:
    """The three fields of a PLAIN message."""

    authzid: str
    username: str
    password: str = field(repr=False)


def parse_plain_message(data: bytes) -> PlainMessage:
    """Split a PLAIN message into its fields; ``SaslMessageError`` if it is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslMessageError("Invalid SASL/PLAIN response: not UTF-8") from None
    fields = text.split("\x00")
    if len(fields) != 3:
        raise SaslMessageError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
    authzid, username, password = fields
    if not username:
        raise SaslMessageError("Authentication failed: username not specified")
    if not password:
        raise SaslMessageError("Authentication failed: password not specified")
    return PlainMessage(authzid, username, password)


def encode_plain_message(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN message (for inter-broker links and tests)."""
    for name, value in (("username", username), ("password", password), ("authzid", authzid)):
        if "\x00" in value:
            raise ValueError(f"the SASL/PLAIN {name} must not contain NUL")
    return f"{authzid}\x00{username}\x00{password}".encode()


class PlainAuthenticator:
    """Verifies PLAIN messages against a user table (``JaasEntry.plain_users``)."""

    # Passwords are compared as SHA-256 digests: equal lengths, so the comparison time says
    # nothing about the expected password's length. An unknown user is compared against a
    # dummy digest, so that it costs the same as a known one.
    _DUMMY: Final = b"\x00" * 32

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = {name: _digest(password) for name, password in users.items()}

    def __repr__(self) -> str:
        return f"PlainAuthenticator(users={len(self._users)})"

    def authenticate(self, data: bytes) -> str:
        """The authenticated user name for a client's PLAIN message; raises if refused.

        ``SaslMessageError`` for a malformed message, ``SaslAuthenticationError`` for wrong
        credentials or a foreign authzid. Thread-safe.
        """
        message = parse_plain_message(data)
        expected = self._users.get(message.username)
        given = _digest(message.password)
        matches = hmac.compare_digest(given, expected if expected is not None else self._DUMMY)
        if expected is None or not matches:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        if message.authzid and message.authzid != message.username:
            raise SaslAuthenticationError(FOREIGN_AUTHZID)
        return message.username


def _digest(password: str) -> bytes:
    return hashlib.sha256(password.encode()).digest()
