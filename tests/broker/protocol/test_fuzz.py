"""Fuzzing decode_request: random and mutated frames raise only the codec's remote errors."""

from __future__ import annotations

import contextlib
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.broker.protocol import apis
from sluice.broker.protocol.apis import APIS
from sluice.broker.protocol.codec import decode_request, encode_request
from sluice.broker.protocol.errors import RemoteProtocolError, UnsupportedVersion

FUZZ = settings(
    max_examples=400,
    # No hypothesis deadline (a loaded 2-core CI box would make it flaky); the bound below
    # still catches what matters: an absurd allocation or loop takes minutes, not seconds.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PAIRS = [(key, v) for key, spec in sorted(APIS.items()) for v in spec.versions]


def _decode_or_remote_error(frame: bytes) -> None:
    start = time.perf_counter()
    with contextlib.suppress(RemoteProtocolError, UnsupportedVersion):
        decode_request(frame)
    assert time.perf_counter() - start < 5.0


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(frame: bytes) -> None:
    _decode_or_remote_error(frame)


@FUZZ
@given(
    pair=st.sampled_from(PAIRS),
    corr=st.integers(0, 1000),
    tail=st.binary(max_size=120),
)
def test_valid_header_random_body(pair: tuple[int, int], corr: int, tail: bytes) -> None:
    key, version = pair
    header = key.to_bytes(2, "big") + version.to_bytes(2, "big") + corr.to_bytes(4, "big")
    client = b"\x00\x01c" + (b"\x00" if apis.request_header_version(key, version) == 2 else b"")
    _decode_or_remote_error(header + client + tail)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    key, version = draw(st.sampled_from(PAIRS))
    body = draw(st.from_type(apis.request_type(key, version)))
    frame = bytearray(encode_request(1, "fuzz", body)[4:])
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "set", "truncate", "insert", "big"]))
        if not frame:
            break
        at = draw(st.integers(0, len(frame) - 1))
        if action == "flip":
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            frame[at] = draw(st.integers(0, 255))
        elif action == "truncate":
            del frame[at:]
        elif action == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:  # plant a huge length or count anywhere
            frame[at : at + 4] = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe"]))
    return bytes(frame)


@FUZZ
@given(mutated_frames())
def test_mutated_valid_frames(frame: bytes) -> None:
    _decode_or_remote_error(frame)
