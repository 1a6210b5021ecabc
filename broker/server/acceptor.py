"""``Acceptor``: a broker's listeners and the connections they accepted (Kafka's
``SocketServer`` with its ``Acceptor``s).

One server socket per listener (``listeners``), each with its security protocol: ``SSL`` and
``SASL_SSL`` listeners wrap their connections in TLS (``sluice.broker.security.tls``; the
handshake is done before the first request is read, and a client certificate's subject is
the principal); ``SASL_PLAINTEXT`` and ``SASL_SSL`` connections get a
:class:`~sluice.broker.server.sasl_session.SaslSession` over the broker's SCRAM store. A
listener that cannot be bound raises :class:`ListenerBindError` naming the key and the
address. Listeners are bound first and serve later (:meth:`Acceptor.bind`,
:meth:`Acceptor.start_serving`), so the broker can register its port before any request.

Admission: ``connection_limits`` admits each connection (``max.connections``,
``max.connections.per.ip[.overrides]``); one refused — or arriving once the broker is
stopping — is closed with nothing read and nothing answered, as Kafka's acceptor does.
Admitted, it runs as a :class:`~sluice.broker.server.connection.Connection` in a task of
its own. :meth:`Acceptor.close_idle_connections` closes those that waited for bytes longer
than ``connections.max.idle.ms``; :meth:`Acceptor.close` stops accepting and closes them all.

Invariants: every admitted connection holds one slot of ``connection_limits`` from admission
until its task ends, and is in the registry exactly that long.

Thread-safety: none; everything here runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable

from sluice.broker.config import BrokerConfig, ConfigError, Listener
from sluice.broker.security.scram_store import ScramStore
from sluice.broker.security.tls import listener_server_context
from sluice.broker.server.connection import Connection, OffLoop
from sluice.broker.server.connection_limits import (
    ConnectionLimits,
    ConnectionSlot,
    UnresolvableOverrideError,
    resolve_overrides,
)
from sluice.broker.server.dispatcher import RequestDispatcher
from sluice.broker.server.sasl_session import ListenerAuth, SaslSession

log = logging.getLogger(__name__)

_STREAM_LIMIT = 1 << 20


class ListenerBindError(OSError):
    """A listener's address cannot be bound; names the config key and the address."""


def reason(exc: OSError) -> str:
    """``Address already in use``: the errno's text, without asyncio's wrapping."""
    return os.strerror(exc.errno) if exc.errno else str(exc)


