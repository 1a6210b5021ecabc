"""Ports on 127.0.0.1 and polling: the two things every real-server test needs.

* :func:`free_port` asks the OS for a port nobody holds; :func:`port_free` checks a given one
  (the demos keep a config's port when they can). Between the check and the server's bind
  another process may take the port; on a loopback-only test box that race has not been seen,
  and a server that loses it fails loudly at start.
* :func:`port_open` / :func:`wait_for_port`: something accepts TCP connections there.
* :func:`wait_until` polls a predicate until it returns something truthy and returns that
  value — never a fixed sleep. A timeout raises :class:`WaitTimeoutError`, an
  ``AssertionError``, so pytest reports it as a failed check ("timed out after 30s waiting for
  the mirror to commit"), not as an error in the test's code.

All functions are thread-safe (they share no state).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LOOPBACK = "127.0.0.1"


class WaitTimeoutError(AssertionError):
    """:func:`wait_until` gave up: the condition still did not hold at the deadline."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picked it for us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def port_open(port: int, host: str = LOOPBACK, timeout: float = 1.0) -> bool:
    """Whether something accepts a TCP connection on ``host:port`` within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """Poll until something accepts TCP connections on ``host:port``; False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port, host, timeout=0.5):
            return True
        time.sleep(0.05)
    return False


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 10.0,
    message: str = "condition",
    *,
    interval: float = 0.05,
    ignore: tuple[type[Exception], ...] = (),
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy, and
    return that value; raise :class:`WaitTimeoutError` once ``timeout`` seconds have passed.

    ``predicate`` is always called at least once, and a last time after the deadline has
    passed, so a slow predicate is never cut short. Exceptions of the types in ``ignore``
    count as "not yet" (a server between states); the last one is named in the timeout
    message. Any other exception propagates at once.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
        except ignore as exc:
            value, last_error = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f" (last error: {last_error})" if last_error is not None else ""
            raise WaitTimeoutError(f"timed out after {timeout}s waiting for {message}{extra}")
        time.sleep(interval)
