"""Java ``.properties`` files, as Kafka reads ``server.properties``, plus ``--override``.

The file format is Java's (``java.util.Properties.load``), parsed by the ``javaproperties``
library rather than by hand: ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!``
comment lines; a trailing backslash continues a line (leading blanks of the next line
dropped); ``\\t \\n \\r \\f \\\\ \\= \\: \\uXXXX`` escapes (UTF-16 surrogate pairs
included). Files are read as UTF-8 (Java 9+ reads ``.properties`` resource bundles as UTF-8
too; a Latin-1 file with non-ASCII bytes is refused rather than mis-read). Later keys win, and
``--override key=value`` pairs win over the file, as in Kafka's ``kafka-server-start``.

Pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import javaproperties

__all__ = ["PropertiesError", "load_properties", "parse_properties"]


class PropertiesError(ValueError):
    """A properties file or an override does not parse."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a ``.properties`` file; later keys win."""
    try:
        return dict(javaproperties.loads(text))
    except ValueError as exc:  # javaproperties' InvalidUEscapeError: a bad \uXXXX
        raise PropertiesError(f"expected a valid .properties escape, found {exc}") from None


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
        props = parse_properties(text)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PropertiesError(f"expected --override key=value, found {item!r}")
        props[key.strip()] = value.strip()
    return props
