"""How a broker connection's responses reach the socket: pipelined responses batched into one
write, small fetch responses copied, large ones' record bytes zero-copy.

A fetch response of at most ``INLINE_MAX`` bytes (a follower's fetch of a few new batches, a
consumer's of the latest ones) is read into memory whole (``inline``: one ``pread`` per file
slice) and written with one ``send``: no ``TCP_CORK`` and no ``sendfile``. Zero copy costs more
than it saves there: the corked path below takes four system calls a response (cork, header
``send``, ``sendfile``, uncork), and under an ``acks=all`` round to 1,500 partitions py-spy put
a third of a leader's response writing in the two ``setsockopt`` calls alone; a copy of 64 KiB
from the page cache costs a few microseconds. It is written where the zero-copy one would be —
after the connection's pending responses, then drained — not added to those pending: joined to
them, an ``acks=all`` producer's default-batched throughput fell to a third (27–41 k against
77–123 k msg/s, the cause not found), so a fetch response leaves as it always did.

Larger fetch responses go out zero-copy (``sendfile`` from the segment file) on plaintext
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

A file slice goes first straight to the socket (``os.sendfile`` on the non-blocking socket,
while the transport holds nothing of ours, so order is kept), and only what the socket does
not take at once through ``loop.sendfile``: asyncio's call pays for two futures, four
``epoll_ctl`` and two turns of the loop even when one ``sendfile`` sends everything, and a
fetch request's whole cost is small enough for that to show (see ``_send_slice``). A segment
that ends before a slice does (truncated under the fetch) closes the connection with a
warning: the frame size already sent cannot be kept.

Runs on the broker's event loop; one writer is written by one connection task at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse

# Fetch responses of at most this many bytes are copied and written with the pending
# responses rather than corked and sent zero-copy (module docstring).
INLINE_MAX = 64 << 10
# What a fetch over TLS reads of a segment per pread (sendfile cannot cross TLS).
TLS_READ_CHUNK = 1 << 20
# Buffered bytes above which a write waits for the socket to drain.
DRAIN_ABOVE = 1 << 20
# Linux's TCP_CORK (None elsewhere: responses are then written uncorked).
TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)

log = logging.getLogger(__name__)


class FdFile:
    """What ``loop.sendfile`` needs of a file, over a segment's open fd: ``fileno`` and
    ``seek`` for the native ``os.sendfile`` path, and ``readinto`` (with a position kept by
    ``seek``) for asyncio's fallback, taken when the platform or the transport cannot
    sendfile natively (``SendfileNotAvailableError``). Reads use ``pread``, so the shared fd's
    offset never moves."""

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


def inline(response: EncodedFetchResponse) -> bytes | None:
    """``response`` as one ``bytes`` (its file slices read with ``pread``) if it is at most
    ``INLINE_MAX`` bytes; None if it is larger, or if a slice reads short (a segment truncated
    under the fetch: ``write_response`` then reports it and closes the connection, as for any
    response)."""
    if response.size > INLINE_MAX:
        return None
    pieces: list[bytes | bytearray | memoryview] = []
    for chunk in response.chunks:
        if isinstance(chunk, FileSlice):
            data = os.pread(chunk.fd, chunk.size, chunk.position)
            if len(data) != chunk.size:
                return None
            pieces.append(data)
        else:
            assert isinstance(chunk, bytes | bytearray | memoryview)
            pieces.append(chunk)
    return pieces[0] if len(pieces) == 1 and isinstance(pieces[0], bytes) else b"".join(pieces)


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
    """Write one response: bytes as they are; a fetch response of at most ``INLINE_MAX``
    bytes copied whole (``inline``), in one ``send``; a larger one's file slices zero-copy
    (``sendfile``) on plaintext — corked, so the header leaves with the records —, in
    ``TLS_READ_CHUNK`` preads over TLS."""
    if isinstance(response, bytes):
        writer.write(response)
        if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
            await writer.drain()
        return
    if (data := inline(response)) is not None:
        writer.write(data)  # header and records in one send, no cork
        await writer.drain()
        return
    await write_zero_copy(writer, response)


async def write_zero_copy(writer: asyncio.StreamWriter, response: EncodedFetchResponse) -> None:
    """Write a fetch response without copying its file slices: ``sendfile`` on plaintext,
    corked; ``TLS_READ_CHUNK`` preads over TLS (``write_response`` takes this path above
    ``INLINE_MAX``)."""
    tls = writer.get_extra_info("ssl_object") is not None
    sendfile = not tls and any(isinstance(c, FileSlice) for c in response.chunks)
    sock = writer.get_extra_info("socket") if sendfile else None
    corked = _cork(sock, True)
    try:
        await _write_chunks(writer, response, tls, sock)
    finally:
        if corked:
            _cork(sock, False)  # what is held goes now
    await writer.drain()


async def _write_chunks(
    writer: asyncio.StreamWriter, response: EncodedFetchResponse, tls: bool, sock: Any
) -> None:
    for chunk in response.chunks:
        if isinstance(chunk, bytes | bytearray | memoryview):
            writer.write(chunk)
        elif tls:
            # No sendfile through TLS: pread the slice and let the transport encrypt it.
            assert isinstance(chunk, FileSlice)
            position, end = chunk.position, chunk.position + chunk.size
            while position < end:
                data = os.pread(chunk.fd, min(TLS_READ_CHUNK, end - position), position)
                if not data:
                    raise _truncated(FileSlice(chunk.fd, position, end - position))
                writer.write(data)
                position += len(data)
                await writer.drain()
        else:
            # Zero copy: the record bytes go from the segment file to the socket.
            assert isinstance(chunk, FileSlice)
            await _send_slice(writer, sock, chunk)


async def _send_slice(writer: asyncio.StreamWriter, sock: Any, chunk: FileSlice) -> None:
    """``chunk`` zero-copy: with ``os.sendfile`` at once for as much as the socket takes, then
    through ``loop.sendfile`` (which waits for the socket) for the rest, if any.

    ``loop.sendfile`` alone costs, on every call, a reader paused and resumed and a writer
    registered and removed (four ``epoll_ctl``), two futures and two more turns of the loop —
    even when one ``sendfile`` takes the whole slice, as it did for every 1 MiB slice of a
    traced loopback fetch (the send buffer autotuned). Going first straight to the
    socket took the fetch path from 1,344 to 1,938 MB/s (medians of 8 alternating rounds, the
    same client); it is safe only while the transport holds nothing of ours, so that bytes
    written to the socket keep the response's order."""
    transport = writer.transport
    if transport.is_closing():  # the peer went away; loop.sendfile would raise RuntimeError
        raise ConnectionResetError("connection closed while a fetch response was being sent")
    position, size = chunk.position, chunk.size
    if not size:  # nothing to send (and loop.sendfile would read a count of 0 as "to EOF")
        return
    if sock is not None and not transport.get_write_buffer_size():
        sent = _sendfile_now(sock.fileno(), chunk)
        if sent == size:
            return
        position, size = position + sent, size - sent
    await writer.drain()
    sent = await asyncio.get_running_loop().sendfile(
        transport,
        FdFile(chunk.fd),  # type: ignore[arg-type]  # file-like enough for sendfile
        position,
        size,
    )
    if sent < size:
        raise _truncated(FileSlice(chunk.fd, position + sent, size - sent))


def _sendfile_now(socket_fd: int, chunk: FileSlice) -> int:
    """What of ``chunk`` the (non-blocking) socket takes now: bytes sent, 0 when it is full."""
    try:
        sent = os.sendfile(socket_fd, chunk.fd, chunk.position, chunk.size)
    except (BlockingIOError, InterruptedError):
        return 0
    if sent == 0:
        raise _truncated(chunk)
    return sent


def _truncated(rest: FileSlice) -> ConnectionResetError:
    """The error for a segment that ended before a fetch response's slice did (truncated under
    the fetch): the response's frame size is wrong now, so its connection cannot go on."""
    log.warning(
        "closing a connection: its fetch response's segment ended %d bytes short (fd %d, "
        "position %d); the segment was truncated during the fetch", rest.size, rest.fd,
        rest.position,
    )  # fmt: skip
    return ConnectionResetError(
        "segment truncated during a fetch: its response cannot be completed"
    )
