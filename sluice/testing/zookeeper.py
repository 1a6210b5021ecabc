"""A real, standalone ZooKeeper: Debian's ``zookeeper`` package run as a child process, and the
client-side helpers tests use on it (kazoo clients, chroots, session expiry).

How it is started (design.md, "What runs where")::

    java <JVM_FLAGS> -Dzookeeper.root.logger=INFO,CONSOLE \
        -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar\
            [:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar] \
        org.apache.zookeeper.server.quorum.QuorumPeerMain <dir>/zoo.cfg

Classpath, as checked on Debian 12 (zookeeper 3.8.0, OpenJDK 17):

* ``/etc/zookeeper/conf:/usr/share/java/zookeeper.jar`` is the minimal working set (it is what
  Debian's own ``zkEnv.sh`` uses): the jar's manifest ``Class-Path`` pulls in every other jar
  it needs from ``/usr/share/java`` (jute, netty, jackson, jetty, commons-cli/io, metrics,
  snappy, slf4j-api).
* That set has no slf4j *binding*, so the server logs nothing ("Defaulting to no-operation
  (NOP) logger"). We add ``slf4j-log4j12.jar`` and ``log4j-1.2.jar`` when present — both come
  with the package's dependencies ``libslf4j-java`` and ``liblog4j1.2-java`` — so the server
  logs through ``/etc/zookeeper/conf/log4j.properties`` with ``zookeeper.root.logger`` set to
  ``INFO,CONSOLE``. stdout and stderr go to ``<dir>/zookeeper.log``, never to the test output.

``<dir>/zoo.cfg`` is generated: ``dataDir=<dir>/data``, ``clientPort=<free port>``,
``clientPortAddress=127.0.0.1``, ``admin.enableServer=false`` (no Jetty on port 8080),
``4lw.commands.whitelist=*`` (readiness is probed with ``srvr``), ``tickTime=500`` (sessions
may be as short as 1 s, so expiry tests run fast), ``maxSessionTimeout=60000`` (clients that
ride out a ZooKeeper restart may ask for long sessions), ``forceSync=no`` (writes still reach
the page cache, so a killed *server* loses nothing; only a machine crash would). Startup takes
about 0.5–1.5 s on the 2-core test box.

Lifecycle: :meth:`~ZooKeeperServer.start` → ``stop()`` (SIGTERM, then SIGKILL) or ``kill()``
(SIGKILL) → :meth:`~ZooKeeperServer.restart` (same port, same data dir: znodes and the zxid
survive, sessions resume if they have not expired). Not thread-safe: one thread drives a
server. The client helpers are thread-safe (each makes its own client).
"""

from __future__ import annotations

import shutil
import socket
import uuid
from pathlib import Path
from typing import Self

from kazoo.client import KazooClient, KazooState

from sluice.testing.net import free_port, wait_until
from sluice.testing.process import ChildProcess

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
# Optional: an slf4j binding, so the server's log is not thrown away.
LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A small heap and the client compiler only: ZooKeeper in tests holds a few thousand znodes,
# and C1-only starts faster on 2 cores.
JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class ZooKeeperMissingError(RuntimeError):
    """Java or Debian's ``zookeeper`` package is not installed (``make system-deps``)."""


def zookeeper_missing() -> str | None:
    """Why a ZooKeeper server cannot be started here, or ``None`` if it can."""
    if shutil.which("java") is None:
        return "no `java` on PATH"
    if not ZOOKEEPER_JAR.is_file():
        return f"{ZOOKEEPER_JAR} is missing (Debian package `zookeeper`)"
    return None


def classpath() -> str:
    """The ``-cp`` value: conf dir and zookeeper.jar, plus the log4j binding when installed."""
    entries = [ZOOKEEPER_CONF_DIR, ZOOKEEPER_JAR]
    if all(jar.is_file() for jar in LOGGING_JARS):
        entries.extend(LOGGING_JARS)
    return ":".join(str(e) for e in entries)


