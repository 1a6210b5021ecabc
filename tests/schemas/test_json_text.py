"""Bounded JSON decoding: the iterative depth scan against a recursive model, and strictness."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.schemas.json_text import JsonSyntaxError, JsonTooDeepError, loads, nesting_depth

bounded = settings(max_examples=200, deadline=None, database=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:', max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


def model_depth(value: Any) -> int:
    """The depth by recursion over the decoded value: what the scan must agree with."""
    if isinstance(value, list):
        return 1 + max((model_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((model_depth(v) for v in value.values()), default=0)
    return 0


@bounded
@given(json_values, st.sampled_from([None, 0, 2]))
def test_depth_matches_a_recursive_model(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    assert nesting_depth(text) == model_depth(value)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[["', 0),
        ("[]", 1),
        ('{"a": [1]}', 2),
        ('["]\\"]", [{}]]', 3),
        ('[["unterminated [[[[', 2),
    ],
)
def test_depth_examples(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


def test_depth_stops_once_over_the_limit() -> None:
    assert nesting_depth("[" * 1_000_000, stop_above=64) == 65
    assert nesting_depth("[" * 64 + "]" * 64, stop_above=64) == 64


def test_hostile_texts_are_scanned_in_linear_time() -> None:
    # Escaped quotes with no closing quote make a backtracking string pattern quadratic.
    for text in ('"\\"' * 300_000, '"' + '\\"' * 500_000, "[]" * 500_000, '"\\\\' * 300_000):
        started = time.monotonic()
        nesting_depth(text)
        assert time.monotonic() - started < 2.0, text[:10]


def test_loads_at_and_over_the_depth_limit() -> None:
    assert loads("[" * 64 + "]" * 64, 64) is not None
    with pytest.raises(JsonTooDeepError, match="more than 64 levels"):
        loads("[" * 65 + "]" * 65, 64)
    # Far deeper than json.loads itself survives: refused before it is called.
    with pytest.raises(JsonTooDeepError):
        loads(b"[" * 100_000 + b"]" * 100_000, 64)


@pytest.mark.parametrize(
    "raw",
    [
        b"NaN",
        b"[Infinity]",
        b'{"a": -Infinity}',
        b"[1e999]",
        b"1" * 5000,
        b'"\\ud800"',
        b'{"\\udfff": 1}',
        b"\xff\xfe\xff",
        b"{",
        b"[1,]",
        b"",
    ],
)
def test_loads_refuses_what_json_cannot_carry(raw: bytes) -> None:
    with pytest.raises(JsonSyntaxError):
        loads(raw, 64)


def test_loads_accepts_utf16_and_surrogate_pairs() -> None:
    assert loads('["\\ud83d\\ude00", "é"]'.encode("utf-16"), 4) == ["\U0001f600", "é"]
    assert loads('{"n": 1.5e300}', 4) == {"n": 1.5e300}
