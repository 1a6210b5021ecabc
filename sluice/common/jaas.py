"""Kafka's JAAS lines (``sasl.jaas.config``), parsed exactly as Kafka's ``JaasConfig`` does.

Shared by the broker (its listeners' user tables and its inter-broker logins:
``sluice.broker.security.jaas`` says which key a line comes from), the ``sluice acls``
command, and the Spark source and sink (``sluice.pipeline.kafka_settings`` turns a Java
client's line into librdkafka's settings).

Grammar (one or more entries; a Kafka config value must hold exactly one)::

    entry   = login-module control-flag { key "=" value } ";"
    flag    = required | requisite | sufficient | optional      (any case)
    value   = word | "double-quoted" | 'single-quoted'

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a";

Kafka tokenizes with ``java.io.StreamTokenizer`` set up thus, and so does ``_tokens``:

* characters 0–32 are white space (so line ends are too);
* ``;`` and ``=`` are tokens of their own;
* ``"`` and ``'`` open a quoted string; inside, ``\\`` escapes: ``\\n \\t \\r \\b \\f \\a \\v``,
  octal ``\\0``–``\\377``, and ``\\x`` is ``x`` for any other ``x``. A quoted string also
  ends, unterminated, at a line end or the end of the text — Java's rule, kept for
  compatibility (the entry then still needs its ``;``);
* ``/`` starts a comment: ``//`` and a lone ``/`` to the line end, ``/* ... */`` to its close.
  So an unquoted value cannot hold ``/``: quote paths;
* every other character, code points 33–128 and from 160 up, is part of a word; code points
  129–159 are tokens of their own, which no grammar rule accepts.

Options keep the last value of a repeated key (a Java ``HashMap``). ``user_<name>`` options of
``PlainLoginModule`` are its user table, name → password (``PlainServerCallbackHandler``).

Errors (``JaasConfigError``, the one error of this module) give the character position and the
kind of token found, never the text: a JAAS line holds passwords. ``JaasEntry``'s ``repr``
shows option names only.

Pure functions and immutable values; thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

__all__ = [
    "KRB5_LOGIN_MODULE",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "ControlFlag",
    "JaasConfigError",
    "JaasEntry",
    "parse_jaas_config",
    "parse_jaas_entries",
]


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value Kafka would refuse; says where, never quotes the text."""


PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
KRB5_LOGIN_MODULE: Final = "com.sun.security.auth.module.Krb5LoginModule"
USER_PREFIX: Final = "user_"  # PlainLoginModule's user table: user_<name>="<password>"


class ControlFlag(enum.Enum):
    """JAAS control flags. Kafka checks the flag's spelling and otherwise ignores it."""

    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class JaasEntry:
    """One login module: class name, control flag and options (values may be secrets)."""

    login_module: str
    control_flag: ControlFlag
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __repr__(self) -> str:
        # option values include passwords; names are safe and enough to debug a config
        keys = ", ".join(sorted(self.options))
        return (
            f"JaasEntry(login_module={self.login_module!r}, "
            f"control_flag={self.control_flag.value}, options=[{keys}])"
        )

    @property
    def username(self) -> str | None:
        """The ``username`` option: who this side logs in as (clients, inter-broker links)."""
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        """The ``password`` option."""
        return self.options.get("password")

    @property
    def plain_users(self) -> Mapping[str, str]:
        """PlainLoginModule's user table from ``user_<name>`` options: name → password."""
        return MappingProxyType(
            {
                key[len(USER_PREFIX) :]: value
                for key, value in self.options.items()
                if key.startswith(USER_PREFIX) and len(key) > len(USER_PREFIX)
            }
        )


# --------------------------------------------------------------------------------------------
# Tokenizer: java.io.StreamTokenizer as Kafka configures it
# --------------------------------------------------------------------------------------------

_WORD, _QUOTED, _CHAR, _EOF = "word", "quoted string", "character", "end of text"


@dataclass(frozen=True)
class _Token:
    kind: str
    value: str  # the word or string; the character itself for _CHAR; "" for _EOF
    position: int  # 0-based offset of the token's first character

    def describe(self) -> str:
        """What was found, without the text of a word or string (it may be a secret)."""
        if self.kind in (_CHAR,) and self.value in ";=":
            return f"{self.value!r}"
        if self.kind == _CHAR:
            return f"the control character U+{ord(self.value):04X}"
        if self.kind == _EOF:
            return "the end of the text"
        return f"a {self.kind} of {len(self.value)} characters"


