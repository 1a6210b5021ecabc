"""``BrokerProcess``: a real Sluice broker (``python -m sluice broker start``) as a subprocess.

The tests talk to it the way users do — over TCP on 127.0.0.1 with real clients — and stop it
the way operators do: SIGTERM for a clean shutdown (exit code 0, the clean-shutdown marker
written), SIGKILL for a crash. ``port`` and ``log_dir`` are fixed for the object's life, so
``restart()`` brings the same broker back on the same address with the same data.

Readiness is an answered ApiVersions request, not just an accepted TCP connection: the broker
listens only after it has loaded (and if need be recovered) its logs, and answering proves
the request path works.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from sluice.broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from tests.broker.server.wire import WireClient
from tests.net import free_port, signal_and_wait

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0


class BrokerProcess:
    """One standalone broker on ``127.0.0.1:<port>`` with its data in ``log_dir``.

    ``overrides`` are ``--override key=value`` settings (Kafka's key names) on top of the few
    every test broker gets: its listener, its log dir and a one-partition
    ``__consumer_offsets``. With ``metrics_port`` it serves Prometheus metrics there;
    ``max_open_files`` sets its file-descriptor limit (``ulimit -n``).
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        metrics_port: int | None = None,
        max_open_files: int | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.log_dir = self.base_dir / "data"
        self.output_path = self.base_dir / "broker.out"
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.metrics_port = metrics_port
        self.max_open_files = max_open_files
        if metrics_port is not None:
            self.overrides["metrics.listener"] = f"http://127.0.0.1:{metrics_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def clean_shutdown_marker(self) -> Path:
        return self.log_dir / CLEAN_SHUTDOWN_FILE

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "offsets.topic.num.partitions": "1",
            **self.overrides,
        }
        args = [sys.executable, "-m", "sluice", "broker", "start"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        if self.max_open_files is not None:
            # The shell sets the limit and execs, so the pid stays the broker's.
            args = ["sh", "-c", f'ulimit -n {self.max_open_files} && exec "$@"', "sh", *args]
        return args

    def start(self, timeout: float = START_TIMEOUT) -> BrokerProcess:
        """Start the process and wait until it answers ApiVersions; ``RuntimeError`` if not."""
        if self.running:
            raise RuntimeError(f"a broker on port {self.port} is already running")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        # kio imports hypothesis when it is installed (as in this venv), and hypothesis then
        # builds its Unicode tables under ./.hypothesis — about 3 s on this box for every new
        # working directory. Point it at the cache the test process itself uses.
        env = dict(os.environ)
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path.cwd() / ".hypothesis"))
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.base_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout)
        return self

    def answers(self, timeout: float = 2.0) -> bool:
        """Whether the broker answers an ApiVersions request within ``timeout`` seconds."""
        try:
            with WireClient(self.port, timeout=timeout) as client:
                return client.api_versions_ok()
        except OSError:
            return False

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the broker exited with {self.proc.returncode} while starting:\n"
                    + self.output_tail()
                )
            if self.answers(timeout=1.0):
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"the broker did not answer on port {self.port} within {timeout}s:\n"
            + self.output_tail()
        )

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); the exit status, None if never
        started. Idempotent."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL — a process crash: no shutdown, no flush, no clean-shutdown marker. The
        page cache survives, so what the broker wrote is still readable after it."""
        return self._signal(signal.SIGKILL, STOP_TIMEOUT)

    def _signal(self, sig: int, timeout: float) -> int | None:
        return signal_and_wait(self.proc, sig, timeout)

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> BrokerProcess:
        """Stop (or kill) the broker and start it again on the same port and log dir. A
        SIGTERM stop must exit 0 and leave the clean-shutdown marker (``RuntimeError``)."""
        if kill:
            self.kill()
        else:
            code = self.stop()
            marker = self.clean_shutdown_marker.exists()
            if code != 0 or not marker:
                raise RuntimeError(
                    f"SIGTERM: expected exit code 0 and {self.clean_shutdown_marker.name}, "
                    f"found {code} and {'it' if marker else 'no marker'}:\n{self.output_tail()}"
                )
        return self.start(timeout)

    def output(self) -> str:
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def output_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's log output, for failure messages."""
        return "\n".join(self.output().splitlines()[-lines:]) or "(no output)"

    def __enter__(self) -> BrokerProcess:
        return self.start() if not self.running else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


StartBroker = Callable[..., BrokerProcess]
"""The ``start_broker`` fixture: ``start_broker(overrides, **BrokerProcess options)``."""
