"""SCRAM mechanisms and salted credentials (RFC 5802 §3), and how Kafka stores them.

A credential is what a server keeps instead of a password::

    SaltedPassword = Hi(password, salt, iterations)        PBKDF2-HMAC-H, UTF-8 password
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)                          kept
    ServerKey      = HMAC(SaltedPassword, "Server Key")    kept

``ScramCredential`` holds ``salt``, ``iterations``, ``stored_key`` and ``server_key`` —
never the password or the salted password. Invariants, checked on construction: the
iterations are at least 4096 (Kafka's ``ScramMechanism.minIterations`` for both
mechanisms), the salt is not empty, and both keys are the hash's length (32 bytes for
SHA-256, 64 for SHA-512). Kafka does not SASLprep passwords (``ScramFormatter.normalize`` is
UTF-8 encoding); neither does Sluice, so credentials are interchangeable with Kafka's.

Kafka's stored form (``ScramCredentialUtils.credentialToString``), standard Base64::

    salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<int>

and, in ZooKeeper, the user's entity config znode ``/config/users/<url-encoded user>``
(``UserConfigZnode``), next to the user's quotas::

    {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

KIP-554's AlterUserScramCredentials limits iterations to 16384 (``MAX_ALTER_ITERATIONS``);
a stored credential may have more. A salt Kafka makes is the ASCII text of a random base-36
number (``ScramFormatter.secureRandomBytes``); Sluice's are 24 random bytes — either reads.

``repr`` of a credential shows the mechanism-independent facts (iterations, lengths), not
the keys: the stored key allows an offline dictionary attack on the password.
Immutable values and pure functions; thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import quote, unquote

from .errors import CredentialFormatError, ScramCredentialError

__all__ = [
    "MIN_ITERATIONS",
    "MAX_ALTER_ITERATIONS",
    "ScramMechanism",
    "ScramCredential",
    "create_credential",
    "salted_password",
    "client_key",
    "credential_to_string",
    "credential_from_string",
    "UserConfigZnode",
]

MIN_ITERATIONS: Final = 4096
MAX_ALTER_ITERATIONS: Final = 16384
SALT_BYTES: Final = 24


class ScramMechanism(enum.Enum):
    """The SCRAM mechanisms Kafka implements: SASL name and hash function."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, kafka_type: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        # the ``mechanism`` int8 of Describe/AlterUserScramCredentials (KIP-554)
        self.kafka_type = kafka_type

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        """The mechanism of a SASL name (``SCRAM-SHA-256``), or ``None`` for another."""
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        return None

    @classmethod
    def by_kafka_type(cls, kafka_type: int) -> ScramMechanism | None:
        """The mechanism of KIP-554's int8 code (1, 2), or ``None`` (0 is UNKNOWN)."""
        for mechanism in cls:
            if mechanism.kafka_type == kafka_type:
                return mechanism
        return None


@dataclass(frozen=True)
class ScramCredential:
    """A user's salted SCRAM credential for one mechanism. See the module docstring."""

    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __post_init__(self) -> None:
        if self.iterations < MIN_ITERATIONS:
            raise ScramCredentialError(
                f"expected at least {MIN_ITERATIONS} iterations for "
                f"{self.mechanism.mechanism_name}, found {self.iterations}"
            )
        if not self.salt:
            raise ScramCredentialError("expected a non-empty salt, found an empty one")
        size = self.mechanism.digest_size
        for name, key in (("stored_key", self.stored_key), ("server_key", self.server_key)):
            if len(key) != size:
                raise ScramCredentialError(
                    f"expected a {size}-byte {name} for {self.mechanism.mechanism_name}, "
                    f"found {len(key)} bytes"
                )

    def __repr__(self) -> str:
        return (
            f"ScramCredential({self.mechanism.mechanism_name}, iterations={self.iterations}, "
            f"salt={len(self.salt)} bytes)"
        )


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """``Hi(password, salt, i)``: PBKDF2 with HMAC-H, one block."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return mechanism.hmac(salted, b"Client Key")


def create_credential(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = MIN_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A new credential for ``password``; a random salt unless one is given (tests, RFC)."""
    if iterations < MIN_ITERATIONS:  # before paying for PBKDF2
        raise ScramCredentialError(
            f"expected at least {MIN_ITERATIONS} iterations, found {iterations}"
        )
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        stored_key=mechanism.hash(client_key(mechanism, salted)),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


# --------------------------------------------------------------------------------------------
# Kafka's stored forms
# --------------------------------------------------------------------------------------------

_FIELDS: Final = ("salt", "stored_key", "server_key", "iterations")