def _is_word_char(c: str) -> bool:
    code = ord(c)
    if c in ";=\"'/":
        return False
    return 33 <= code <= 128 or code >= 160


_ESCAPES: Final = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL: Final = "01234567"


def _tokens(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while True:
        # white space and comments
        while i < n:
            c = text[i]
            if ord(c) <= 32:
                i += 1
            elif c == "/":
                if text.startswith("/*", i):
                    end = text.find("*/", i + 2)
                    i = n if end < 0 else end + 2
                else:  # "//" or a lone "/": to the end of the line
                    while i < n and text[i] not in "\n\r":
                        i += 1
            else:
                break
        if i >= n:
            yield _Token(_EOF, "", n)
            return
        start, c = i, text[i]
        if _is_word_char(c):
            while i < n and _is_word_char(text[i]):
                i += 1
            yield _Token(_WORD, text[start:i], start)
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            yield _Token(_QUOTED, value, start)
        else:
            i += 1
            yield _Token(_CHAR, c, start)


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The string that starts at ``i`` (after its quote) and the offset just past it."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] not in "\n\r":
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a backslash at the very end: Java stores U+FFFF (read() returned -1)
            out.append("\uffff")
            break
        c = text[i]
        i += 1
        if c in _OCTAL:
            digits, limit = c, 3 if c <= "3" else 2  # \377 at most, as Java
            while len(digits) < limit and i < n and text[i] in _OCTAL:
                digits += text[i]
                i += 1
            out.append(chr(int(digits, 8)))
        else:
            out.append(_ESCAPES.get(c, c))
    if i < n and text[i] == quote:
        i += 1  # the closing quote; a line end stays for the next token
    return "".join(out), i


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------


def parse_jaas_entries(text: str) -> tuple[JaasEntry, ...]:
    """Every entry of a JAAS configuration text (at least one), in order."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    token = next(tokens)
    while token.kind != _EOF:
        entries.append(_entry(token, tokens))
        token = next(tokens)
    if not entries:
        raise JaasConfigError("expected a login module in the JAAS config, found no entry")
    return tuple(entries)


def parse_jaas_config(text: str) -> JaasEntry:
    """The single entry of a ``sasl.jaas.config`` value (Kafka refuses zero or several)."""
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"expected 1 login module in the JAAS config property, found {len(entries)}"
        )
    return entries[0]


def _entry(first: _Token, tokens: Iterator[_Token]) -> JaasEntry:
    if first.kind not in (_WORD, _QUOTED):
        raise JaasConfigError(
            f"expected a login module class name at character {first.position}, "
            f"found {first.describe()}"
        )
    flag_token = next(tokens)
    if flag_token.kind not in (_WORD, _QUOTED):
        raise JaasConfigError(
            f"expected a login module control flag at character {flag_token.position}, "
            f"found {flag_token.describe()}"
        )
    try:
        flag = ControlFlag(flag_token.value.lower())
    except ValueError:
        raise JaasConfigError(
            f"expected a control flag (required, requisite, sufficient or optional) at "
            f"character {flag_token.position}, found {flag_token.describe()}"
        ) from None
    options: dict[str, str] = {}
    while True:
        key = next(tokens)
        if key.kind == _CHAR and key.value == ";":
            return JaasEntry(first.value, flag, options)
        if key.kind == _EOF:
            raise JaasConfigError(
                "expected ';' to end the JAAS config entry, found the end of the text"
            )
        if key.kind not in (_WORD, _QUOTED):
            raise JaasConfigError(
                f"expected an option name at character {key.position}, found {key.describe()}"
            )
        equals, value = next(tokens), None
        if equals.kind == _CHAR and equals.value == "=":
            value = next(tokens)
        if value is None or value.kind not in (_WORD, _QUOTED):
            found = equals if value is None else value
            # not even the option's name is quoted: a value whose key was forgotten
            # (``user_bob "secret"``) reads as a name here
            raise JaasConfigError(
                f"expected '=' and a value after the option name at character "
                f"{key.position}, found {found.describe()} at character {found.position}"
            )
        options[key.value] = value.value
