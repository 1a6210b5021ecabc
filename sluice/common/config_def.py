"""``ConfigDef``: a configuration's keys declared once, as data, as Kafka's ``ConfigDef``.

Each key is declared once — name, type, default (or :data:`REQUIRED`), validator, doc — and
everything else comes from the declaration: parsing and validation of a ``str -> str``
mapping (a ``.properties`` file, ``--override`` pairs), the set of known keys that the
"did you mean" check compares a misspelt key with, and the Markdown table of the generated
configuration page (``python -m sluice.cli.config_docs``).

Usage (a component declares its keys at module level and parses through them)::

    CONFIG_DEF = (
        ConfigDef(error=MirrorConfigError, what="mirror config")
        .define("group.id", Type.STRING, "sluice-mirror", doc="one group on every cluster")
        .define("batch.max.messages", Type.INT, 5000, Range.at_least(1), doc="...")
        .define("clusters", Type.LIST, REQUIRED, doc="source cluster aliases")
        .define("use.defaults.from", Type.STRING, "target", OneOf("target", "source"), doc="...")
        .family("consumer.<librdkafka key>", "every source consumer", prefix="consumer.")
    )
    values = CONFIG_DEF.parse(props)  # {"group.id": "sluice-mirror", "batch.max.messages": ...}
    CONFIG_DEF.check_known(props, extra={"live.bootstrap.servers"})  # "did you mean" errors

Parsing, per key (the typed readers of :mod:`sluice.common.options`, so every configuration
words its errors the same way):

* a missing key — or a blank one (``key=``), unless declared ``blank_is_default=False`` —
  takes the default; a :data:`REQUIRED` key missing or blank is an error
  (``"<key>: expected a value, found none"``); a default of ``None`` means "unset";
* ``STRING``: the stripped text; ``INT``: a decimal integer (``Range`` bounds it; the
  :data:`POSITIVE` range reads it as ``options.positive_int`` does: digits only, > 0);
  ``BOOLEAN``: ``true``/``false`` in any case; ``LIST``: comma-separated, entries stripped,
  blanks dropped (a tuple of strings);
* a :class:`OneOf` value is lower-cased, then must be one of the values; a :class:`Check` runs
  any other test on the parsed value.

Every failure is one exception, the ``error`` type the :class:`ConfigDef` was built with (each
component keeps its own: ``ConfigError``, ``MirrorConfigError``, ...; the default is
``options.InvalidOptionError``), with a one-line message ``"<key>: expected <what>, found
<what was found>"``.

Key families — pass-through prefixes such as ``kafka.`` or ``spark.``, and patterned keys such
as ``<alias>.bootstrap.servers`` — are declared with :meth:`ConfigDef.family`: a family with a
``prefix`` makes every key under it known; one without (a pattern the component expands
itself) is documentation only, and the component passes the keys it expands as ``extra``.

The docs: :meth:`ConfigDef.to_markdown` renders one row per key (key, type, default, valid
values, doc) and one per family. ``doc`` (and ``default_doc``, shown instead of a default that is
computed, e.g. ``= listeners``) are Markdown: write code in backticks; outside them, characters
Markdown would read as markup are escaped.

Declarations are built once, at import, and never changed afterwards: reading them (``parse``,
``check_known``, ``to_markdown``) is thread-safe. This module imports nothing of Sluice above
``sluice.common``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sluice.common import options

__all__ = [
    "POSITIVE",
    "REQUIRED",
    "Check",
    "ConfigDef",
    "ConfigKey",
    "KeyFamily",
    "OneOf",
    "Range",
    "Type",
    "Validator",
]


class Type(enum.Enum):
    """The value types of a key (Kafka's ``ConfigDef.Type``, the ones Sluice uses)."""

    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    LIST = "list"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a key that has none: missing or blank is an error (Kafka's
#: ``NO_DEFAULT_VALUE``).
REQUIRED: Final = _Required()


class Validator:
    """Checks a parsed value. ``describe`` is the "valid values" column of the docs;
    ``check`` returns ``None`` for a good value, else ``"expected ..., found ..."``."""

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, value: Any, raw: str) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """An ``INT`` within ``[minimum, maximum]`` (either end open when ``None``).

    The lower bound is applied while parsing, by ``options.integer`` (``"expected an integer
    >= 1, found 0"``), or by ``options.positive_int`` for :data:`POSITIVE` (``"expected a
    positive integer, found '0'"``, a malformed value worded the same way)."""

    minimum: int | None = None
    maximum: int | None = None
    positive: bool = False

    @staticmethod
    def at_least(minimum: int) -> Range:
        return Range(minimum)

    @staticmethod
    def between(minimum: int, maximum: int) -> Range:
        return Range(minimum, maximum)

    def describe(self) -> str:
        if self.minimum is None and self.maximum is None:
            return ""
        if self.maximum is None:
            return f"[{self.minimum},...]"
        if self.minimum is None:
            return f"[...,{self.maximum}]"
        return f"[{self.minimum},...,{self.maximum}]"

    def check(self, value: Any, raw: str) -> str | None:
        if self.maximum is not None and value > self.maximum:
            return f"expected an integer <= {self.maximum}, found {value}"
        return None


#: A decimal integer > 0, digits only (``options.positive_int``).
POSITIVE: Final = Range(1, positive=True)


@dataclass(frozen=True)
class OneOf(Validator):
    """A ``STRING`` among ``values``, compared lower-cased (the parsed value is lower-cased).
    ``expected`` words the error when the default wording (``a or b``, ``one of a, b, c``)
    does not fit."""

    values: tuple[str, ...]
    expected: str | None = None

    def __init__(self, *values: str, expected: str | None = None) -> None:
        object.__setattr__(self, "values", tuple(v.lower() for v in values))
        object.__setattr__(self, "expected", expected)

    def describe(self) -> str:
        return ", ".join(self.values)

    def check(self, value: Any, raw: str) -> str | None:
        if value in self.values:
            return None
        if self.expected is not None:
            wanted = self.expected
        elif len(self.values) == 2:
            wanted = " or ".join(self.values)
        else:
            wanted = "one of " + ", ".join(self.values)
        return f"expected {wanted}, found {raw.strip()!r}"


@dataclass(frozen=True)
class Check(Validator):
    """Any other test: ``test(value)`` returns ``None`` or ``"expected ..., found ..."``;
    ``description`` is the docs' "valid values"."""

    description: str
    test: Callable[[Any], str | None]

    def describe(self) -> str:
        return self.description

    def check(self, value: Any, raw: str) -> str | None:
        return self.test(value)


@dataclass(frozen=True)
class ConfigKey:
    """One declared key. ``default_doc`` replaces the default in the docs when the real one
    is computed (``= listeners``)."""

    name: str
    type: Type
    default: Any
    validator: Validator | None
    doc: str
    default_doc: str | None = None
    blank_is_default: bool = True


@dataclass(frozen=True)
class KeyFamily:
    """Keys declared as a group: ``pattern`` as the docs show it (``kafka.<key>``); with a
    ``prefix``, every key starting with it is known (passed through, not parsed here)."""

    pattern: str
    doc: str
    prefix: str | None = None


class ConfigDef:
    """The declared keys of one component, in declaration order (the docs' order)."""

    def __init__(
        self, *, error: type[Exception] = options.InvalidOptionError, what: str = "configuration"
    ) -> None:
        self.error = error
        self.what = what
        self.keys: dict[str, ConfigKey] = {}
        self.families: list[KeyFamily] = []

    def define(
        self,
        name: str,
        type: Type,
        default: Any = None,
        validator: Validator | None = None,
        *,
        doc: str,
        default_doc: str | None = None,
        blank_is_default: bool = True,
    ) -> ConfigDef:
        """Declare ``name``; returns ``self`` for chaining. Declaring a name twice is a bug."""
        if name in self.keys:
            raise ValueError(f"{name}: declared twice")
        self.keys[name] = ConfigKey(
            name, type, default, validator, doc, default_doc, blank_is_default
        )
        return self

    def family(self, pattern: str, doc: str, *, prefix: str | None = None) -> ConfigDef:
        """Declare a group of keys (see :class:`KeyFamily`); returns ``self``."""
        self.families.append(KeyFamily(pattern, doc, prefix))
        return self

    def names(self) -> frozenset[str]:
        return frozenset(self.keys)

    @property
    def prefixes(self) -> tuple[str, ...]:
        return tuple(f.prefix for f in self.families if f.prefix is not None)

    # -- parsing -------------------------------------------------------------------------

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every declared key's value, by name; raises ``error`` at the first bad key (in
        declaration order). Undeclared keys are ignored here: see :meth:`check_known`."""
        return {name: self.parse_key(props, name) for name in self.keys}

    def parse_key(self, props: Mapping[str, Any], name: str) -> Any:
        """One declared key's value (for a key read only when another says so)."""
        key = self.keys[name]
        raw = props.get(name)
        stripped = options.text(props, name)
        if stripped is None:
            if raw is not None and not key.blank_is_default:
                return () if key.type is Type.LIST else ""
            if key.default is REQUIRED:
                raise self.error(f"{name}: expected a value, found none")
            return key.default
        value = self._typed(key, props, stripped)
        if key.validator is not None:
            problem = key.validator.check(value, str(raw))
            if problem is not None:
                raise self.error(f"{name}: {problem}")
        return value

    def _typed(self, key: ConfigKey, props: Mapping[str, Any], text: str) -> Any:
        error, name, validator = self.error, key.name, key.validator
        if key.type is Type.BOOLEAN:
            return options.boolean(props, name, False, error=error)
        if key.type is Type.INT:
            if isinstance(validator, Range) and validator.positive:
                return options.positive_int(props, name, error=error)
            minimum = validator.minimum if isinstance(validator, Range) else None
            return options.integer(props, name, 0, minimum=minimum, error=error)
        if key.type is Type.LIST:
            return options.names(props, name)
        return text.lower() if isinstance(validator, OneOf) else text

    # -- unknown keys ----------------------------------------------------------------------

    def unknown(self, props: Iterable[str], extra: Collection[str] = ()) -> list[str]:
        """The keys of ``props`` neither declared, nor in ``extra``, nor under a family's
        prefix; sorted."""
        known = self.keys.keys() | set(extra)
        return sorted(k for k in props if k not in known and not k.startswith(self.prefixes))

    def check_known(self, props: Mapping[str, Any], extra: Collection[str] = ()) -> None:
        """Refuse the first unknown key, naming the nearest known one ("did you mean")."""
        options.check_known_keys(
            props,
            self.keys.keys() | set(extra),
            prefixes=self.prefixes,
            what=self.what,
            error=self.error,
        )

    # -- docs ------------------------------------------------------------------------------

    def to_markdown(self) -> str:
        """The Markdown table of the declarations: key, type, default, valid values, doc; the
        families last."""
        rows = ["| Key | Type | Default | Valid values | Description |", "|---|---|---|---|---|"]
        for key in self.keys.values():
            valid = key.validator.describe() if key.validator is not None else ""
            cells = (f"`{key.name}`", key.type.value, _default_text(key), valid, key.doc)
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        for family in self.families:
            cells = (f"`{family.pattern}`", "", "", "", family.doc)
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        return "\n".join(rows) + "\n"


def _default_text(key: ConfigKey) -> str:
    if key.default_doc is not None:
        return key.default_doc
    default = key.default
    if default is REQUIRED:
        return "(required)"
    if default is None:
        return ""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return ",".join(default) if default else '""'
    return f"{default}"


# Outside code spans: a backslash, <, > and *, and an _ not inside a word (one inside a word,
# BACKWARD_TRANSITIVE, cannot open emphasis in CommonMark and stays as it is).
_MARKUP = re.compile(r"[\\<>*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _cell(text: str) -> str:
    """A table cell: one line; outside `code spans` the characters Markdown would read as
    markup (``<`` opens an HTML tag, ``*`` and ``_`` emphasis) are escaped; ``|`` everywhere
    (GitHub's tables split cells on it even inside code spans)."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = _MARKUP.sub(r"\\\g<0>", parts[i])
    return "`".join(parts).replace("|", "\\|")
