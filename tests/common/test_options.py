"""Tests for sluice.common.options: one parser per value type, shared by every config."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.common.options import (
    InvalidOptionError,
    UnknownOptionKeyError,
    boolean,
    check_known_keys,
    integer,
    names,
    parse_boolean,
    positive_int,
    required,
    text,
)


class MyConfigError(ValueError):
    pass


def test_missing_and_blank_take_the_default() -> None:
    assert boolean({}, "a", True) is True
    assert boolean({"a": "  "}, "a", False) is False
    assert positive_int({}, "a") is None
    assert positive_int({"a": ""}, "a", 7) == 7
    assert integer({"a": " "}, "a", -3) == -3
    assert text({"a": "  "}, "a") is None
    assert names({}, "a") == ()


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FALSE", False), (" True ", True)])
def test_booleans_in_any_case(raw: str, expected: bool) -> None:
    assert boolean({"k": raw}, "k", not expected) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "t", "truee"])
def test_a_bad_boolean_names_the_key_the_form_and_the_value(raw: str) -> None:
    with pytest.raises(MyConfigError, match=rf"k: expected true or false, found '{raw}'"):
        boolean({"k": raw}, "k", True, error=MyConfigError)


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FaLsE", False), ("\tTRUE ", True)])
def test_parse_boolean_reads_a_value_as_kafkas_configdef_does(raw: str, expected: bool) -> None:
    assert parse_boolean("k", raw) is expected


@pytest.mark.parametrize("raw", ["", "  ", "yes", "0", "on"])
def test_parse_boolean_refuses_anything_else_blank_included(raw: str) -> None:
    # A value that is there has no default to fall back on (boolean() gives one for blank).
    with pytest.raises(MyConfigError, match=rf"k: expected true or false, found '{raw}'"):
        parse_boolean("k", raw, error=MyConfigError)


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "x", "٣"])
def test_positive_int_refuses_anything_but_a_positive_decimal(raw: str) -> None:
    with pytest.raises(InvalidOptionError, match="expected a positive integer"):
        positive_int({"k": raw}, "k")


def test_integer_bounds_and_form() -> None:
    assert integer({"k": "-5"}, "k", 0) == -5
    with pytest.raises(InvalidOptionError, match="expected an integer >= 1, found 0"):
        integer({"k": "0"}, "k", 5, minimum=1)
    with pytest.raises(MyConfigError, match="expected an integer, found 'ten'"):
        integer({"k": "ten"}, "k", 5, error=MyConfigError)


def test_names_are_stripped_and_blanks_dropped() -> None:
    assert names({"k": " a, b ,,c "}, "k") == ("a", "b", "c")


@given(st.integers(min_value=1, max_value=2**63))
def test_positive_int_round_trips(n: int) -> None:
    assert positive_int({"k": str(n)}, "k") == n


def test_required_names_the_missing_key() -> None:
    assert required({"k": " v "}, "k") == "v"
    with pytest.raises(MyConfigError, match="k: expected a value, found none"):
        required({"k": "  "}, "k", error=MyConfigError)


def test_unknown_keys_are_refused_with_the_nearest_known_one() -> None:
    known = {"failOnDataLoss", "topics", "warehouse.path"}
    check_known_keys({"topics": "t", "kafka.acks": "all"}, known, prefixes=("kafka.",))
    with pytest.raises(MyConfigError, match=r"failOnDataLos: not a key of this load config; "
                       r"did you mean 'failOnDataLoss'\?"):  # fmt: skip
        check_known_keys({"failOnDataLos": "false"}, known, what="load config",
                         error=MyConfigError)  # fmt: skip
    with pytest.raises(UnknownOptionKeyError, match="zzz: not a key of this configuration$"):
        check_known_keys({"zzz": "1"}, known)
