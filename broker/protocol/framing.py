"""Sans-IO request framing: bytes in, one request frame at a time out.

Every Kafka request (and response) on the wire is::

    Size      INT32   number of bytes that follow (header + body), never negative
    Payload   Size bytes

``FrameDecoder`` is fed whatever the socket returned (``receive_data``) and hands back complete
payloads, without the size prefix, one per ``next_frame`` call, or ``NEED_DATA``. It does no
I/O; the server's connection loop reads, feeds, and drains ``next_frame`` until ``NEED_DATA``.

Denial of service, the plan:

* The size prefix is checked the moment its 4 bytes are here, against ``max_frame_bytes``
  (Kafka's ``socket.request.max.bytes``, 100 MiB by default) and for negative values: a peer
  announcing 2 GiB is refused before we buffer a single byte of its body, as Kafka's
  ``NetworkReceive`` does (``InvalidReceiveException``).
* Pipelined requests cost linear time: the buffer is one ``bytearray`` with a read offset.
  Consumed bytes are dropped in one slice deletion only once they make up at least half the
  buffer, so each byte is moved O(1) times on average, however the frames are split across reads.
  (A naive ``buf = buf[n:]`` per frame would be quadratic for many small pipelined frames.)
* What ``receive_data`` buffers beyond the current frame is bounded by what the server read in
  one go; the server drains frames before reading more.

Thread-safety: none; one decoder per connection, used from one task.
"""

from __future__ import annotations

import enum
from typing import Final

from .errors import LocalProtocolError, RemoteProtocolError
from .primitives import INT32

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "NEED_DATA", "NeedData", "FrameDecoder"]

DEFAULT_MAX_REQUEST_BYTES: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes``: 100 MiB."""

_SIZE_BYTES: Final = 4


class NeedData(enum.Enum):
    """The type of ``NEED_DATA``: more bytes must arrive before the next frame is complete."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


class FrameDecoder:
    """Split a byte stream into Kafka request frames.

    >>> d = FrameDecoder()
    >>> d.receive_data(b"\\x00\\x00\\x00\\x02hi\\x00\\x00")
    >>> d.next_frame(), d.next_frame()
    (b'hi', <NeedData.NEED_DATA: 'NEED_DATA'>)
    """

    __slots__ = ("_buf", "_start", "_frame_size", "_eof", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if max_frame_bytes < 0:
            raise LocalProtocolError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0  # offset of the first unconsumed byte in _buf
        self._frame_size = -1  # size of the frame being assembled, -1 = prefix not read yet
        self._eof = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned in a frame (size prefixes included)."""
        return len(self._buf) - self._start

    @property
    def at_eof(self) -> bool:
        """Whether the peer closed its side (``receive_data(b"")`` was called)."""
        return self._eof

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed its side (EOF).

        Raises ``RemoteProtocolError`` at once if the pending size prefix is invalid.
        """
        if self._eof:
            raise LocalProtocolError("receive_data called after EOF")
        if not data:
            self._eof = True
            return
        self._buf += data
        if self._frame_size < 0:
            self._read_size_prefix()

    def next_frame(self) -> bytes | NeedData:
        """Return the next complete frame payload (without its size prefix), or ``NEED_DATA``.

        Raises ``RemoteProtocolError`` for an oversized or negative size prefix, and at EOF for
        a frame cut short. After EOF with nothing pending it keeps returning ``NEED_DATA``;
        check ``at_eof``.
        """
        if self._frame_size < 0 and not self._read_size_prefix():
            return self._need_data()
        end = self._start + self._frame_size
        if len(self._buf) < end:
            return self._need_data()
        frame = bytes(self._buf[self._start : end])
        self._start = end
        self._frame_size = -1
        self._compact()
        return frame

    def _read_size_prefix(self) -> bool:
        """Read and check the size prefix if its 4 bytes are buffered; consume them."""
        if len(self._buf) - self._start < _SIZE_BYTES:
            return False
        (size,) = INT32.unpack_from(self._buf, self._start)
        if size < 0:
            raise RemoteProtocolError(f"negative request size {size}")
        if size > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"request size {size} exceeds the maximum of {self.max_frame_bytes} bytes "
                "(socket.request.max.bytes)"
            )
        self._start += _SIZE_BYTES
        self._frame_size = size
        return True

    def _need_data(self) -> NeedData:
        if self._eof and self.buffered_bytes > 0:
            raise RemoteProtocolError(
                f"connection closed in the middle of a frame ({self.buffered_bytes} bytes pending)"
            )
        return NEED_DATA

    def _compact(self) -> None:
        # Drop consumed bytes only when they are at least half the buffer: amortized O(1) per
        # byte. When everything was consumed, reset cheaply.
        if self._start == len(self._buf):
            self._buf.clear()
            self._start = 0
        elif self._start * 2 >= len(self._buf):
            del self._buf[: self._start]
            self._start = 0
