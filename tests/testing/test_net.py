"""``sluice.testing.net``: free ports and polling."""

from __future__ import annotations

import socket
import time

import pytest

from sluice.testing.net import (
    WaitTimeoutError,
    free_port,
    port_free,
    port_open,
    wait_for_port,
    wait_until,
)


def test_free_port_is_bindable_and_a_listener_makes_it_taken_and_open() -> None:
    port = free_port()
    assert port_free(port) and not port_open(port)
    with socket.create_server(("127.0.0.1", port)):
        assert not port_free(port)
        assert port_open(port) and wait_for_port("127.0.0.1", port, 1.0)
    assert not wait_for_port("127.0.0.1", port, 0.2)


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = iter([None, 0, [], "ready"])
    assert wait_until(lambda: next(calls), 5, "a value", interval=0.001) == "ready"


def test_wait_until_times_out_with_what_it_waited_for() -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError, match=r"timed out after 0\.1s waiting for nothing"):
        wait_until(lambda: False, 0.1, "nothing", interval=0.01)
    assert time.monotonic() - started >= 0.1


def test_wait_until_is_an_assertion_failure_for_pytest() -> None:
    with pytest.raises(AssertionError):
        wait_until(lambda: None, 0.05)


def test_ignored_errors_count_as_not_yet_and_the_last_is_named() -> None:
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError(f"attempt {len(attempts)}")
        return "up"

    assert wait_until(flaky, 5, "up", interval=0.001, ignore=(OSError,)) == "up"

    def down() -> str:
        raise ConnectionError("refused")

    with pytest.raises(WaitTimeoutError, match=r"\(last error: refused\)"):
        wait_until(down, 0.05, "down", interval=0.01, ignore=(OSError,))


def test_other_errors_propagate_at_once() -> None:
    def broken() -> bool:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        wait_until(broken, 5, "never", ignore=(OSError,))