class Acceptor:
    """The broker's listeners and live connections. See the module docstring.

    Built once by the broker: raises ``ConfigError`` (or ``TlsError``, a ``ValueError``)
    naming the key for a bad security or connection-limit setting. ``stopping`` says whether
    the broker is stopping (new connections are then refused)."""

    def __init__(
        self,
        config: BrokerConfig,
        dispatcher: RequestDispatcher,
        scram_credentials: ScramStore,
        off_loop: OffLoop,
        *,
        produce_may_wait: bool,
        stopping: Callable[[], bool],
    ) -> None:
        self._config = config
        self._dispatcher = dispatcher
        self._scram_credentials = scram_credentials
        self._off_loop = off_loop
        self._produce_may_wait = produce_may_wait
        self._stopping = stopping
        # Security, per listener: a TLS context, the SASL mechanisms and PLAIN users.
        self._tls: dict[str, ssl.SSLContext] = {}
        self._sasl: dict[str, ListenerAuth] = {}
        for listener in config.listeners:
            if listener.uses_tls:
                self._tls[listener.name] = listener_server_context(
                    config.security_properties, listener.name
                )
            if listener.uses_sasl:
                self._sasl[listener.name] = ListenerAuth.build(config, listener)
        # One secret per broker: an unknown SCRAM user always gets the same fake salt.
        self._fake_salt_key = secrets.token_bytes(32)
        if self._sasl and config.connections_max_reauth_ms > 0:
            log.warning(
                "connections.max.reauth.ms=%d: re-authentication (KIP-368) is not supported; "
                "SASL sessions get session_lifetime_ms=0 and last as long as the connection",
                config.connections_max_reauth_ms,
            )
        try:
            overrides = resolve_overrides(config.max_connections_per_ip_overrides)
        except UnresolvableOverrideError as exc:
            raise ConfigError(str(exc)) from None
        self.connection_limits = ConnectionLimits(
            max_connections=config.max_connections,
            max_per_ip=config.max_connections_per_ip,
            per_ip_overrides=overrides,
            max_idle_ms=config.connections_max_idle_ms,
        )
        self.servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task[None], ConnectionSlot] = {}

    async def bind(self, listener: Listener) -> asyncio.Server:
        """Bind ``listener`` (so the port is known for the registration) but do not serve
        yet: requests wait for :meth:`start_serving`, which the broker calls once it has
        joined (as Kafka starts processing requests only after registering), so no client
        sees a broker with an empty view of the cluster or without its replicas. Raises
        :class:`ListenerBindError`."""
        try:
            server = await asyncio.start_server(
                functools.partial(self._on_connection, listener),
                listener.host,
                listener.port,
                limit=_STREAM_LIMIT,
                reuse_address=True,
                ssl=self._tls.get(listener.name),
                start_serving=False,
            )
        except OSError as exc:
            raise ListenerBindError(
                exc.errno,
                f"listeners={listener}: cannot bind {listener.host}:{listener.port}: {reason(exc)}",
            ) from None
        self.servers.append(server)
        return server

    async def start_serving(self) -> None:
        for server in self.servers:
            await server.start_serving()

    async def close(self, timeout: float) -> None:
        """Stop accepting, cancel every connection and wait for them (each step bounded by
        ``timeout`` seconds; what did not close in time is logged in one line)."""
        for server in self.servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            _, left = await asyncio.wait(self._connections, timeout=timeout)
            if left:
                log.warning(
                    "%d connections did not close within %.0fs; going on", len(left), timeout
                )
        for server in self.servers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), timeout)

    async def close_idle_connections(self) -> None:
        """Close every connection that waited for bytes longer than connections.max.idle.ms,
        checking a few times per that period (forever; cancelled at shutdown)."""
        interval = self.connection_limits.idle_check_interval
        if interval is None:
            return
        while True:
            await asyncio.sleep(interval)
            idle = self.connection_limits.idle(time.monotonic())
            if not idle:
                continue
            tasks = {slot: task for task, slot in self._connections.items()}
            for slot in idle:
                task = tasks.get(slot)
                if task is not None and slot.waiting_since is not None:
                    log.debug(
                        "closing a connection from %s idle for more than "
                        "connections.max.idle.ms=%d", slot.address,
                        self._config.connections_max_idle_ms,
                    )  # fmt: skip
                    task.cancel()

    async def _on_connection(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        slot = self.connection_limits.admit(peer[0] if isinstance(peer, tuple) else "")
        if slot is None or self._stopping():  # refused (logged once per burst)
            if slot is not None:
                self.connection_limits.release(slot)
            writer.close()  # as Kafka's acceptor: nothing read, nothing answered
            return
        self._connections[task] = slot
        try:
            auth = self._sasl.get(listener.name)
            session = (
                SaslSession(auth, self._scram_credentials, self._fake_salt_key, str(peer))
                if auth is not None
                else None
            )
            connection = Connection(
                reader,
                writer,
                listener=listener,
                slot=slot,
                dispatcher=self._dispatcher,
                session=session,
                max_frame_bytes=self._config.socket_request_max_bytes,
                sasl_max_frame_bytes=self._config.sasl_server_max_receive_size,
                produce_may_wait=self._produce_may_wait,
                off_loop=self._off_loop,
            )
            await connection.serve()
        finally:
            self._connections.pop(task, None)
            self.connection_limits.release(slot)
