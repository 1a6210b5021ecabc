"""Running the registry: configuration keys, store choice, the uvicorn server.

Configuration: Confluent's key names where Confluent has one, declared once in
:data:`CONFIG_DEF` (the server's keys), ``sluice.schemas.limits.CONFIG_DEF`` (request limits)
and ``sluice.schemas.basic_auth.CONFIG_DEF`` (authentication); the "registry" section of
``docs/configuration.md`` is generated from them. A bad value raises
:class:`RegistryConfigError` naming the key (a ``RegistrySecurityConfigError`` for security
keys, ``InvalidOptionError`` for the limits).

Start-up: the listener's address is bound first (:func:`bind_listener`; an address that cannot
be bound is a :class:`RegistryConfigError` naming ``listeners`` and the address), and only then
does the registry log where it listens, so the line is never a promise that fails a moment later.

Security: ``listeners=https://host:port`` serves TLS with the ``ssl.*`` keys of
:mod:`sluice.schemas.tls` (PEM keystore, optional client certificates); ``authentication.*``
keys turn on HTTP Basic authentication of every route (:mod:`sluice.schemas.basic_auth`). Both
are checked at start-up: a bad key, an unreadable keystore, JAAS or users file stops the
registry with an error naming the key or file — never a password.

Request line and headers are bounded by uvicorn (16 KiB, ``h11_max_incomplete_event_size``;
over it the connection gets uvicorn's plain-text 400).

With ``schema.registry.zookeeper.connect`` set (``host:port[,host:port...][/chroot]``) the
registry keeps its state in ZooKeeper (:mod:`sluice.schemas.zk_store`) and any number of registry
processes may share it; unset, it is standalone and ``schema.registry.data.dir`` is used.

Shutdown: uvicorn handles SIGINT/SIGTERM (stops accepting, finishes in-flight requests), then
:func:`serve` closes the store, which releases the data-dir lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from sluice.common.config_def import Check, ConfigDef, OneOf, Type
from sluice.schemas import tls
from sluice.schemas.app import create_app
from sluice.schemas.basic_auth import BasicAuthenticator
from sluice.schemas.compatibility import DEFAULT_LEVEL, CompatibilityLevel
from sluice.schemas.errors import InvalidCompatibilityLevelError, RegistrySecurityConfigError
from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.limits import RegistryLimits
from sluice.schemas.registry import Registry
from sluice.schemas.store import SchemaStore
from sluice.schemas.zk_store import ZooKeeperSchemaStore

DEFAULT_LISTENER = "http://127.0.0.1:8081"
DEFAULT_DATA_DIR = "./data/registry"

log = logging.getLogger(__name__)


class RegistryConfigError(ValueError):
    """A registry server key is malformed, or its listener cannot be bound; the message names
    the key."""


def _check_level(level: str) -> str | None:
    try:
        CompatibilityLevel.parse(level)
    except InvalidCompatibilityLevelError:
        levels = ", ".join(item.value for item in CompatibilityLevel)
        return f"expected one of {levels}, found {level!r}"
    return None


CONFIG_DEF = (
    ConfigDef(error=RegistryConfigError, what="registry configuration")
    .define(
        "listeners", Type.STRING, DEFAULT_LISTENER,
        doc="`http://host:port` or `https://host:port` (TLS with the `ssl.*` keys); the first "
        "listener of the list is served.",
    )
    .define(
        "schema.registry.data.dir", Type.STRING, DEFAULT_DATA_DIR,
        doc="The file store's directory (standalone mode).",
    )
    .define(
        "schema.registry.zookeeper.connect", Type.STRING, None,
        default_doc="(unset: standalone)",
        doc="`host:port[,host:port...][/chroot]`: the state in ZooKeeper, shared by any number "
        "of registries.",
    )
    .define(
        "schema.compatibility.level", Type.STRING, DEFAULT_LEVEL.value,
        Check(", ".join(item.value for item in CompatibilityLevel), _check_level),
        doc="The global level until `PUT /config` sets one.",
    )
    .define(
        "log.level", Type.STRING, "info",
        OneOf("critical", "error", "warning", "info", "debug"),
        doc="`debug` also logs every request.",
    )
    .family("ssl.<key>", "The https listener's keystore and trust (`sluice.schemas.tls`).")
)  # fmt: skip


@dataclass(frozen=True)
class RegistryConfig:
    host: str
    port: int
    data_dir: Path
    default_level: CompatibilityLevel
    log_level: str
    zookeeper_connect: str | None = None
    limits: RegistryLimits = RegistryLimits()
    ssl_context: ssl.SSLContext | None = None  # set for an https listener
    authenticator: BasicAuthenticator | None = None  # set with authentication.method=BASIC

    @property
    def scheme(self) -> str:
        return "http" if self.ssl_context is None else "https"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RegistryConfig:
        """Build from ``.properties`` keys; raise ``ValueError`` on a bad value
        (:class:`RegistryConfigError`, or a
        :class:`~sluice.schemas.errors.RegistrySecurityConfigError` for security keys)."""
        values = CONFIG_DEF.parse(props)
        first = values["listeners"].split(",")[0].strip()
        url = urllib.parse.urlsplit(first)
        try:
            port = url.port
        except ValueError:
            port = None
        if url.scheme not in ("http", "https") or not url.hostname or port is None:
            raise RegistryConfigError(
                f"listeners: expected http://host:port or https://host:port, found {first!r}"
            )
        if url.username is not None or url.password is not None:
            raise RegistrySecurityConfigError("listeners: expected no user:password@ in the URL")
        return cls(
            host=url.hostname,
            port=port,
            data_dir=Path(values["schema.registry.data.dir"]),
            default_level=CompatibilityLevel.parse(values["schema.compatibility.level"]),
            log_level=values["log.level"],
            zookeeper_connect=values["schema.registry.zookeeper.connect"],
            limits=RegistryLimits.from_properties(props),
            ssl_context=tls.server_context(props) if url.scheme == "https" else None,
            authenticator=BasicAuthenticator.from_properties(props),
        )

    def describe_security(self) -> str:
        if self.authenticator is None:
            return "no authentication"
        roles = ", ".join(sorted(self.authenticator.roles)) or "any role"
        return (
            f"basic authentication (realm {self.authenticator.realm}, "
            f"{len(self.authenticator.users)} users, {roles})"
        )

    def open_store(self) -> SchemaStore:
        """The ZooKeeper store when ``zookeeper_connect`` is set, else the file store."""
        if self.zookeeper_connect:
            return ZooKeeperSchemaStore(self.zookeeper_connect)
        return FileSchemaStore(self.data_dir)

    def describe_store(self) -> str:
        if self.zookeeper_connect:
            return f"ZooKeeper {self.zookeeper_connect}"
        return f"data dir {self.data_dir}"


class _Config(uvicorn.Config):
    """uvicorn's config with a ready-made ``SSLContext`` (uvicorn builds its own from file
    names only, without Kafka's inline PEM, protocol range or password callback)."""

    def __init__(self, *args: object, ssl_context: ssl.SSLContext | None, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        if self._ssl_context is not None:
            self.ssl = self._ssl_context


class _Server(uvicorn.Server):
    """uvicorn's server, minus re-raising the stop signal after shutdown, plus a line saying
    where it listens once it serves.

    uvicorn re-raises SIGINT/SIGTERM once it has drained, so the process dies *of* the signal
    (status -15) before our ``finally`` closes the store. A registry stopped on purpose should
    exit 0 after a clean close, so the signal only triggers the graceful shutdown.

    ``started_message`` is logged at the end of uvicorn's start-up: the socket is bound, the
    server accepts on it and the stop signals are handled, so the line is true when read.
    """

    def __init__(self, config: uvicorn.Config, started_message: str) -> None:
        super().__init__(config)
        self._started_message = started_message

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            log.info("%s", self._started_message)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        stop_signals = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stop_signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for captured in self._captured_signals:
                log.info("stopped by %s", signal.Signals(captured).name)


def bind_listener(config: RegistryConfig) -> socket.socket:
    """A listening socket on the configured address; :class:`RegistryConfigError` naming
    ``listeners`` and the address when it cannot be bound (in use, not this host's, ...)."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    try:
        return socket.create_server((config.host, config.port), family=family)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise RegistryConfigError(
            f"listeners={config.scheme}://{config.host}:{config.port}: cannot bind "
            f"{config.host}:{config.port}: {why}"
        ) from None


def serve(config: RegistryConfig) -> None:
    """Serve the registry in the foreground until SIGINT/SIGTERM. The address is bound before
    anything else (raises :class:`RegistryConfigError` if it cannot be), and where the registry
    listens is logged only once it serves there."""
    with bind_listener(config) as listener:
        store = config.open_store()
        try:
            registry = Registry(store, config.default_level)
            started = (
                f"schema registry listening on {config.scheme}://{config.host}:"
                f"{listener.getsockname()[1]}, {config.describe_store()}, "
                f"{config.describe_security()}, default compatibility {config.default_level.value}"
            )
            server = _Server(
                _Config(
                    create_app(registry, config.limits, config.authenticator),
                    host=config.host,
                    port=config.port,
                    log_level=config.log_level,
                    access_log=config.log_level == "debug",
                    lifespan="off",
                    ssl_context=config.ssl_context,
                ),
                started,
            )
            # uvicorn serves the socket bound above (and closes it when it stops).
            server.run(sockets=[listener])
        finally:
            store.close()
            log.info("schema registry stopped")
