"""``MirrorProcess``: the mirror (``python -m sluice mirror run --config <file>``) as a child
process, with its Prometheus endpoint on a free port.

The config is written to ``<base_dir>/<name>.properties`` from the given properties plus
``metrics.listener=http://127.0.0.1:<free port>``; the output goes to ``<base_dir>/<name>.out``.
Ready when the metrics endpoint accepts connections (the mirror opens it after reading its
config). SIGTERM is a clean stop (the mirror commits what it has copied and exits 0); SIGKILL
a crash (it re-copies what it had not committed when started again).

Not thread-safe: one thread drives a process; :meth:`~MirrorProcess.metrics` may be called
from any thread.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from sluice.testing.net import free_port, port_open
from sluice.testing.process import ChildProcess
from sluice.testing.prometheus import Samples, scrape

START_TIMEOUT = 30.0
STOP_TIMEOUT = 60.0
KILL_TIMEOUT = 30.0


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """Write ``props`` as a ``.properties`` file (``key=value`` lines) at ``path``."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


class MirrorProcess(ChildProcess):
    """``sluice mirror run`` with the properties ``props``; see the module docstring."""

    def __init__(self, base_dir: Path, props: Mapping[str, str], name: str = "mirror") -> None:
        self.base_dir = Path(base_dir)
        super().__init__(
            self.base_dir / f"{name}.out",
            name=f"the {name}",
            start_timeout=START_TIMEOUT,
            stop_timeout=STOP_TIMEOUT,
        )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_port = free_port()
        self.config = write_properties(
            self.base_dir / f"{name}.properties",
            {**props, "metrics.listener": f"http://127.0.0.1:{self.metrics_port}"},
        )

    def command(self) -> list[str]:
        return [sys.executable, "-m", "sluice", "mirror", "run", "--config", str(self.config)]

    def ready(self) -> bool:
        return port_open(self.metrics_port, timeout=0.5)

    def kill(self) -> int | None:
        """SIGKILL — a crash; the exit status (``-9``)."""
        return self.stop(signal.SIGKILL, timeout=KILL_TIMEOUT)

    def metrics(self) -> Samples:
        """Every sample of the mirror's ``/metrics`` now."""
        return scrape(self.metrics_port)
