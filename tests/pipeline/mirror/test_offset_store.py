"""``sluice.pipeline.mirror.offset_store``: the stored layout (Kafka Connect's offsets records,
as MirrorMaker 2 writes them) encoded and decoded, and a malformed record refused. The store
against real brokers: ``test_exactly_once``."""

from __future__ import annotations

import json

import pytest

from sluice.pipeline.mirror.errors import MirrorOffsetsError
from sluice.pipeline.mirror.offset_store import decode_record, encode_key, encode_value


def test_the_layout_is_connect_s_offsets_record() -> None:
    key = encode_key("sluice-mirror", "live", "page_views", 3)
    assert key == b'["sluice-mirror",{"cluster":"live","partition":3,"topic":"page_views"}]'
    # MirrorSourceTask stores the last offset copied; the loop resumes one past it.
    assert encode_value(1000) == b'{"offset":999}'
    assert encode_value(0) == b'{"offset":-1}'
    assert encode_key("g", "a", "t", 0) == encode_key("g", "a", "t", 0)  # same bytes: compaction


def test_decoding_round_trips_and_skips_other_groups_and_aliases() -> None:
    key = encode_key("g", "live", "t", 2)
    assert decode_record(key, encode_value(41), "g", "live", "x") == (("t", 2), 41)
    assert decode_record(key, encode_value(0), "g", "live", "x") == (("t", 2), 0)
    assert decode_record(key, None, "g", "live", "x") == (("t", 2), None)  # a tombstone
    assert decode_record(key, encode_value(5), "other", "live", "x") is None
    assert decode_record(key, encode_value(5), "g", "live-b", "x") is None
    # Written by Java's JsonConverter with another key order: the same position.
    java = json.dumps(["g", {"topic": "t", "partition": 2, "cluster": "live"}]).encode()
    assert decode_record(java, b'{"offset": 9}', "g", "live", "x") == (("t", 2), 10)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"not json", b'{"offset":1}'),
        (None, b'{"offset":1}'),
        (b'["g"]', b'{"offset":1}'),
        (b'["g",{"cluster":"live","partition":"0","topic":"t"}]', b'{"offset":1}'),
        (b'["g",{"cluster":"live","partition":0}]', b'{"offset":1}'),
        (b'["g",{"cluster":"live","partition":0,"topic":"t"}]', b'{"position":1}'),
        (b'["g",{"cluster":"live","partition":0,"topic":"t"}]', b'{"offset":-5}'),
    ],
)
def test_a_malformed_record_is_refused_with_its_position(key: bytes | None, value: bytes) -> None:
    with pytest.raises(MirrorOffsetsError, match=r"mm2-offsets.live.internal/0/7: expected a key"):
        decode_record(key, value, "g", "live", "mm2-offsets.live.internal/0/7")
