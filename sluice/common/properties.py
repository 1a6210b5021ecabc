"""Java ``.properties`` files, as Kafka reads ``server.properties``, plus ``--override``.

Supported: ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!`` comment lines;
a trailing backslash continues a line; ``\\t \\n \\\\ \\= \\:`` escapes. Later keys win,
and ``--override key=value`` pairs win over the file, as in Kafka's ``kafka-server-start``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class PropertiesError(ValueError):
    """A properties file or an override does not parse."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key = line[:i]
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":") and ch in " \t":
                rest = rest[1:].lstrip(" \t")
            elif ch in "=:":
                rest = line[i + 1 :].lstrip(" \t")
            return _unescape(key), _unescape(rest)
        i += 1
    return _unescape(line), ""


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a ``.properties`` file."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if not pending else raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next one.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        key, value = _split(line)
        result[key] = value
    if pending:
        key, value = _split(pending)
        result[key] = value
    return result


def load_properties(path: str | Path | None, overrides: Iterable[str] = ()) -> dict[str, str]:
    """Read ``path`` (if given) and apply ``key=value`` overrides on top."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            props = parse_properties(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PropertiesError(f"config file {path} does not exist") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PropertiesError(f"expected --override key=value, found {item!r}")
        props[key.strip()] = value.strip()
    return props
