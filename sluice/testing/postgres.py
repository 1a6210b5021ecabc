"""A real PostgreSQL for tests: Debian's ``postgresql`` server run as a child process.

How it is started: ``initdb`` a fresh cluster in a temporary directory (as root: one of its
own in the system temp dir, since pytest's are
private to root), then ``postgres -D
<dir>`` in the foreground, listening on 127.0.0.1 only, on a free port, with its socket in the
same directory (no ``/run/postgresql`` needed). PostgreSQL refuses to run as root ("root"
execution of the PostgreSQL server is not permitted), so as root every command runs as the
``postgres`` user the Debian package creates (``runuser -u postgres --``), and the directory is
handed to that user; as any other user they run as that user. ``fsync=off`` (a killed server
loses nothing the page cache holds; only a machine crash would), ``trust`` authentication on
127.0.0.1 (the tests' URLs carry no password).

The binaries are the newest major version under ``/usr/lib/postgresql/<major>/bin`` (Debian
installs them there and puts only wrappers on ``PATH``). Startup (initdb included) takes about
2 s on the 2-core test box. ``postgres_missing()`` says why none can be started; the test
fixture fails instead of skipping under ``CI=true``.

Lifecycle as every ``ChildProcess``: ``start()`` → ``stop()`` (SIGTERM: PostgreSQL's "smart"
shutdown; SIGKILL after the timeout) or ``kill()``. Not thread-safe: one thread drives a
server. ``create_database`` opens its own connection and is thread-safe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Self

from sluice.testing.net import free_port
from sluice.testing.process import ChildProcess

POSTGRES_ROOT = Path("/usr/lib/postgresql")
SERVICE_USER = "postgres"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


class PostgresMissingError(RuntimeError):
    """Debian's ``postgresql`` package is not installed (``make system-deps``)."""


def postgres_bin() -> Path | None:
    """The ``bin`` directory of the newest installed PostgreSQL, or None."""
    if not POSTGRES_ROOT.is_dir():
        return None
    versions = sorted(
        (p for p in POSTGRES_ROOT.iterdir() if (p / "bin" / "postgres").is_file()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    )
    return versions[-1] / "bin" if versions else None


def postgres_missing() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None if it can."""
    if postgres_bin() is None:
        return f"no PostgreSQL under {POSTGRES_ROOT} (Debian package `postgresql`)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root and no `runuser` to run PostgreSQL as another user"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return f"running as root and no {SERVICE_USER!r} user (created by the package)"
    return None


def _as_service_user(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", SERVICE_USER, "--", *argv]
    return argv


class PostgresServer(ChildProcess):
    """One PostgreSQL cluster on 127.0.0.1 with its data, socket and log in ``base_dir``."""

    def __init__(self, base_dir: Path, port: int | None = None) -> None:
        self.base_dir = Path(base_dir).absolute()
        super().__init__(
            self.base_dir / "postgres.log",
            name="PostgreSQL",
            start_timeout=START_TIMEOUT,
            stop_timeout=STOP_TIMEOUT,
        )
        # The service user must reach its directory, and pytest's temporary directories are
        # private to root (0700): as root the cluster lives in a directory of its own in the
        # system temp dir, handed to that user, and ``remove()`` deletes it.
        if os.geteuid() == 0:
            self.cluster_dir = Path(tempfile.mkdtemp(prefix="sluice-postgres-"))
        else:
            self.cluster_dir = self.base_dir
        self.data_dir = self.cluster_dir / "data"
        self.port = port or free_port()
        self.user = SERVICE_USER if os.geteuid() == 0 else _current_user()

    def url(self, database: str = "postgres") -> str:
        """An SQLAlchemy URL (psycopg2 driver) of ``database``."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def _chown(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd

        entry = pwd.getpwnam(SERVICE_USER)
        for path in [self.cluster_dir, *self.cluster_dir.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _initdb(self) -> None:
        bindir = postgres_bin()
        assert bindir is not None
        if (self.data_dir / "PG_VERSION").is_file():
            return
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_dir.mkdir(parents=True, exist_ok=True)
        self._chown()
        argv = [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]  # fmt: skip
        done = subprocess.run(
            _as_service_user(argv),
            capture_output=True,
            text=True,
            cwd=self.cluster_dir,
            check=False,
        )
        if done.returncode != 0:
            raise PostgresMissingError(f"initdb failed ({done.returncode}): {done.stderr[-2000:]}")

    def command(self) -> list[str]:
        bindir = postgres_bin()
        assert bindir is not None
        return _as_service_user(
            [
                str(bindir / "postgres"),
                "-D",
                str(self.data_dir),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"port={self.port}",
                "-c",
                f"unix_socket_directories={self.cluster_dir}",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=50",
            ]  # fmt: skip
        )

    def spawn(self) -> Self:
        missing = postgres_missing()
        if missing is not None:
            raise PostgresMissingError(f"cannot start PostgreSQL: {missing}")
        self._initdb()
        return super().spawn()

    def ready(self) -> bool:
        bindir = postgres_bin()
        assert bindir is not None
        done = subprocess.run(
            [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def remove(self) -> None:
        """Stop the server and delete its cluster directory."""
        self.stop()
        shutil.rmtree(self.cluster_dir, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """Create database ``name``; returns its URL."""
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user,
                                      dbname="postgres")  # fmt: skip
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return self.url(name)


def _current_user() -> str:
    import getpass

    return getpass.getuser()
