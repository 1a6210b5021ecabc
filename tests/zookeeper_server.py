"""A real, standalone ZooKeeper for tests: Debian's ``zookeeper`` package run as a child process.

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

Lifecycle: :meth:`start` → :meth:`stop` (SIGTERM, then SIGKILL) or :meth:`kill` (SIGKILL) →
:meth:`restart` (same port, same data dir: znodes and the zxid survive, sessions resume if
they have not expired). Not thread-safe: one thread drives a server.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from tests.net import free_port, signal_and_wait

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


class ZooKeeperServer:
    """One standalone ZooKeeper process on 127.0.0.1, with its config, data and log in ``base_dir``.

    ``connect_string`` (``"127.0.0.1:<port>"``) is fixed for the object's life, across restarts.
    """

    def __init__(self, base_dir: Path, port: int | None = None, tick_time_ms: int = 500) -> None:
        self.base_dir = Path(base_dir)
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """``host:port`` for ZooKeeper clients (append a chroot for isolation)."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

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

    def start(self, timeout: float = START_TIMEOUT) -> ZooKeeperServer:
        """Start the process and wait until it serves requests; raise ``RuntimeError`` if not."""
        if self.running:
            raise RuntimeError(f"ZooKeeper on port {self.port} is already running")
        missing = zookeeper_missing()
        if missing is not None:
            raise RuntimeError(f"cannot start ZooKeeper: {missing}")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout)
        return self

    def srvr(self, timeout: float = 1.0) -> str:
        """The answer to the ``srvr`` four-letter word; raises ``OSError`` if none."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode} while starting:\n"
                    + self.log_tail()
                )
            try:
                if "Mode: standalone" in self.srvr():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"ZooKeeper did not answer on port {self.port} within {timeout}s:\n" + self.log_tail()
        )

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; return the exit status (None if not
        started). Idempotent."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL — a crash: no shutdown hooks, sessions are not closed."""
        return self._signal(signal.SIGKILL, STOP_TIMEOUT)

    def _signal(self, sig: int, timeout: float) -> int | None:
        return signal_and_wait(self.proc, sig, timeout)

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> ZooKeeperServer:
        """Stop (or kill) the server and start it again on the same port and data dir."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log, for failure messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> ZooKeeperServer:
        return self.start() if not self.running else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