def credential_to_string(credential: ScramCredential) -> str:
    """``salt=...,stored_key=...,server_key=...,iterations=N`` (ScramCredentialUtils)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return (
        f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
        f"server_key={b64(credential.server_key)},iterations={credential.iterations}"
    )


def credential_from_string(mechanism: ScramMechanism, text: str) -> ScramCredential:
    """Parse Kafka's stored form; ``CredentialFormatError`` names the field, not its value."""
    values: dict[str, str] = {}
    for token in text.split(","):
        name, sep, value = token.partition("=")
        if not sep or not name:
            raise CredentialFormatError(
                "expected name=value pairs in a SCRAM credential, found a token without '='"
            )
        values[name] = value
    if sorted(values) != sorted(_FIELDS):
        raise CredentialFormatError(
            f"expected the fields {', '.join(_FIELDS)} in a SCRAM credential, "
            f"found {', '.join(sorted(values))}"
        )
    decoded: dict[str, bytes] = {}
    for name in ("salt", "stored_key", "server_key"):
        try:
            decoded[name] = base64.b64decode(values[name], validate=True)
        except (binascii.Error, ValueError):
            raise CredentialFormatError(
                f"expected Base64 in the {name} of a SCRAM credential"
            ) from None
    iterations_text = values["iterations"]
    if not iterations_text.isascii() or not iterations_text.isdigit():
        raise CredentialFormatError(
            f"expected a decimal iteration count in a SCRAM credential, "
            f"found {iterations_text[:12]!r}"
        )
    try:
        return ScramCredential(mechanism, iterations=int(iterations_text), **decoded)
    except ScramCredentialError as exc:
        raise CredentialFormatError(f"stored SCRAM credential out of range: {exc}") from None


@dataclass(frozen=True)
class UserConfigZnode:
    """``/config/users/<user>``: a user's entity config, SCRAM credentials among its keys.

    ``config`` maps Kafka config names to strings: ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` hold
    credential strings, other keys (``producer_byte_rate``...) are kept as they are. The user
    name is URL-encoded in the path, as Kafka's ``Sanitizer.sanitize`` does (Java's
    ``URLEncoder``: letters, digits and ``._-`` kept, a space is ``%20``, ``*`` is ``%2A``).
    """

    config: Mapping[str, str]

    ROOT: ClassVar[str] = "/config/users"
    VERSION: ClassVar[int] = 1

    def __repr__(self) -> str:
        return f"UserConfigZnode(keys=[{', '.join(sorted(self.config))}])"

    @staticmethod
    def path(user: str) -> str:
        # Python's quote keeps "~", Java's URLEncoder does not
        encoded = quote(user, safe="._-").replace("~", "%7E")
        return f"{UserConfigZnode.ROOT}/{encoded}"

    @staticmethod
    def user_of(path: str) -> str:
        """The user name of a ``/config/users/<user>`` path."""
        prefix = UserConfigZnode.ROOT + "/"
        if not path.startswith(prefix) or "/" in path[len(prefix) :]:
            raise CredentialFormatError(f"expected a path under {prefix}, found {path!r}")
        return unquote(path[len(prefix) :])

    def credentials(self) -> dict[ScramMechanism, ScramCredential]:
        """The SCRAM credentials among the config keys, parsed."""
        found = {}
        for mechanism in ScramMechanism:
            text = self.config.get(mechanism.mechanism_name)
            if text is not None:
                found[mechanism] = credential_from_string(mechanism, text)
        return found

    def with_credential(
        self, mechanism: ScramMechanism, credential: ScramCredential | None
    ) -> UserConfigZnode:
        """A copy with ``mechanism``'s credential set, or removed when ``None``."""
        config = dict(self.config)
        if credential is None:
            config.pop(mechanism.mechanism_name, None)
        else:
            if credential.mechanism is not mechanism:
                raise ScramCredentialError(
                    f"expected a {mechanism.mechanism_name} credential, "
                    f"found {credential.mechanism.mechanism_name}"
                )
            config[mechanism.mechanism_name] = credential_to_string(credential)
        return UserConfigZnode(config)

    def encode(self) -> bytes:
        return json.dumps(
            {"version": self.VERSION, "config": dict(self.config)}, separators=(",", ":")
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> UserConfigZnode:
        try:
            payload: Any = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise CredentialFormatError("expected JSON in a /config/users znode") from None
        if not isinstance(payload, dict) or payload.get("version") != cls.VERSION:
            raise CredentialFormatError(
                f"expected a JSON object with version {cls.VERSION} in a /config/users znode"
            )
        config = payload.get("config", {})
        if not isinstance(config, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in config.items()
        ):
            raise CredentialFormatError(
                "expected a 'config' object of strings in a /config/users znode"
            )
        return cls(config)
