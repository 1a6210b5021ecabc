"""The pre-flight bounds check: absurd counts are refused before kio allocates for them."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sluice.broker.protocol.codec import decode_request
from sluice.broker.protocol.errors import RemoteProtocolError
from sluice.broker.protocol.headers import RequestHeader, encode_request_header

ROOT = Path(__file__).resolve().parents[3]


def request(key: int, version: int, body: bytes) -> bytes:
    return encode_request_header(RequestHeader(key, version, 1, "c", 1)) + body


# Bodies that announce far more items than bytes left. kio 0.6.5 would reserve
# count * 8 bytes up front and abort the process when that fails.
ABSURD = {
    "metadata-topics": request(3, 8, b"\x7f\xff\xff\xff\x00\x05"),
    "produce-topics": request(0, 8, b"\xff\xff\x00\x01\x00\x00\x75\x30\x7f\xff\xff\xff"),
    "fetch-topics": request(1, 4, struct.pack(">iiiibi", -1, 0, 0, 0, 0, 0x7FFFFFFF)),
    "fetch-partitions": request(
        1, 4, struct.pack(">iiiibi", -1, 0, 0, 0, 0, 1) + b"\x00\x01t" + b"\x7f\xff\xff\xff"
    ),
    "offset-fetch-indexes": request(9, 2, b"\x00\x01g\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff"),
    "api-versions-v3-compact": encode_request_header(RequestHeader(18, 3, 1, "c", 2))
    + b"\xff\xff\xff\xff\x0f",  # compact string length varint 2**32 - 1
}


@pytest.mark.parametrize("name", sorted(ABSURD))
def test_absurd_counts_are_remote_errors(name: str) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_request(ABSURD[name])


def test_count_that_fits_is_accepted_by_the_walk() -> None:
    # 3 topics announced, 3 given: the walk passes and kio decodes.
    topics = b"".join(b"\x00\x01" + name for name in (b"a", b"b", b"c"))
    got = decode_request(request(3, 1, b"\x00\x00\x00\x03" + topics))
    assert [t.name for t in got.body.topics] == ["a", "b", "c"]


def test_one_item_too_many_is_refused() -> None:
    topics = b"".join(b"\x00\x01" + name for name in (b"a", b"b"))
    with pytest.raises(RemoteProtocolError):
        decode_request(request(3, 1, b"\x00\x00\x00\x03" + topics))


def test_guard_holds_under_a_memory_limit() -> None:
    # In a child limited to 2 GiB of address space: without the walk kio would try to reserve
    # 16 GiB and the process would abort; with it the child raises RemoteProtocolError and
    # exits cleanly.
    script = textwrap.dedent(
        f"""
        import resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        from sluice.broker.protocol.codec import decode_request
        from sluice.broker.protocol.errors import RemoteProtocolError
        frames = {list(ABSURD.values())!r}
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        for frame in frames:
            try:
                decode_request(frame)
            except RemoteProtocolError:
                pass
            else:
                sys.exit("decoded an absurd frame")
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_null_for_a_non_nullable_array_is_a_remote_protocol_error() -> None:
    """Found by the broker's fuzz test: kio decodes a -1 count as None even where the schema
    forbids null, and a handler iterating the field then raised TypeError."""
    import struct

    from sluice.broker.protocol import RemoteProtocolError, decode_request

    header = struct.pack(">hhih", 1, 11, 1, 1) + b"c"
    # Fetch v11: replica, max wait, min bytes, max bytes, isolation, session id, epoch,
    # then topics = null (-1), which Fetch does not allow.
    body = struct.pack(">iiiibii", -1, 100, 1, 1000, 0, 0, -1) + struct.pack(">i", -1)
    frame = header + body + struct.pack(">i", 0) + struct.pack(">h", 0)
    with pytest.raises(RemoteProtocolError, match="not nullable"):
        decode_request(frame)
