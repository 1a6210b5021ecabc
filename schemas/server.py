"""Running the registry: configuration keys, store choice, the uvicorn server.

Configuration (Confluent's key names where Confluent has one)::

    listeners=http://127.0.0.1:8081          # first listener is served; http or https
    schema.registry.data.dir=./data/registry # FileSchemaStore directory (standalone mode)
    schema.registry.zookeeper.connect=127.0.0.1:2181/sluice  # cluster mode: ZooKeeperSchemaStore
    schema.compatibility.level=BACKWARD      # default global level until PUT /config sets one
    log.level=info

Request limits (:mod:`sluice.schemas.limits`; the first two are Confluent's keys)::

    size.limit.filter.enabled=true                      # false: no request-body size limit
    size.limit.filter.max.request.body.size=1048576     # bytes; over it: 413, before buffering
    schema.registry.max.request.depth=64                # JSON nesting of a body (1..256); 400
    schema.registry.max.schema.size=1048576             # UTF-8 bytes of a schema; 422/42209
    schema.registry.max.schema.depth=128                # JSON nesting of a schema (1..256); 42201
    schema.registry.max.subject.length=1024             # characters; 422/42208

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
import signal
import ssl
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from sluice.schemas import tls
from sluice.schemas.app import create_app
from sluice.schemas.basic_auth import BasicAuthenticator
from sluice.schemas.compatibility import DEFAULT_LEVEL, CompatibilityLevel
from sluice.schemas.errors import RegistrySecurityConfigError
from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.limits import RegistryLimits
from sluice.schemas.registry import Registry
from sluice.schemas.store import SchemaStore
from sluice.schemas.zk_store import ZooKeeperSchemaStore

DEFAULT_LISTENER = "http://127.0.0.1:8081"
DEFAULT_DATA_DIR = "./data/registry"

log = logging.getLogger(__name__)


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
    def from_properties(cls, props: dict[str, str]) -> RegistryConfig:
        """Build from ``.properties`` keys; raise ``ValueError`` on a bad value (a
        :class:`~sluice.schemas.errors.RegistrySecurityConfigError` for security keys)."""
        listeners = props.get("listeners", DEFAULT_LISTENER)
        first = listeners.split(",")[0].strip()
        url = urllib.parse.urlsplit(first)
        if url.scheme not in ("http", "https") or not url.hostname or url.port is None:
            raise ValueError(
                f"listeners: expected http://host:port or https://host:port, found {first!r}"
            )
        if url.username is not None or url.password is not None:
            raise RegistrySecurityConfigError("listeners: expected no user:password@ in the URL")
        level = props.get("schema.compatibility.level", DEFAULT_LEVEL.value)
        return cls(
            host=url.hostname,
            port=url.port,
            data_dir=Path(props.get("schema.registry.data.dir", DEFAULT_DATA_DIR)),
            default_level=CompatibilityLevel.parse(level),
            log_level=props.get("log.level", "info").lower(),
            zookeeper_connect=props.get("schema.registry.zookeeper.connect", "").strip() or None,
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
    """uvicorn's server, minus re-raising the stop signal after shutdown.

    uvicorn re-raises SIGINT/SIGTERM once it has drained, so the process dies *of* the signal
    (status -15) before our ``finally`` closes the store. A registry stopped on purpose should
    exit 0 after a clean close, so the signal only triggers the graceful shutdown.
    """

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


def serve(config: RegistryConfig) -> None:
    """Serve the registry in the foreground until SIGINT/SIGTERM."""
    store = config.open_store()
    try:
        registry = Registry(store, config.default_level)
        log.info(
            "schema registry listening on %s://%s:%d, %s, %s, default compatibility %s",
            config.scheme,
            config.host,
            config.port,
            config.describe_store(),
            config.describe_security(),
            config.default_level.value,
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
            )
        )
        server.run()
    finally:
        store.close()
        log.info("schema registry stopped")
