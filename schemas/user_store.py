"""``UserStore``: the users of HTTP Basic authentication, from a Jetty password file.

The file is the one Confluent's registry reads through Jetty's ``PropertyFileLoginModule``
(``PropertyUserStore``): a Java ``.properties`` file, one user a line::

    # user: credential[,role ...]
    alice: alice-secret,admin,developer
    bob: MD5:164c88b302622e17050af52c89945d44,user
    carol: OBF:1w8t1tvf1w261w8v1w1c1tvn1w8x,user

The credential is everything before the first comma (so a password cannot contain one, as in
Jetty); roles follow, comma-separated. Credential forms, as Jetty's ``Credential`` reads them:

==========  ==================================================================  ==========
prefix      stored                                                              accepted
==========  ==================================================================  ==========
(none)      the password itself                                                 yes
``MD5:``    hex MD5 of the UTF-8 password (Jetty's ``Password`` tool prints it)  yes
``OBF:``    Jetty's reversible obfuscation (not a hash: anyone can undo it)      yes
``CRYPT:``  Unix DES ``crypt(3)``                                               refused
==========  ==================================================================  ==========

``CRYPT:`` is refused at start-up with the user and line named: DES crypt needs the ``crypt``
module, deprecated in Python 3.11 and gone in 3.13, and it keeps 8 characters of a password.
Store such users as ``MD5:`` (or plain) instead.

Checking a password is constant-time in the password and in whether the user exists: both
sides are hashed to equal-length digests before :func:`hmac.compare_digest`, and an unknown
user is checked against a dummy credential. Errors name the file and line, never a credential
or a line's text.

The store is read once (no hot reload) and immutable afterwards; thread-safe.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice.common.properties import PropertiesError, property_entries
from sluice.schemas.errors import UsersFileError

MD5_PREFIX = "MD5:"
OBF_PREFIX = "OBF:"
CRYPT_PREFIX = "CRYPT:"


@dataclass(frozen=True, repr=False)
class _Credential:
    """What a password is compared with: ``digest`` of ``algorithm`` over the password."""

    algorithm: str  # "sha256" (plain and OBF, hashed here) or "md5" (stored hashed)
    digest: bytes

    def matches(self, password: str) -> bool:
        offered = hashlib.new(self.algorithm, password.encode("utf-8")).digest()
        return hmac.compare_digest(offered, self.digest)


# Checked when the user is unknown, so that a miss costs what a wrong password costs.
_DUMMY = _Credential("sha256", hashlib.sha256(b"\x00 no such user \x00").digest())


@dataclass(frozen=True)
class User:
    name: str
    roles: frozenset[str]
    credential: _Credential = field(repr=False)  # never in a log line, even hashed


class UserStore:
    """Users and their roles; :meth:`authenticate` checks a name and password."""

    def __init__(self, users: Mapping[str, User]) -> None:
        self._users = dict(users)

    @classmethod
    def read(cls, path: Path) -> UserStore:
        """Parse a Jetty password file; raise :class:`UsersFileError` (naming the line)."""
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsersFileError(f"users file {path}: no such file") from None
        except UnicodeDecodeError:
            raise UsersFileError(f"users file {path}: expected UTF-8 text") from None
        except OSError as exc:
            raise UsersFileError(f"users file {path}: cannot read ({exc.strerror})") from None
        users: dict[str, User] = {}
        try:
            entries = property_entries(raw)
        except PropertiesError as exc:  # names the line, never quotes it
            raise UsersFileError(f"users file {path}, {exc}") from None
        for entry in entries:
            name = entry.key.strip()
            where = f"users file {path}, line {entry.line}, user {name!r}"
            credential, _, roles = entry.value.strip().partition(",")
            if not name or not credential.strip():
                raise UsersFileError(f"{where}: expected 'user: password[,role ...]'")
            users[name] = User(
                name=name,
                roles=frozenset(r.strip() for r in roles.split(",") if r.strip()),
                credential=_parse_credential(credential.strip(), where),
            )
        return cls(users)

    def __len__(self) -> int:
        return len(self._users)

    def authenticate(self, name: str, password: str) -> User | None:
        """The user if ``password`` is theirs, else ``None`` (unknown user or wrong password,
        not told apart, in the same time)."""
        user = self._users.get(name)
        credential = user.credential if user is not None else _DUMMY
        matched = credential.matches(password)
        return user if matched and user is not None else None


def _parse_credential(stored: str, where: str) -> _Credential:
    if stored.startswith(MD5_PREFIX):
        digest = stored[len(MD5_PREFIX) :].strip().lower()
        if len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest):
            raise UsersFileError(f"{where}: expected MD5: and 32 hex digits")
        return _Credential("md5", bytes.fromhex(digest))
    if stored.startswith(CRYPT_PREFIX):
        raise UsersFileError(
            f"{where}: CRYPT: passwords are not supported (Unix DES crypt needs Python's crypt "
            "module, removed in 3.13); store the password as MD5:<hex> or in plain"
        )
    password = deobfuscate(stored, where) if stored.startswith(OBF_PREFIX) else stored
    return _Credential("sha256", hashlib.sha256(password.encode("utf-8")).digest())


def obfuscate(password: str) -> str:
    """Jetty's ``Password.obfuscate``: ``OBF:`` and 4 base-36 digits a byte (5 with ``U``
    for non-ASCII bytes). Reversible by design: it only keeps a password from a glance."""
    data = password.encode("utf-8")
    out = [OBF_PREFIX]
    for i, b1 in enumerate(data):
        b2 = data[len(data) - 1 - i]
        if b1 > 127 or b2 > 127:
            digits = _base36(b1 * 256 + b2)
            out.append("U0000"[: 5 - len(digits)] + digits)
        else:
            signed1, signed2 = b1, b2
            digits = _base36((127 + signed1 + signed2) * 256 + (127 + signed1 - signed2))
            out.append("000"[: 4 - len(digits)] + digits)
    return "".join(out)


def deobfuscate(stored: str, where: str = "OBF: password") -> str:
    """Undo :func:`obfuscate` (Jetty's ``Password.deobfuscate``)."""
    text = stored[len(OBF_PREFIX) :] if stored.startswith(OBF_PREFIX) else stored
    out = bytearray()
    i = 0
    try:
        while i < len(text):
            if text[i] == "U":
                value = int(text[i + 1 : i + 5], 36)
                out.append(value >> 8)
                i += 5
            else:
                value = int(text[i : i + 4], 36)
                out.append(((value // 256 + value % 256 - 254) // 2) & 0xFF)
                i += 4
        return out.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise UsersFileError(f"{where}: expected Jetty's OBF: encoding (base-36 digits)") from None


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out
