"""How a fetch response reaches the socket (``sluice.broker.server.response_writer``), over a
real loopback TCP connection: the segments it leaves in, counted by the kernel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.protocol import EncodedFetchResponse
from sluice.broker.server.response_writer import (
    INLINE_MAX,
    inline,
    write_response,
    write_zero_copy,
)

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


def _pair(sndbuf: int | None = None) -> tuple[socket.socket, socket.socket, socket.socket]:
    """(listener, client, accepted) over loopback; ``sndbuf`` shrinks the accepted side's send
    buffer and the client's receive buffer, so that a large response cannot go at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    if sndbuf is not None:
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, sndbuf)
    return listener, client, accepted


def test_a_fetch_response_header_leaves_with_its_records_in_one_segment(tmp_path: Path) -> None:
    """With TCP_NODELAY (as asyncio sets it on the broker's accepted connections), a header
    written before the ``sendfile`` went out as a segment of its own; corked, header and
    records share one (``write_zero_copy``, ``write_response``'s path above ``INLINE_MAX``)."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(4096))
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair()
    accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    header = b"h" * 72
    response = EncodedFetchResponse([header, FileSlice(fd, 100, 1000)], 1072)

    async def send() -> int:
        _, writer = await asyncio.open_connection(sock=accepted)
        raw = writer.get_extra_info("socket")
        before = _segments_sent(raw)
        await write_zero_copy(writer, response)
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


class _Reader(threading.Thread):
    """Reads ``n`` bytes from ``sock`` (slowly at first, ``delay`` s before the first read, so
    that the sender's socket fills up) into ``self.got``."""

    def __init__(self, sock: socket.socket, n: int, delay: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.sock, self.n, self.delay, self.got = sock, n, delay, b""

    def run(self) -> None:
        time.sleep(self.delay)
        self.got = _receive(self.sock, self.n)


async def _write(
    accepted: socket.socket, response: EncodedFetchResponse, *, count_loop_sendfile: bool = False
) -> int:
    """Write ``response`` through an asyncio stream over ``accepted``; how many times
    ``loop.sendfile`` was called (when counted)."""
    loop = asyncio.get_running_loop()
    calls = 0
    if count_loop_sendfile:
        real = loop.sendfile

        async def counted(*args: Any, **kwargs: Any) -> int:
            nonlocal calls
            calls += 1
            return await real(*args, **kwargs)

        loop.sendfile = counted  # type: ignore[method-assign]
    _, writer = await asyncio.open_connection(sock=accepted)
    try:
        await write_response(writer, response)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return calls


def test_a_slice_the_socket_takes_at_once_is_sent_without_loop_sendfile(tmp_path: Path) -> None:
    """The common case — the socket's buffer takes the whole slice — costs one ``sendfile``
    and none of ``loop.sendfile``'s futures and epoll registrations."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(256 * 1024))
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair()
    response = EncodedFetchResponse([b"header", FileSlice(fd, 10, 200_000), b"tail"], 200_010)
    try:
        calls = asyncio.run(_write(accepted, response, count_loop_sendfile=True))
        assert _receive(client, 200_010) == b"header" + path.read_bytes()[10:200_010] + b"tail"
        assert calls == 0, f"expected no loop.sendfile call, found {calls}"
    finally:
        os.close(fd)
        client.close()
        listener.close()


def test_slices_larger_than_the_socket_takes_arrive_whole_and_in_order(tmp_path: Path) -> None:
    """A slice the socket cannot take at once is finished by ``loop.sendfile``, and the bytes
    and slices after it wait their turn: what arrives is the response, byte for byte."""
    data = os.urandom(6 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair(sndbuf=16 * 1024)
    chunks: list[Any] = [
        b"h" * 100, FileSlice(fd, 0, 4 << 20), b"m" * 50_000, FileSlice(fd, 5 << 20, 1 << 20),
        b"t" * 10,
    ]  # fmt: skip
    size = 100 + (4 << 20) + 50_000 + (1 << 20) + 10
    expected = b"h" * 100 + data[: 4 << 20] + b"m" * 50_000 + data[5 << 20 :] + b"t" * 10
    reader = _Reader(client, size, delay=0.2)
    reader.start()
    try:
        calls = asyncio.run(
            _write(accepted, EncodedFetchResponse(chunks, size), count_loop_sendfile=True)
        )
        reader.join(30)
        assert reader.got == expected
        assert calls >= 1, (
            "expected the rest of a slice the socket did not take to go by loop.sendfile"
        )
    finally:
        os.close(fd)
        client.close()
        listener.close()


@pytest.mark.parametrize("socket_full", [False, True], ids=["at-once", "after-waiting"])
def test_a_segment_shorter_than_its_slice_closes_the_connection_with_a_warning(
    tmp_path: Path, socket_full: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A slice past the segment's end (the segment truncated under a fetch) cannot be
    completed: the frame size is already sent. The writer raises ``ConnectionResetError`` (the
    connection closes) and says why, whether the socket took the bytes at once or not."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(3 << 20))
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair(sndbuf=16 * 1024 if socket_full else None)
    # Full socket: the header alone (2 MiB) fills it, so the slice goes by loop.sendfile.
    header = b"h" * ((2 << 20) if socket_full else 100)
    response = EncodedFetchResponse(
        [header, FileSlice(fd, 1 << 20, 4 << 20)], len(header) + (4 << 20)
    )
    reader = _Reader(client, len(header) + (2 << 20), delay=0.2)
    reader.start()
    try:
        with (
            caplog.at_level(logging.WARNING),
            pytest.raises(ConnectionResetError, match="truncated"),
        ):
            asyncio.run(_write(accepted, response))
        assert "ended 2097152 bytes short" in caplog.text
        reader.join(30)
        assert reader.got == header + path.read_bytes()[1 << 20 :]
    finally:
        os.close(fd)
        client.close()
        listener.close()


def test_a_small_fetch_response_is_copied_and_sent_whole_without_cork_or_sendfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``INLINE_MAX`` bytes, a fetch response is read into memory (its slices with
    ``pread``) and written in one ``send``: one segment, byte for byte, no ``sendfile`` and no
    ``TCP_CORK``."""
    data = os.urandom(8192)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair()
    accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chunks: list[Any] = [b"h" * 40, FileSlice(fd, 100, 1000), b"m" * 20, FileSlice(fd, 5000, 3000)]
    fetch = EncodedFetchResponse(chunks, 4060)
    expected = b"h" * 40 + data[100:1100] + b"m" * 20 + data[5000:8000]
    sendfiles: list[int] = []
    real_sendfile = os.sendfile

    def counted_sendfile(*args: Any) -> int:
        sendfiles.append(1)
        return real_sendfile(*args)

    monkeypatch.setattr(os, "sendfile", counted_sendfile)

    async def send() -> tuple[int, int]:
        _, writer = await asyncio.open_connection(sock=accepted)
        raw = writer.get_extra_info("socket")
        before = _segments_sent(raw)
        await write_response(writer, fetch)
        sent = _segments_sent(raw) - before
        cork = raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)
        writer.close()
        await writer.wait_closed()
        return sent, cork

    try:
        assert inline(fetch) == expected
        segments, cork = asyncio.run(send())
        assert _receive(client, len(expected)) == expected
        assert segments == 1, f"expected the response in one segment, found {segments}"
        assert sendfiles == [] and cork == 0, (sendfiles, cork)
    finally:
        os.close(fd)
        client.close()
        listener.close()


def test_a_fetch_response_above_the_inline_limit_is_left_to_zero_copy(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(INLINE_MAX * 2))
    fd = os.open(path, os.O_RDONLY)
    try:
        at_limit = EncodedFetchResponse([b"h" * 10, FileSlice(fd, 0, INLINE_MAX - 10)], INLINE_MAX)
        over = EncodedFetchResponse([b"h" * 10, FileSlice(fd, 0, INLINE_MAX - 9)], INLINE_MAX + 1)
        copied = inline(at_limit)
        assert copied is not None and len(copied) == INLINE_MAX
        assert inline(over) is None
    finally:
        os.close(fd)


def test_a_small_fetch_response_whose_segment_was_truncated_is_not_copied(tmp_path: Path) -> None:
    """A slice past its segment's end reads short: ``inline`` declines, and ``write_response``
    (which the connection falls back to) closes the connection, as for a large response."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(1000))
    fd = os.open(path, os.O_RDONLY)
    listener, client, accepted = _pair()
    response = EncodedFetchResponse([b"h" * 10, FileSlice(fd, 500, 800)], 810)
    try:
        assert inline(response) is None
        with pytest.raises(ConnectionResetError, match="truncated"):
            asyncio.run(_write(accepted, response))
    finally:
        os.close(fd)
        client.close()
        listener.close()
