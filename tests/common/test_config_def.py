"""Tests for sluice.common.config_def: keys declared once, parsed, checked and documented."""

from __future__ import annotations

import pytest

from sluice.common.config_def import (
    POSITIVE,
    REQUIRED,
    Check,
    ConfigDef,
    OneOf,
    Range,
    Type,
)
from sluice.common.options import InvalidOptionError


class ToyConfigError(ValueError):
    pass


def _toy() -> ConfigDef:
    return (
        ConfigDef(error=ToyConfigError, what="toy config")
        .define("name", Type.STRING, REQUIRED, doc="who")
        .define("retries", Type.INT, 3, Range.at_least(0), doc="attempts")
        .define("depth", Type.INT, 64, Range.between(1, 256), doc="nesting")
        .define("size", Type.INT, None, POSITIVE, doc="bytes | none")
        .define("enabled", Type.BOOLEAN, True, doc="on")
        .define("hosts", Type.LIST, ("a", "b"), doc="where")
        .define("patterns", Type.LIST, (".*",), doc="regexes", blank_is_default=False)
        .define("mode", Type.STRING, "load", OneOf("load", "audit"), doc="cutoff")
        .define("level", Type.STRING, "info", OneOf("debug", "info", "warn"), doc="log level")
        .define(
            "even",
            Type.INT,
            2,
            Check("even numbers", lambda v: None if v % 2 == 0 else f"expected even, found {v}"),
            doc="an even number",
        )
        .family("kafka.<key>", "to every consumer", prefix="kafka.")
        .family("<alias>.bootstrap.servers", "one per alias")
    )


def test_missing_and_blank_keys_take_their_defaults() -> None:
    for props in ({"name": "x"}, {"name": "x", "retries": " ", "hosts": "", "mode": ""}):
        assert _toy().parse(props) == {
            "name": "x",
            "retries": 3,
            "depth": 64,
            "size": None,
            "enabled": True,
            "hosts": ("a", "b"),
            "patterns": (".*",),
            "mode": "load",
            "level": "info",
            "even": 2,
        }


def test_values_are_typed_stripped_and_lower_cased_for_one_of() -> None:
    values = _toy().parse(
        {
            "name": " y ",
            "retries": "0",
            "depth": "256",
            "size": "10",
            "enabled": "FALSE",
            "hosts": " c, ,d ",
            "patterns": "",
            "mode": "AUDIT",
            "level": "Debug",
            "even": 4,
        }
    )
    assert values == {
        "name": "y",
        "retries": 0,
        "depth": 256,
        "size": 10,
        "enabled": False,
        "hosts": ("c", "d"),
        "patterns": (),  # blank_is_default=False: a blank value lists none
        "mode": "audit",
        "level": "debug",
        "even": 4,
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"name": " "}, "name: expected a value, found none"),
        ({"retries": "-1"}, "retries: expected an integer >= 0, found -1"),
        ({"retries": "many"}, "retries: expected an integer, found 'many'"),
        ({"depth": "0"}, "depth: expected an integer >= 1, found 0"),
        ({"depth": "257"}, "depth: expected an integer <= 256, found 257"),
        ({"size": "0"}, "size: expected a positive integer, found '0'"),
        ({"size": "1e3"}, "size: expected a positive integer, found '1e3'"),
        ({"enabled": "yes"}, "enabled: expected true or false, found 'yes'"),
        ({"mode": "later"}, "mode: expected load or audit, found 'later'"),
        ({"level": "loud"}, "level: expected one of debug, info, warn, found 'loud'"),
        ({"even": "3"}, "even: expected even, found 3"),
    ],
)
def test_a_bad_value_is_one_error_naming_key_expected_and_found(
    props: dict[str, str], message: str
) -> None:
    with pytest.raises(ToyConfigError) as caught:
        _toy().parse({"name": "x", **props})
    assert str(caught.value) == message


def test_the_default_error_type_is_invalid_option_error() -> None:
    with pytest.raises(InvalidOptionError, match="n: expected a value, found none"):
        ConfigDef().define("n", Type.STRING, REQUIRED, doc="").parse({})


def test_one_key_parses_alone() -> None:
    assert _toy().parse_key({"retries": "7"}, "retries") == 7


def test_unknown_keys_get_did_you_mean_and_prefixed_families_pass_through() -> None:
    toy = _toy()
    props = {"name": "x", "kafka.acks": "all", "live.bootstrap.servers": "h:1"}
    toy.check_known(props, extra={"live.bootstrap.servers"})
    assert toy.unknown(props) == ["live.bootstrap.servers"]
    with pytest.raises(
        ToyConfigError, match=r"^retires: not a key of this toy config; did you mean 'retries'\?$"
    ):
        toy.check_known({"retires": "1"})
    with pytest.raises(ToyConfigError, match="spark.master: not a key of this toy config$"):
        toy.check_known({"spark.master": "local"})


def test_a_key_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        ConfigDef().define("a", Type.INT, doc="").define("a", Type.INT, doc="")


def test_the_markdown_table_has_one_row_per_key_then_the_families() -> None:
    table = _toy().to_markdown().splitlines()
    assert table[0] == "| Key | Type | Default | Valid values | Description |"
    assert table[1] == "|---|---|---|---|---|"
    assert table[2] == "| `name` | string | (required) |  | who |"
    assert table[3] == "| `retries` | int | 3 | [0,...] | attempts |"
    assert table[4] == "| `depth` | int | 64 | [1,...,256] | nesting |"
    assert table[5] == "| `size` | int |  | [1,...] | bytes \\| none |"
    assert table[6] == "| `enabled` | boolean | true |  | on |"
    assert table[7] == "| `hosts` | list | a,b |  | where |"
    assert table[9] == "| `mode` | string | load | load, audit | cutoff |"
    assert table[11] == "| `even` | int | 2 | even numbers | an even number |"
    assert table[12:] == [
        "| `kafka.<key>` |  |  |  | to every consumer |",
        "| `<alias>.bootstrap.servers` |  |  |  | one per alias |",
    ]


def test_cells_escape_markup_outside_code_spans_only() -> None:
    table = (
        ConfigDef()
        .define("a", Type.STRING, doc="one per <alias>, *any* __x__ `<kept> *as is*` a|b")
        .to_markdown()
    )
    assert table.splitlines()[2] == (
        r"| `a` | string |  |  | one per \<alias\>, \*any\* \_\_x\_\_ `<kept> *as is*` a\|b |"
    )