class ZooKeeperServer(ChildProcess):
    """One standalone ZooKeeper process on 127.0.0.1, with its config, data and log in
    ``base_dir``. ``connect_string`` (``"127.0.0.1:<port>"``) is fixed for the object's life,
    across restarts."""

    def __init__(self, base_dir: Path, port: int | None = None, tick_time_ms: int = 500) -> None:
        self.base_dir = Path(base_dir).absolute()  # Java runs in it: no relative paths
        super().__init__(
            self.base_dir / "zookeeper.log",
            name="ZooKeeper",
            cwd=self.base_dir,
            start_timeout=START_TIMEOUT,
            stop_timeout=STOP_TIMEOUT,
        )
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr (its log4j CONSOLE appender)."""
        return self.output_path

    @property
    def connect_string(self) -> str:
        """``host:port`` for ZooKeeper clients (append a chroot for isolation)."""
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "forceSync=no",
            "preAllocSize=4096",
        ]
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def command(self) -> list[str]:
        return [
            "java",
            *JVM_FLAGS,
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            f"-Dzookeeper.log.dir={self.base_dir}",
            "-cp",
            classpath(),
            MAIN_CLASS,
            str(self.config_path),
        ]

    def spawn(self) -> Self:
        """Write ``zoo.cfg`` and start Java; :class:`ZooKeeperMissingError` without it."""
        missing = zookeeper_missing()
        if missing is not None:
            raise ZooKeeperMissingError(f"cannot start ZooKeeper: {missing}")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        return super().spawn()

    def srvr(self, timeout: float = 1.0) -> str:
        """The answer to the ``srvr`` four-letter word; raises ``OSError`` if none."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def ready(self) -> bool:
        """The server answers ``srvr`` as a standalone server (it has loaded its snapshot)."""
        try:
            return "Mode: standalone" in self.srvr()
        except OSError:
            return False

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> Self:
        """Stop (or kill) the server and start it again on the same port and data dir."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log, for failure messages."""
        return self.output_tail(lines)


# -- clients -------------------------------------------------------------------------------


def kazoo_client(hosts: str, timeout: float = 10.0) -> KazooClient:
    """A started kazoo client on ``hosts`` (a connect string, chroot allowed); the caller must
    ``stop()`` and ``close()`` it."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    try:
        client.start(timeout=timeout)
    except BaseException:
        client.stop()
        client.close()
        raise
    return client


def new_chroot(zookeeper: ZooKeeperServer, prefix: str = "sluice-test") -> str:
    """Create and return a fresh znode path ``/<prefix>-<random>`` (starting ZooKeeper again if
    an earlier test killed it and did not restart it)."""
    if not zookeeper.running:
        zookeeper.start()
    chroot = f"/{prefix}-{uuid.uuid4().hex[:12]}"
    client = kazoo_client(zookeeper.connect_string)
    try:
        client.create(chroot)
    finally:
        client.stop()
        client.close()
    return chroot


def make_chroots(connect: str, *names: str) -> tuple[str, ...]:
    """Create ``<chroot>/<name>`` for each name under ``connect`` (a connect string with a
    chroot); return their connect strings — one cluster each, on one ZooKeeper, as in
    ``conf/datacenter/``."""
    client = kazoo_client(connect)
    try:
        for name in names:
            client.ensure_path(f"/{name}")
    finally:
        client.stop()
        client.close()
    return tuple(f"{connect}/{name}" for name in names)


def expire_session(client: KazooClient, hosts: str, timeout: float = 10.0) -> None:
    """Expire ``client``'s session server-side and wait until it has noticed (state LOST): a
    second client attaches to the same session id and closes it."""
    lost: list[str] = []

    def listener(state: str) -> None:
        if state == KazooState.LOST:
            lost.append(state)

    client.add_listener(listener)
    try:
        other = KazooClient(hosts=hosts, client_id=client.client_id, timeout=timeout)
        other.start(timeout=timeout)
        other.stop()
        other.close()
        wait_until(lambda: lost, timeout, "the session to expire", interval=0.02)
    finally:
        client.remove_listener(listener)
