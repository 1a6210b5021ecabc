"""How a broker connection's responses reach the socket: pipelined responses batched into one
write, fetch responses' record bytes zero-copy.

Fetch responses go out zero-copy (``sendfile`` from the segment file) on plaintext
connections. TLS cannot take ``sendfile`` (the bytes must be encrypted in user space), so on a
TLS connection the file slice is read with ``pread`` in ``TLS_READ_CHUNK`` pieces and written
through the TLS transport — asyncio's own fallback would hop to a thread for every 16 KiB.

On plaintext TCP a fetch response with file slices is written corked (``TCP_CORK``, Linux):
its header pieces and record bytes leave in full segments, the header not alone. Uncorked,
with ``TCP_NODELAY`` (asyncio's default), the header's ``send`` went out as a segment of its
own before the ``sendfile``; librdkafka reads a frame's size and then the rest, so it woke
for the header, read it, found nothing more (``EAGAIN``) and waited again — 8 responses of
109 in a traced read of a default-batched topic. Corking costs two ``setsockopt`` calls a
response.

Runs on the broker's event loop; one writer is written by one connection task at a time.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse

# What a fetch over TLS reads of a segment per pread (sendfile cannot cross TLS).
TLS_READ_CHUNK = 1 << 20
# Buffered bytes above which a write waits for the socket to drain.
DRAIN_ABOVE = 1 << 20
# Linux's TCP_CORK (None elsewhere: responses are then written uncorked).
TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)


class FdFile:
    """What ``loop.sendfile`` needs of a file, over a segment's open fd: ``fileno`` and
    ``seek`` for the native ``os.sendfile`` path, and ``readinto`` (with a position kept by
    ``seek``) for asyncio's fallback, taken when the transport cannot sendfile natively —
    e.g. while it is closing. Reads use ``pread``, so the shared fd's offset never moves."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._position = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0:
            raise ValueError(f"expected an absolute seek (whence 0), found whence {whence}")
        self._position = offset
        return offset

    def readinto(self, buffer: memoryview | bytearray) -> int:
        read = os.preadv(self._fd, [buffer], self._position)
        self._position += read
        return read


async def flush_pending(writer: asyncio.StreamWriter, pending: list[bytes]) -> None:
    """Write the responses ``pending`` (then empty) in one write; wait for the socket only
    when more than ``DRAIN_ABOVE`` bytes are buffered."""
    if not pending:
        return
    writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
    pending.clear()
    if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
        await writer.drain()


def _cork(sock: Any, on: bool) -> bool:
    """Set ``TCP_CORK`` on ``sock``; False where it cannot be (no TCP_CORK here, not a TCP
    socket, or closed meanwhile)."""
    if TCP_CORK is None or sock is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CORK, int(on))
    except OSError:
        return False
    return True


async def write_response(
    writer: asyncio.StreamWriter, response: bytes | EncodedFetchResponse
) -> None:
    """Write one response: bytes as they are; a fetch response's file slices zero-copy
    (``sendfile``) on plaintext — corked, so the header leaves with the records —, in
    ``TLS_READ_CHUNK`` preads over TLS."""
    if isinstance(response, bytes):
        writer.write(response)
        if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
            await writer.drain()
        return
    tls = writer.get_extra_info("ssl_object") is not None
    sendfile = not tls and any(isinstance(c, FileSlice) for c in response.chunks)
    sock = writer.get_extra_info("socket") if sendfile else None
    corked = _cork(sock, True)
    try:
        await _write_chunks(writer, response, tls)
    finally:
        if corked:
            _cork(sock, False)  # what is held goes now
    await writer.drain()


async def _write_chunks(
    writer: asyncio.StreamWriter, response: EncodedFetchResponse, tls: bool
) -> None:
    loop = asyncio.get_running_loop()
    for chunk in response.chunks:
        if isinstance(chunk, bytes | bytearray | memoryview):
            writer.write(chunk)
        elif tls:
            # No sendfile through TLS: pread the slice and let the transport encrypt it.
            assert isinstance(chunk, FileSlice)
            position, end = chunk.position, chunk.position + chunk.size
            while position < end:
                data = os.pread(chunk.fd, min(TLS_READ_CHUNK, end - position), position)
                if not data:  # truncated under us: the frame size is wrong now
                    raise ConnectionResetError("segment truncated during a TLS fetch")
                writer.write(data)
                position += len(data)
                await writer.drain()
        else:
            # Zero copy: the record bytes go from the segment file to the socket.
            assert isinstance(chunk, FileSlice)
            await writer.drain()
            await loop.sendfile(
                writer.transport,
                FdFile(chunk.fd),  # type: ignore[arg-type]  # file-like enough for sendfile
                chunk.position,
                chunk.size,
            )
