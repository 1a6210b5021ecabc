"""Typed values of string options: Spark reader options and ``.properties`` keys alike.

Every Sluice configuration (the broker's ``server.properties``, the nightly load's, mirror's
and audit's configs, the ``sluice`` data source's options) arrives as ``str -> str``. These
functions turn one key's text into a value, or raise with the key, the expected form and what
was found. A missing key, or one whose value is blank (``key=`` in a properties file), takes
the default.

:func:`parse_boolean` reads one value that is there (a topic config's, as Kafka's
``ConfigDef`` reads a BOOLEAN): blank is an error, not the default; :func:`boolean` is it over
a mapping, with the default for a missing or blank key.

Each caller has its own exception type for a bad configuration (``LoadConfigError``,
``MirrorConfigError``, ...); pass it as ``error`` so that callers catch one type per failure
mode. ``InvalidOptionError`` is the default.

Pure functions; thread-safe.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

__all__ = [
    "InvalidOptionError",
    "UnknownOptionKeyError",
    "boolean",
    "check_known_keys",
    "integer",
    "names",
    "parse_boolean",
    "positive_int",
    "required",
    "text",
]


class InvalidOptionError(ValueError):
    """An option's value is not of the form the option expects."""


class UnknownOptionKeyError(InvalidOptionError):
    """A configuration names a key nothing reads (a typo, most often)."""


def nearest(key: str, known: Collection[str]) -> str | None:
    """The known key ``key`` most likely misspells, if any is close (difflib's ratio >= 0.6);
    compared case-insensitively, since the usual typo is a letter, not the case."""
    by_lower = {k.lower(): k for k in known}
    match = difflib.get_close_matches(key.lower(), list(by_lower), n=1)
    return by_lower[match[0]] if match else None


def check_known_keys(
    options: Mapping[str, str],
    known: Collection[str],
    *,
    prefixes: tuple[str, ...] = (),
    what: str = "configuration",
    error: type[Exception] = UnknownOptionKeyError,
) -> None:
    """Refuse a key that is neither ``known`` nor under one of ``prefixes`` (pass-through
    families such as ``kafka.`` or ``spark.``), naming the nearest known key — a misspelt key
    silently ignored is how ``failOnDataLos=false`` once let a load publish past lost data."""
    for key in sorted(options):
        if key in known or key.startswith(prefixes):
            continue
        guess = nearest(key, known)
        hint = f"; did you mean {guess!r}?" if guess else ""
        raise error(f"{key}: not a key of this {what}{hint}")


def text(options: Mapping[str, str], key: str) -> str | None:
    """The stripped value of ``key``, or ``None`` when it is missing or blank."""
    raw = options.get(key)
    if raw is None:
        return None
    value = str(raw).strip()
    return value or None


def required(
    options: Mapping[str, str], key: str, *, error: type[Exception] = InvalidOptionError
) -> str:
    """The stripped value of ``key``; missing or blank is an error naming the key."""
    value = text(options, key)
    if value is None:
        raise error(f"{key}: expected a value, found none")
    return value


def boolean(
    options: Mapping[str, str],
    key: str,
    default: bool,
    *,
    error: type[Exception] = InvalidOptionError,
) -> bool:
    """``true`` or ``false`` (any case); the default when missing or blank."""
    if text(options, key) is None:
        return default
    return parse_boolean(key, str(options[key]), error=error)


def parse_boolean(key: str, raw: str, *, error: type[Exception] = InvalidOptionError) -> bool:
    """``raw`` as Kafka's ``ConfigDef`` reads a BOOLEAN: ``true`` or ``false`` in any case,
    surrounding blanks ignored; anything else, blank included, is ``error`` naming ``key``."""
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise error(f"{key}: expected true or false, found {raw!r}")
    return value == "true"


def positive_int(
    options: Mapping[str, str],
    key: str,
    default: int | None = None,
    *,
    error: type[Exception] = InvalidOptionError,
) -> int | None:
    """A decimal integer > 0; the default when missing or blank."""
    value = text(options, key)
    if value is None:
        return default
    if not (value.isascii() and value.isdigit() and int(value) > 0):
        raise error(f"{key}: expected a positive integer, found {options[key]!r}")
    return int(value)


def integer(
    options: Mapping[str, str],
    key: str,
    default: int,
    *,
    minimum: int | None = None,
    error: type[Exception] = InvalidOptionError,
) -> int:
    """A decimal integer (optionally signed), at least ``minimum``; the default when missing."""
    value = text(options, key)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise error(f"{key}: expected an integer, found {options[key]!r}") from None
    if minimum is not None and number < minimum:
        raise error(f"{key}: expected an integer >= {minimum}, found {number}")
    return number


def names(options: Mapping[str, str], key: str) -> tuple[str, ...]:
    """A comma-separated list, entries stripped, blanks dropped; ``()`` when missing."""
    return tuple(n.strip() for n in (options.get(key) or "").split(",") if n.strip())
