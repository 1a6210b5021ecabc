"""Decoding untrusted JSON text without recursion trouble: a nesting-depth walk, then ``json``.

CPython's ``json.loads`` recurses once per nested array or object, and so do the Avro parser, the
compatibility checker and ``repr`` of what it returns; text nested a few thousand levels deep
(``[[[[...]]]]``, 2 bytes a level) raises ``RecursionError`` from deep inside them. So every
JSON text the registry receives is measured first by :func:`nesting_depth` — an iterative scan
that never recurses — and decoded only when it is within the caller's limit.

:func:`loads` also refuses what ``json.loads`` accepts but JSON (RFC 8259) does not, because
each of these later breaks an encoder rather than the decoder:

* ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow a float (``1e999``): the
  registry's responses are rendered with ``allow_nan=False``;
* integers longer than Python's int-conversion limit (4,300 digits), which raise a bare
  ``ValueError``;
* lone UTF-16 surrogates (``"\\ud800"``): they decode to a ``str`` that cannot be encoded
  as UTF-8, so the file store could not write it and no response could carry it.

The depth of a text is the largest number of arrays and objects open at once: ``1`` is depth 0,
``[]`` and ``{}`` depth 1, ``{"a": [1]}`` depth 2. Brackets inside strings do not count.

Pure functions; thread-safe.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sluice.schemas.errors import SchemasError

# A complete string (possessive, so a long string is matched once, never backtracked), a
# bracket, or a quote that opens a string with no end. Text between tokens is skipped by the
# regex engine; only brackets come back to Python.
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]|"', re.DOTALL)
_OPEN = frozenset("[{")


class JsonTooDeepError(SchemasError):
    """The text nests arrays/objects deeper than the caller allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested more than {limit} levels deep")
        self.limit = limit


class JsonSyntaxError(SchemasError):
    """The text is not JSON, or holds a value JSON cannot carry (NaN, a lone surrogate...)."""


def nesting_depth(text: str, stop_above: int | None = None) -> int:
    """The nesting depth of ``text`` (see the module docstring), found without recursion.

    With ``stop_above``, the scan ends as soon as the depth exceeds it and returns
    ``stop_above + 1``: a hostile text costs no more than the prefix that proves it too deep.
    Text that is not JSON gets a depth too (an unterminated string ends the scan), which is
    all a limit check needs: :func:`json.loads` rejects it afterwards.
    """
    depth = deepest = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest
        elif token in "]}":
            depth -= 1
        elif len(token) == 1:  # a quote with no closing quote: the rest is one broken string
            break
    return deepest


def _reject_constant(name: str) -> Any:
    raise JsonSyntaxError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonSyntaxError(f"number {text[:40]} is out of range")
    return value


def loads(raw: str | bytes, max_depth: int) -> Any:
    """Decode ``raw`` (``bytes`` in UTF-8/16/32, as :func:`json.loads` detects them).

    Raise :class:`JsonTooDeepError` when it nests deeper than ``max_depth`` (checked before
    decoding), :class:`JsonSyntaxError` when it is not strict JSON (see the module docstring).
    """
    if isinstance(raw, bytes):
        encoding = json.detect_encoding(raw)
        try:
            raw = raw.decode(encoding)
        except UnicodeDecodeError as e:
            raise JsonSyntaxError(f"not {encoding} text ({e.reason} at byte {e.start})") from e
    if nesting_depth(raw, stop_above=max_depth) > max_depth:
        raise JsonTooDeepError(max_depth)
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except JsonSyntaxError:
        raise
    except RecursionError as e:  # only if max_depth is beyond the interpreter's reach
        raise JsonTooDeepError(max_depth) from e
    except json.JSONDecodeError as e:
        raise JsonSyntaxError(str(e)) from e
    except ValueError as e:  # int() refuses a literal over sys.get_int_max_str_digits()
        raise JsonSyntaxError(f"an integer is too long ({e})") from e
    try:
        # ensure_ascii=False keeps every str as is, so a lone surrogate reaches the encoder.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise JsonSyntaxError(f"a string holds a lone UTF-16 surrogate ({e.reason})") from e
    return value
