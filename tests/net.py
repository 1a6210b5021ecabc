"""Small helpers for tests that start real servers on 127.0.0.1: ports and processes."""

from __future__ import annotations

import os
import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picked it for us).

    Another process may take it before the caller binds it; on this loopback-only test box
    that race has not been seen, and servers that lose it fail loudly at start.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """Poll until something accepts TCP connections on ``host:port``; False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def signal_and_wait(proc: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> int | None:
    """Send ``sig`` to a running ``proc``, wait up to ``timeout`` for it to exit (SIGKILL
    after that) and return its exit status; None if it was never started. Idempotent."""
    if proc is None:
        return None
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
