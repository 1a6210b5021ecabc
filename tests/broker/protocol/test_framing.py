"""FrameDecoder: pipelining, arbitrary splits, size limits, EOF."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.protocol.errors import LocalProtocolError, RemoteProtocolError
from sluice.broker.protocol.framing import DEFAULT_MAX_REQUEST_BYTES, NEED_DATA, FrameDecoder


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def drain(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while True:
        item = decoder.next_frame()
        if item is NEED_DATA:
            return out
        assert isinstance(item, bytes)
        out.append(item)


PAYLOADS = [b"first", b"", b"x" * 300, bytes(range(256)), b"last frame"]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def test_default_limit_is_kafkas() -> None:
    assert DEFAULT_MAX_REQUEST_BYTES == 104857600
    assert FrameDecoder().max_frame_bytes == 104857600


def test_one_chunk_many_frames() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(STREAM)
    assert drain(decoder) == PAYLOADS
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_split_at_every_byte_boundary(cut: int) -> None:
    decoder = FrameDecoder()
    got: list[bytes] = []
    for chunk in (STREAM[:cut], STREAM[cut:]):
        if chunk:  # b"" would mean EOF
            decoder.receive_data(chunk)
        got += drain(decoder)
    assert got == PAYLOADS


def test_byte_by_byte() -> None:
    decoder = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(STREAM)):
        decoder.receive_data(STREAM[i : i + 1])
        got += drain(decoder)
    assert got == PAYLOADS


@given(st.lists(st.binary(max_size=40), max_size=12), st.data())
@settings(max_examples=200, deadline=None)
def test_random_splits(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = FrameDecoder()
    got: list[bytes] = []
    for start, stop in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if stop > start:  # an empty chunk would mean EOF
            decoder.receive_data(memoryview(stream)[start:stop])
        got += drain(decoder)
    assert got == payloads


def test_oversized_rejected_before_buffering_the_body() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    # The prefix alone is enough: the error comes at once, with none of the body buffered.
    with pytest.raises(RemoteProtocolError, match="exceeds the maximum"):
        decoder.receive_data(struct.pack(">i", 1001))


def test_oversized_default_limit_two_gib() -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        decoder.receive_data(b"\x7f\xff\xff\xff")


def test_oversized_after_a_good_frame_is_rejected_at_next_frame() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.receive_data(frame(b"ok") + struct.pack(">i", 11))
    assert decoder.next_frame() == b"ok"
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_exactly_max_size_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.receive_data(frame(b"0123456789"))
    assert decoder.next_frame() == b"0123456789"


@pytest.mark.parametrize("size", [-1, -(2**31), -5])
def test_negative_size_rejected(size: int) -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="negative"):
        decoder.receive_data(struct.pack(">i", size) + b"junk")


def test_eof_between_frames_and_mid_frame() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(frame(b"abc"))
    decoder.receive_data(b"")
    assert decoder.at_eof
    assert decoder.next_frame() == b"abc"
    assert decoder.next_frame() is NEED_DATA
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"more")

    cut = FrameDecoder()
    cut.receive_data(frame(b"abcdef")[:-2])
    cut.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="closed in the middle"):
        cut.next_frame()


def test_pipelined_small_frames_are_linear() -> None:
    # 200k tiny frames in one buffer: quadratic copying would take minutes, linear is < 2 s.
    n = 200_000
    stream = frame(b"x") * n
    decoder = FrameDecoder()
    start = time.perf_counter()
    decoder.receive_data(stream)
    count = len(drain(decoder))
    elapsed = time.perf_counter() - start
    assert count == n
    assert elapsed < 5.0, elapsed


def test_large_frame_in_many_chunks() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = frame(payload)
    decoder = FrameDecoder()
    got: list[bytes] = []
    for i in range(0, len(stream), 65536):
        decoder.receive_data(stream[i : i + 65536])
        got += drain(decoder)
    assert got == [payload]
