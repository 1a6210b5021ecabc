"""The lineage header: round trips, the origin rule, and clear errors for bad values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.pipeline.lineage import (
    LINEAGE_HEADER,
    Lineage,
    LineageError,
    check_cluster_alias,
    origin,
)

names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)


@given(names, names, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))
def test_encode_decode_round_trip(cluster: str, topic: str, partition: int, offset: int) -> None:
    lineage = Lineage(cluster, topic, partition, offset)
    assert Lineage.decode(lineage.encode()) == lineage
    assert Lineage.decode(lineage.encode().decode()) == lineage


def test_bytes_are_the_documented_form() -> None:
    assert Lineage("live-a", "page_view", 3, 1042).encode() == b"live-a/page_view/3/1042"


def test_origin_keeps_an_existing_header() -> None:
    headers = [("other", b"x"), (LINEAGE_HEADER, b"live-a/page_view/3/1042")]
    assert origin(headers, "offline", "page_view", 0, 7) == Lineage("live-a", "page_view", 3, 1042)


def test_origin_without_header_is_the_record_itself() -> None:
    assert origin(None, "live-b", "t", 1, 5) == Lineage("live-b", "t", 1, 5)
    assert origin([("k", None)], "live-b", "t", 1, 5) == Lineage("live-b", "t", 1, 5)


@pytest.mark.parametrize(
    "value", [b"", b"a/b/c", b"a/b/1/x", b"a/b/-1/2", b"a/b/1/2/3", b"a b/t/1/2", b"/t/1/2"]
)
def test_malformed_values_are_rejected_with_the_value(value: bytes) -> None:
    with pytest.raises(LineageError, match="found"):
        Lineage.decode(value)


def test_bad_alias() -> None:
    with pytest.raises(LineageError, match="live/a"):
        check_cluster_alias("live/a")
    assert check_cluster_alias("live-a") == "live-a"
