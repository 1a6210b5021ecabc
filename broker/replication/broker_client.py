"""``BrokerClient``: one connection from this broker to another, for Fetch and
OffsetForLeaderEpoch (what a follower sends its leader).

The broker's own codec on both ends: ``encode_request`` out, ``decode_response`` in; one
request in flight at a time (a follower's fetches are sequential anyway). A connection error
closes the connection; the next ``request`` reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from typing import Any

from sluice.broker.protocol import decode_response, encode_request

_SIZE = struct.Struct(">i")


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, timeout: float = 30.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20), self.timeout
            )
        assert self._reader is not None and self._writer is not None
        return self._reader, self._writer

    async def request(self, body: Any) -> Any:
        """Send one request (a kio request dataclass) and return the decoded response body."""
        async with self._lock:
            reader, writer = await self._connect()
            correlation_id = next(self._ids) & 0x7FFFFFFF
            try:
                writer.write(encode_request(correlation_id, self.client_id, body))
                await writer.drain()
                size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), self.timeout))
                frame = await asyncio.wait_for(reader.readexactly(size[0]), self.timeout)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                await self.close()
                raise
            got, response = decode_response(frame, body.__api_key__, body.__version__)
            if got != correlation_id:
                await self.close()
                raise ConnectionError(
                    f"{self.host}:{self.port}: expected correlation id {correlation_id}, "
                    f"found {got}"
                )
            return response

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
