"""``JaasFile``: a Java JAAS login configuration, as Confluent's registry is given one.

Confluent's registry finds its users through JAAS: ``-Djava.security.auth.login.config=F`` in
``SCHEMA_REGISTRY_OPTS`` names a file whose entry called ``authentication.realm`` lists the
login module, in Java's syntax::

    SchemaRegistry-Props {
      org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required
      file="/etc/schema-registry/password-file"
      debug="false";
    };

Grammar (``javax.security.auth.login.ConfigFile``): entries ``Name { module... };``, each
module ``ClassName Flag [key=value ...];``, flags ``required | requisite | sufficient |
optional``; values bare words or double-quoted strings (``\\`` escapes); ``//`` and
``/* */`` comments. Entry names are case-sensitive.

The same file often holds other entries (a broker's ``KafkaServer`` with ``user_…``
passwords), so nothing parsed here is ever quoted in an error: errors give the file, the line
and what was expected. Immutable once parsed; thread-safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from sluice.schemas.errors import UsersFileError

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<comment>//[^\n]*|/\*.*?\*/)
      | "(?P<quoted>(?:[^"\\]|\\.)*)"
      | (?P<punct>[{};=])
      | (?P<word>[^\s{};="]+)""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(repr=False)  # may hold passwords


@dataclass(frozen=True)
class JaasFile:
    """The entries of a JAAS file by name; each is its login modules in order."""

    path: Path
    entries: dict[str, list[LoginModule]]

    @classmethod
    def read(cls, path: Path) -> JaasFile:
        """Parse ``path``; raise :class:`UsersFileError` naming the line on a syntax error."""
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsersFileError(f"JAAS file {path}: no such file") from None
        except UnicodeDecodeError:
            raise UsersFileError(f"JAAS file {path}: expected UTF-8 text") from None
        except OSError as exc:
            raise UsersFileError(f"JAAS file {path}: cannot read ({exc.strerror})") from None
        return cls(path, _Parser(path, source).entries())


class _Parser:
    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, line)
        position, line = 0, 1
        while position < len(source):
            match = _TOKEN.match(source, position)
            if match is None:
                raise UsersFileError(
                    f"JAAS file {path}, line {line}: expected a closing quote or '*/', found "
                    "the end of the file"
                )
            kind = match.lastgroup
            assert kind is not None
            if kind == "quoted":
                value = re.sub(r"\\(.)", r"\1", match["quoted"])
                self.tokens.append(("value", value, line))
            elif kind in ("punct", "word"):
                self.tokens.append((kind if kind == "word" else match[0], match[0], line))
            line += match[0].count("\n")
            position = match.end()
        self.index = 0
        self.last_line = line

    def fail(self, line: int, expected: str) -> None:
        raise UsersFileError(f"JAAS file {self.path}, line {line}: expected {expected}")

    def take(self, *kinds: str, expected: str) -> tuple[str, int]:
        if self.index >= len(self.tokens):
            self.fail(self.last_line, expected + " before the end of the file")
        kind, value, line = self.tokens[self.index]
        if kind not in kinds:
            self.fail(line, expected)
        self.index += 1
        return value, line

    def peek(self) -> str | None:
        return self.tokens[self.index][0] if self.index < len(self.tokens) else None

    def entries(self) -> dict[str, list[LoginModule]]:
        entries: dict[str, list[LoginModule]] = {}
        while self.peek() is not None:
            name, line = self.take("word", expected="an entry name")
            if name in entries:
                self.fail(line, f"one entry named {name!r}, found it twice")
            self.take("{", expected=f"'{{' after the entry name {name!r}")
            modules = []
            while self.peek() != "}":
                modules.append(self.module(name))
            self.take("}", expected=f"'}}' closing the entry {name!r}")
            self.take(";", expected=f"';' after the entry {name!r}")
            entries[name] = modules
        return entries

    def module(self, entry: str) -> LoginModule:
        class_name, _ = self.take("word", expected=f"a login module class in {entry!r}")
        flag, line = self.take("word", expected=f"a flag after {class_name}")
        if flag.lower() not in FLAGS:
            self.fail(line, f"a flag ({', '.join(sorted(FLAGS))}) after {class_name}")
        options: dict[str, str] = {}
        while self.peek() != ";":
            key, _ = self.take("word", expected=f"an option name or ';' in {entry!r}")
            self.take("=", expected=f"'=' after the option {key!r}")
            options[key], _ = self.take("value", "word", expected=f"a value for {key!r}")
        self.take(";", expected=f"';' after the login module {class_name}")
        return LoginModule(class_name, flag.lower(), options)
