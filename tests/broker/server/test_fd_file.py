"""The file object the broker hands to ``loop.sendfile``: both the native path and asyncio's
fallback (taken where the platform or transport cannot sendfile natively) must send exactly
the slice."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from sluice.broker.server.response_writer import FdFile


def test_fallback_sends_exactly_the_slice(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(range(256)) * 64)
    fd = os.open(path, os.O_RDONLY)
    left, right = socket.socketpair()

    async def send() -> int:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, left)
        # The fallback path (what asyncio does when native sendfile is not available).
        sent = await loop._sendfile_fallback(transport, FdFile(fd), 1000, 5000)  # type: ignore[attr-defined]
        transport.close()
        return sent

    try:
        assert asyncio.run(send()) == 5000
        received = b""
        right.settimeout(5)
        while len(received) < 5000:
            chunk = right.recv(65536)
            if not chunk:
                break
            received += chunk
        assert received == path.read_bytes()[1000:6000]
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # pread: the shared fd's offset is untouched
    finally:
        os.close(fd)
        right.close()
