"""Tests for sluice.common.text_table."""

from sluice.common.text_table import render_table


def test_first_column_left_the_rest_right_aligned() -> None:
    table = render_table(["topic", "rows"], [["a", "5"], ["long-name", "12345"]])
    assert table.split("\n") == [
        "topic       rows",
        "---------  -----",
        "a              5",
        "long-name  12345",
    ]
