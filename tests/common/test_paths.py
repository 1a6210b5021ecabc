"""Tests for sluice.common.paths."""

import os

from sluice.common.paths import to_uri


def test_a_relative_path_becomes_an_absolute_file_uri() -> None:
    assert to_uri("warehouse") == "file://" + os.path.abspath("warehouse")


def test_uris_pass_through_without_their_trailing_slash() -> None:
    assert to_uri("hdfs://nn:8020/data/") == "hdfs://nn:8020/data"
    assert to_uri("file:///tmp/x") == "file:///tmp/x"
