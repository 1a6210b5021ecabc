"""Java ``.properties`` files, as Kafka reads ``server.properties``, plus ``--override``.

The file format is Java's (``java.util.Properties.load``), parsed by the ``javaproperties``
library rather than by hand: ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!``
comment lines; a trailing backslash continues a line (leading blanks of the next line
dropped); ``\\t \\n \\r \\f \\\\ \\= \\: \\uXXXX`` escapes (UTF-16 surrogate pairs
included). Files are read as UTF-8 (Java 9+ reads ``.properties`` resource bundles as UTF-8
too; a Latin-1 file with non-ASCII bytes is refused rather than mis-read). Later keys win, and
``--override key=value`` pairs win over the file, as in Kafka's ``kafka-server-start``.

:func:`property_entries` keeps what a dict loses — file order, repeated keys and the line each
entry starts on — for a reader whose errors name the line (the registry's users file). The one
error of the format, a ``\\u`` not followed by four hex digits, names its line and does not
quote it: a value may be a password.

Pure functions; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import javaproperties

__all__ = [
    "PropertiesError",
    "PropertyEntry",
    "load_properties",
    "parse_properties",
    "property_entries",
]

# Java's line terminators (Properties.load): \n, \r or \r\n.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PropertiesError(ValueError):
    """A properties file or an override does not parse."""


@dataclass(frozen=True)
class PropertyEntry:
    """One ``key=value`` of a ``.properties`` text, unescaped, and the line it starts on
    (1-based; a value continued over several lines counts from its first)."""

    line: int
    key: str
    value: str


def property_entries(text: str) -> list[PropertyEntry]:
    """The entries of a ``.properties`` text in file order, repeated keys included."""
    entries: list[PropertyEntry] = []
    line = 1
    try:
        # javaproperties parses lazily, element by element (comments and blank lines are
        # elements too), so ``line`` is where the element that fails to parse starts.
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                entries.append(PropertyEntry(line, element.key, element.value))
            line += len(_LINE_BREAK.findall(element.source))
    except javaproperties.InvalidUEscapeError:
        raise PropertiesError(
            f"line {line}: expected \\u and four hex digits, found an invalid \\u escape "
            "(write \\\\ for a backslash)"
        ) from None
    return entries


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a ``.properties`` file; later keys win."""
    return {entry.key: entry.value for entry in property_entries(text)}


def load_properties(path: str | Path | None, overrides: Iterable[str] = ()) -> dict[str, str]:
    """Read ``path`` (if given) and apply ``key=value`` overrides on top."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PropertiesError(f"config file {path} does not exist") from None
        except IsADirectoryError:
            raise PropertiesError(f"expected a config file, found a directory: {path}") from None
        except UnicodeDecodeError as exc:
            raise PropertiesError(
                f"config file {path}: expected UTF-8 text, found byte {exc.object[exc.start]:#04x}"
                f" at offset {exc.start}"
            ) from None
        try:
            props = parse_properties(text)
        except PropertiesError as exc:
            raise PropertiesError(f"config file {path}, {exc}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PropertiesError(f"expected --override key=value, found {item!r}")
        props[key.strip()] = value.strip()
    return props
