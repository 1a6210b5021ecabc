"""``RegistryProcess``: a real schema registry (``python -m sluice registry start``) as a child
process, on a free port of 127.0.0.1.

The command line::

    python -m sluice registry start --override listeners=http://127.0.0.1:<port> \
        --override schema.registry.data.dir=<data_dir> [--override key=value ...]

Everything else is the registry's default — the values ``conf/registry.properties`` spells
out (compatibility BACKWARD, log level info); ``overrides`` changes any of them (for example
``schema.registry.zookeeper.connect`` for cluster mode, ``log.level=warning``). Subclasses may
extend :meth:`~RegistryProcess.command`.

Ready when ``GET /`` answers 200: the HTTP server is up and its store is open. Stopping it with
SIGTERM (or SIGINT) is a clean shutdown, exit status 0; a second registry on the same data dir
exits 1 at start ("in use by another registry process").

Not thread-safe: one thread drives a process; ``url`` may be read from any thread.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from sluice.testing.net import free_port
from sluice.testing.process import ChildProcess

START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0


class RegistryProcess(ChildProcess):
    """One registry serving ``url`` from ``data_dir``, its output in ``log_path``."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        port: int | None = None,
        *,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            log_path,
            name="the registry",
            start_timeout=START_TIMEOUT,
            stop_timeout=STOP_TIMEOUT,
        )
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.overrides = dict(overrides or {})

    def command(self) -> list[str]:
        settings = {
            "listeners": self.url,
            "schema.registry.data.dir": str(self.data_dir),
            **self.overrides,
        }
        args = [sys.executable, "-m", "sluice", "registry", "start"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/", timeout=1) as response:
                return bool(response.status == 200)
        except urllib.error.HTTPError as e:
            e.close()
        except OSError:
            pass
        return False

    def start(self, timeout: float | None = None, *, wait: bool = True) -> Self:
        """Start the registry and (unless ``wait`` is false) wait until it answers; without
        waiting, call :meth:`wait_ready` later (several may then start side by side)."""
        return super().start(timeout) if wait else self.spawn()

    def log(self) -> str:
        """Everything the registry has written to ``log_path``."""
        return self.output()
