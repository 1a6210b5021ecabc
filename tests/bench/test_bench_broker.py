"""bench.bench_broker's minimal Fetch client: the request it patches in place is the request
the generic builder makes, and its walk finds the offset after the last batch — against a real
broker's responses."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.bench_broker import (
    FetchClient,
    _fetch_request_template,
    produce,
    raw_fetch_rate,
    start_broker,
)
from sluice.broker.protocol.codec import decode_request


@pytest.mark.parametrize(("offset", "cid"), [(0, 1), (123_456_789, 2**31 - 1), (2**62, 7)])
def test_the_patched_template_decodes_as_the_request_asked_for(offset: int, cid: int) -> None:
    request, offset_at, id_at = _fetch_request_template("bench-fetch")
    struct.pack_into(">q", request, offset_at, offset)
    struct.pack_into(">i", request, id_at, cid)
    (size,) = struct.unpack_from(">i", request)
    assert size == len(request) - 4
    decoded = decode_request(request[4:])
    assert decoded.correlation_id == cid
    (topic,) = decoded.body.topics
    assert topic.topic == "bench-fetch"
    (partition,) = topic.partitions
    assert partition.fetch_offset == offset
    assert partition.partition_max_bytes == 1 << 20


def test_the_walk_lands_on_each_next_offset_and_the_rate_reads_to_the_end(tmp_path: Path) -> None:
    """Fetching from each walked offset in turn visits every message once: the last response
    ends exactly at the topic's end. ``raw_fetch_rate`` then reads the topic through."""
    broker = start_broker(tmp_path)
    try:
        count = 20_000
        produce(broker.bootstrap, "walk", count, {"batch.num.messages": 50, "linger.ms": 5})
        client = FetchClient(broker.port, "walk", timeout=10)
        offsets = [0]
        try:
            while offsets[-1] < count:
                following = client.fetch(offsets[-1])[1]
                assert following > offsets[-1], f"no progress at offset {offsets[-1]}"
                offsets.append(following)
        finally:
            client.close()
        assert offsets[-1] == count
        assert len(offsets) > 2  # 20,000 × 200 B: more than one 1 MiB response
        assert raw_fetch_rate(broker.port, "walk", count) > 0
    finally:
        broker.stop()
