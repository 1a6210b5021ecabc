"""How a broker connection's responses reach the socket: pipelined responses batched into one
write, fetch responses' record bytes zero-copy.

Fetch responses go out zero-copy (``sendfile`` from the segment file) on plaintext
connections. TLS cannot take ``sendfile`` (the bytes must be encrypted in user space), so on a
TLS connection the file slice is read with ``pread`` in ``TLS_READ_CHUNK`` pieces and written
through the TLS transport — asyncio's own fallback would hop to a thread for every 16 KiB.

Runs on the broker's event loop; one writer is written by one connection task at a time.
"""

from __future__ import annotations

import asyncio
import os

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse

# What a fetch over TLS reads of a segment per pread (sendfile cannot cross TLS).
TLS_READ_CHUNK = 1 << 20
# Buffered bytes above which a write waits for the socket to drain.
DRAIN_ABOVE = 1 << 20


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


async def write_response(
    writer: asyncio.StreamWriter, response: bytes | EncodedFetchResponse
) -> None:
    """Write one response: bytes as they are; a fetch response's file slices zero-copy
    (``sendfile``) on plaintext, in ``TLS_READ_CHUNK`` preads over TLS."""
    if isinstance(response, bytes):
        writer.write(response)
        if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
            await writer.drain()
        return
    loop = asyncio.get_running_loop()
    tls = writer.get_extra_info("ssl_object") is not None
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
    await writer.drain()
