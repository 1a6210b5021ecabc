"""How a fetch response reaches the socket (``sluice.broker.server.response_writer``), over a
real loopback TCP connection: the segments it leaves in, counted by the kernel."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from pathlib import Path
from typing import Any

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse
from sluice.broker.server.response_writer import write_response

# struct tcp_info (linux/tcp.h): tcpi_segs_out, a u32 at byte 136 (Linux >= 4.2).
SEGS_OUT = 136


def _segments_sent(sock: Any) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, SEGS_OUT)[0])


def _receive(sock: socket.socket, n: int) -> bytes:
    got = b""
    sock.settimeout(5)
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def test_a_fetch_response_header_leaves_with_its_records_in_one_segment(tmp_path: Path) -> None:
    """With TCP_NODELAY (as asyncio sets it on the broker's accepted connections), a header
    written before the ``sendfile`` went out as a segment of its own; corked, header and
    records share one."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(4096))
    fd = os.open(path, os.O_RDONLY)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    header = b"h" * 72
    response = EncodedFetchResponse([header, FileSlice(fd, 100, 1000)], 1072)

    async def send() -> int:
        _, writer = await asyncio.open_connection(sock=accepted)
        raw = writer.get_extra_info("socket")
        before = _segments_sent(raw)
        await write_response(writer, response)
        sent = _segments_sent(raw) - before
        writer.close()
        await writer.wait_closed()
        return sent

    try:
        segments = asyncio.run(send())
        assert _receive(client, 1072) == header + path.read_bytes()[100:1100]
        assert segments == 1, f"expected header and records in one segment, found {segments}"
    finally:
        os.close(fd)
        client.close()
        listener.close()
