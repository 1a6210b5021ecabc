"""Fixtures: a real registry process on a free port, and clients for it.

``registry_url`` is one registry for the whole session (tests use distinct subjects);
``RegistryProcess`` starts private ones for restart and lock tests.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.schemas.client import RegistryClient

REPO_ROOT = Path(__file__).resolve().parents[2]

START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RegistryProcess:
    """``python -m sluice registry start`` as a child process, logging to a file."""

    def __init__(self, data_dir: Path, log_path: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "sluice.cli.registry_command",
            "registry",
            "start",
            "--config",
            str(REPO_ROOT / "conf" / "registry.properties"),
            "--override",
            f"listeners={self.url}",
            "--override",
            f"schema.registry.data.dir={self.data_dir}",
        ]

    def start(self, *, wait: bool = True) -> RegistryProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT
            )
        if wait:
            self.wait_ready()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"registry exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as e:
                e.close()
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"registry did not answer within {START_TIMEOUT}s:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the process, wait for it, return its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    status = process.stop()
    assert status == 0, f"registry exited with {status}:\n{process.log()}"


@pytest.fixture
def start_registry(tmp_path: Path) -> Iterator[Callable[..., RegistryProcess]]:
    """``start_registry(name)``: a private registry process on ``tmp_path/name`` (stopped at
    teardown if the test did not stop it). Calling it again with a name reuses that data dir."""
    started: list[RegistryProcess] = []

    def start(name: str, *, wait: bool = True) -> RegistryProcess:
        process = RegistryProcess(tmp_path / name, tmp_path / f"{name}.log")
        started.append(process.start(wait=wait))
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def client(registry_url: str) -> Iterator[RegistryClient]:
    with RegistryClient(registry_url) as c:
        yield c


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject name unique to the test (the session registry is shared)."""
    return f"{request.node.name}-value".replace("[", "-").replace("]", "")
