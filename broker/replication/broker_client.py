"""``BrokerClient``: one connection from this broker to another, for Fetch,
OffsetForLeaderEpoch (what a follower sends its leader) and WriteTxnMarkers; and
``BrokerConnector``, which opens it the way the inter-broker listener wants.

The broker's own codec on both ends: ``encode_request`` out, ``decode_response`` in; one
request in flight at a time (a follower's fetches are sequential anyway). A connection error
closes the connection; the next ``request`` reconnects (and authenticates again).

``BrokerConnector`` holds the inter-broker security
(``sluice.broker.security.client.InterBrokerSecurity``): ``None`` is plaintext; with TLS the
connection is wrapped in the listener's client ``SSLContext`` (built once, shared by every
connection) with the server's name checked as ``ssl.endpoint.identification.algorithm`` says;
with SASL the first requests are SaslHandshake v1 and SaslAuthenticate v1 driven by a
``SaslClientExchange``. A refused login raises ``InterBrokerAuthenticationError`` /
``UnsupportedSaslMechanismError`` (a ``SaslError``) from :meth:`BrokerClient.request`, with the
connection closed; callers log it and retry as for any connection error.

Runs on the broker's event loop; a connector may be shared by many clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import struct
from collections.abc import Callable
from typing import Any

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.security.client import (
    InterBrokerSecurity,
    SaslClientExchange,
    check_authenticate,
    check_handshake,
)
from sluice.common.tls import client_context

_SIZE = struct.Struct(">i")
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class BrokerConnector:
    """Opens (and authenticates) connections to other brokers; see the module docstring."""

    def __init__(self, security: InterBrokerSecurity | None = None) -> None:
        """Raises ``sluice.common.tls.TlsError`` for TLS keys that do not load."""
        self.security = security
        self._tls: ssl.SSLContext | None = None
        if security is not None and security.tls_properties is not None:
            self._tls = client_context(security.tls_properties)

    def __repr__(self) -> str:
        protocol = "PLAINTEXT" if self.security is None else self.security.protocol
        return f"BrokerConnector({protocol})"

    async def open(self, host: str, port: int, client_id: str, timeout: float) -> Streams:
        """A connection to ``host:port``, TLS-wrapped and SASL-authenticated as configured."""
        if self._tls is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 20), timeout
            )
        else:
            # "" turns the name check (and SNI) off, as an empty
            # ssl.endpoint.identification.algorithm asks
            name = host if self._tls.check_hostname else ""
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, limit=1 << 20, ssl=self._tls, server_hostname=name,
                    ssl_handshake_timeout=timeout,
                ),
                timeout,
            )  # fmt: skip
        login = self.security.sasl if self.security is not None else None
        if login is None:
            return reader, writer
        try:
            await self._authenticate(reader, writer, client_id, timeout, login_peer(host, port))
        except BaseException:
            writer.close()
            raise
        return reader, writer

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        timeout: float,
        peer: str,
    ) -> None:
        assert self.security is not None and self.security.sasl is not None
        login = self.security.sasl
        handshake = build(request_type(ApiKey.SASL_HANDSHAKE, 1), {"mechanism": login.mechanism})
        answer = await exchange(reader, writer, 0, client_id, handshake, timeout)
        check_handshake(login.mechanism, int(answer.error_code), answer.mechanisms, peer)
        sasl = SaslClientExchange(login)
        token: bytes | None = sasl.first_token()
        correlation_id = 1
        while token is not None:
            body = build(request_type(ApiKey.SASL_AUTHENTICATE, 1), {"auth_bytes": token})
            answer = await exchange(reader, writer, correlation_id, client_id, body, timeout)
            check_authenticate(int(answer.error_code), answer.error_message, peer, login.username)
            token = sasl.respond(bytes(answer.auth_bytes))
            correlation_id += 1


def login_peer(host: str, port: int) -> str:
    return f"broker at {host}:{port}"


async def exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    correlation_id: int,
    client_id: str,
    body: Any,
    timeout: float,
) -> Any:
    """Send one request and return its decoded response body."""
    writer.write(encode_request(correlation_id, client_id, body))
    await writer.drain()
    size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))
    frame = await asyncio.wait_for(reader.readexactly(size[0]), timeout)
    got, response = decode_response(frame, body.__api_key__, body.__version__)
    if got != correlation_id:
        raise ConnectionError(f"expected correlation id {correlation_id}, found {got}")
    return response


#: Plaintext, as a broker without inter-broker security connects.
PLAINTEXT = BrokerConnector()


class BrokerClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout: float = 30.0,
        connector: BrokerConnector = PLAINTEXT,
    ) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self.connector = connector
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def _connect(self) -> Streams:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await self.connector.open(
                self.host, self.port, self.client_id, self.timeout
            )
        assert self._reader is not None and self._writer is not None
        return self._reader, self._writer

    async def request(self, body: Any) -> Any:
        """Send one request (a kio request dataclass) and return the decoded response body."""
        return await self.request_frame(
            lambda correlation_id: encode_request(correlation_id, self.client_id, body),
            body.__api_key__, body.__version__,
        )  # fmt: skip

    async def request_frame(
        self, encode: Callable[[int], bytes], api_key: int, api_version: int
    ) -> Any:
        """Send one request already encoded by ``encode`` (correlation id -> the whole frame,
        size prefix and header with ``client_id`` included: a hand-written encoder's) and return
        the decoded response body of ``api_key`` at ``api_version``."""
        async with self._lock:
            reader, writer = await self._connect()
            correlation_id = next(self._ids) & 0x7FFFFFFF
            try:
                writer.write(encode(correlation_id))
                await writer.drain()
                # asyncio.timeout rather than wait_for, which wraps each read in a task: a
                # follower makes two reads a fetch, thousands a second in an acks=all round.
                async with asyncio.timeout(self.timeout):
                    size = _SIZE.unpack(await reader.readexactly(4))
                async with asyncio.timeout(self.timeout):
                    frame = await reader.readexactly(size[0])
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                await self.close()
                raise
            got, response = decode_response(frame, api_key, api_version)
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
