"""``Connection``: one client connection's read loop — framing, the SASL gate, requests
handled in order, responses written (Kafka's ``Processor`` with ``SaslServerAuthenticator``).

The loop: read what the socket has, feed it to a ``FrameDecoder`` (frames capped at
``socket.request.max.bytes``), and hand each complete frame to the
:class:`~sluice.broker.server.dispatcher.RequestDispatcher`. Requests of one connection are
handled one at a time, in order, as Kafka does (it mutes the channel): a producer's pipelined
batches are appended in the order sent, which idempotence depends on. Responses to pipelined
requests go out in one write per chunk read (one send syscall instead of one per response,
which profiling showed costly for a batch-of-1 producer); anything that may wait flushes them
first. A fetch response is written by ``response_writer`` (copied if small, else zero-copy),
after the pending ones.

The SASL gate (``SASL_PLAINTEXT`` and ``SASL_SSL`` listeners): the connection has a
:class:`~sluice.broker.server.sasl_session.SaslSession`, and until it has authenticated only
ApiVersions, SaslHandshake and SaslAuthenticate are served — any other request closes the
connection, as in Kafka — with frames capped at ``sasl.server.max.receive.size`` meanwhile.
After SaslHandshake v0 the tokens come as bare size-prefixed frames and go back so. Success
sets ``CURRENT_PRINCIPAL`` to the session's principal for the rest of the connection; a
failed exchange is answered, then the connection closes.

How a connection ends: the peer closes it (EOF); a ``RemoteProtocolError`` (a malformed or
unsupported request: logged as a warning, that one connection closed and nothing else); a
failed SASL exchange; the acceptor cancelling it (idle for ``connections.max.idle.ms``, or
shutdown); or an internal error (logged with its traceback). Whichever, the socket is closed
and ``on_close`` runs exactly once.

Invariants: ``slot.waiting_since`` is set exactly while the loop waits for bytes (what the
idle check reads); responses leave in the order their requests came.

Thread-safety: one ``Connection`` per connection, used only by that connection's task on the
broker's event loop. The context variables ``CURRENT_PEER``, ``CURRENT_LISTENER`` and
``CURRENT_PRINCIPAL`` are set in that task's own context, so handlers see their connection's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sluice.broker.config import Listener
from sluice.broker.protocol import (
    NEED_DATA,
    ApiKey,
    FrameDecoder,
    RemoteProtocolError,
    decode_request,
)
from sluice.broker.security.tls import ANONYMOUS, peer_principal
from sluice.broker.server.connection_limits import ConnectionSlot
from sluice.broker.server.context import CURRENT_LISTENER, CURRENT_PEER, CURRENT_PRINCIPAL
from sluice.broker.server.dispatcher import API_NAMES, RequestDispatcher
from sluice.broker.server.response_writer import flush_pending, write_response
from sluice.broker.server.sasl_session import SASL_API_KEYS, SASL_HANDSHAKE, SaslSession

log = logging.getLogger(__name__)

T = TypeVar("T")


class OffLoop(Protocol):
    """``BrokerContext.off_loop``: ``call(*args)`` where it cannot stall the event loop."""

    async def __call__(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


_PRODUCE_KEY = int(ApiKey.PRODUCE).to_bytes(2, "big")
_READ_SIZE = 1 << 18


class _CloseConnection(Exception):
    """The connection must close after what was answered (a failed SASL exchange)."""


class Connection:
    """One accepted connection. See the module docstring.

    ``session`` is None on a listener without SASL. ``produce_may_wait``: whether a Produce
    may wait (acks=-1 in a cluster), in which case the responses before it are flushed first.
    ``off_loop`` runs a call that may block (SCRAM looks users up in ZooKeeper) off the loop.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        listener: Listener,
        slot: ConnectionSlot,
        dispatcher: RequestDispatcher,
        session: SaslSession | None,
        max_frame_bytes: int,
        sasl_max_frame_bytes: int,
        produce_may_wait: bool,
        off_loop: OffLoop,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._listener = listener
        self._slot = slot
        self._dispatcher = dispatcher
        self._session = session
        self._max_frame_bytes = max_frame_bytes
        self._produce_may_wait = produce_may_wait
        self._off_loop = off_loop
        peer = writer.get_extra_info("peername")
        self._peer = peer
        self._decoder = FrameDecoder(max_frame_bytes if session is None else sasl_max_frame_bytes)
        self._pending: list[bytes] = []

    async def serve(self) -> None:
        """Serve the connection until it ends (see the module docstring); always closes it.
        Raises nothing: a cancelled connection ends quietly, every other ending is logged
        as the module docstring says."""
        peer = self._peer
        CURRENT_PEER.set(f"/{peer[0]}" if isinstance(peer, tuple) else "")
        CURRENT_LISTENER.set(self._listener.name)
        tls = self._writer.get_extra_info("ssl_object")
        CURRENT_PRINCIPAL.set(peer_principal(tls) if tls is not None else ANONYMOUS)
        if tls is not None:
            log.debug("TLS connection from %s as %s", peer, CURRENT_PRINCIPAL.get())
        try:
            await self._read_loop()
        except _CloseConnection:
            with contextlib.suppress(ConnectionError):
                await flush_pending(self._writer, self._pending)
                await self._writer.drain()
        except RemoteProtocolError as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self._writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError, ssl.SSLError):
                await self._writer.wait_closed()

    async def _read_loop(self) -> None:
        writer, pending, slot, decoder = self._writer, self._pending, self._slot, self._decoder
        while True:
            # Waiting for bytes, idle or halfway through a request: the idle check closes
            # the connection after connections.max.idle.ms of it.
            slot.waiting_since = time.monotonic()
            data = await self._reader.read(_READ_SIZE)
            slot.waiting_since = None
            decoder.receive_data(data)
            while (frame := decoder.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes | bytearray | memoryview)
                if self._gated(frame):
                    await self._pass_gate(frame)
                    continue
                if pending and (frame[:2] != _PRODUCE_KEY or self._produce_may_wait):
                    await flush_pending(writer, pending)
                response = await self._dispatcher.handle_frame(frame)
                if isinstance(response, bytes):
                    pending.append(response)
                elif response is not None:
                    await flush_pending(writer, pending)
                    await write_response(writer, response)
            await flush_pending(writer, pending)
            if not data:
                return

    def _gated(self, frame: bytes | bytearray | memoryview) -> bool:
        """Whether the SASL session takes this frame: every frame before authentication,
        and the SASL requests after it."""
        session = self._session
        return session is not None and (
            not session.authenticated or int.from_bytes(frame[:2], "big") in SASL_API_KEYS
        )

    async def _pass_gate(self, frame: bytes | bytearray | memoryview) -> None:
        session = self._session
        assert session is not None
        self._pending.append(await self._authenticate(session, frame))
        if session.close_after_response:
            raise _CloseConnection
        if session.authenticated:
            self._decoder.max_frame_bytes = self._max_frame_bytes
            CURRENT_PRINCIPAL.set(session.principal or ANONYMOUS)
            log.debug(
                "connection from %s authenticated as %s (%s)",
                self._peer, session.principal, session.mechanism,
            )  # fmt: skip

    async def _authenticate(
        self, session: SaslSession, frame: bytes | bytearray | memoryview
    ) -> bytes:
        """One frame of a SASL connection before (or a SASL request after) authentication:
        the answer to send. Raises ``_CloseConnection`` (a legacy token refused) or
        ``RemoteProtocolError`` (a request not allowed yet), which close the connection."""
        if session.legacy_tokens and not session.authenticated:
            # After SaslHandshake v0 the tokens come as bare frames, and go back so.
            answer = await self._off_loop(session.legacy_token, bytes(frame))
            if answer is None:
                raise _CloseConnection
            return len(answer).to_bytes(4, "big") + answer
        api_key = int.from_bytes(frame[:2], "big")
        if api_key == ApiKey.API_VERSIONS and not session.authenticated:
            response = await self._dispatcher.handle_frame(frame)
            assert isinstance(response, bytes)
            return response
        if api_key not in SASL_API_KEYS:
            name = API_NAMES.get(api_key, f"api key {api_key}")
            listener = self._listener
            raise RemoteProtocolError(
                f"expected SaslHandshake or SaslAuthenticate before {name} on the "
                f"{listener.security_protocol} listener {listener.name}"
            )
        request = decode_request(frame)
        if api_key == SASL_HANDSHAKE:
            return session.handshake(request)
        # SCRAM looks the user up in ZooKeeper in cluster mode: off the event loop.
        return await self._off_loop(session.authenticate, request)
