"""``NetworkLab`` with plain sockets: a host reachable through the bridge, a partition that
drops packets both ways (the test client still gets through), a heal, and nothing left behind
after ``close()``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from sluice.testing.netns import NetworkLab, run_ip

pytestmark = pytest.mark.timeout(60)

# A TCP echo server run inside a namespace, on its address.
ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777)); s.listen()
while True:
    c, _ = s.accept(); c.settimeout(5)
    try:
        c.sendall(c.recv(100))
    except OSError:
        pass
    c.close()
"""


def echo(address: str, timeout: float = 1.5) -> bool:
    """Whether ``address``'s echo server answers from here within ``timeout``."""
    try:
        with socket.create_connection((address, 7777), timeout=timeout) as sock:
            sock.sendall(b"ping")
            return sock.recv(4) == b"ping"
    except OSError:
        return False


def echo_from(lab: NetworkLab, index: int, address: str) -> bool:
    """Whether host ``index`` reaches ``address``'s echo server."""
    probe = f"import socket; socket.create_connection(({address!r}, 7777), timeout=1.5)"
    done = subprocess.run(
        ["ip", "netns", "exec", lab.hosts[index].namespace, sys.executable, "-c", probe],
        capture_output=True,
        timeout=20,
        check=False,
    )
    return done.returncode == 0


def test_partition_and_heal(lab: NetworkLab) -> None:
    a, b = lab.add_host(), lab.add_host()
    servers = [
        subprocess.Popen(
            ["ip", "netns", "exec", h.namespace, sys.executable, "-c", ECHO, h.address]
        )  # fmt: skip
        for h in (a, b)
    ]
    try:
        deadline = time.monotonic() + 20
        while not (echo(a.address) and echo(b.address)):
            assert time.monotonic() < deadline, "echo servers did not start"
            time.sleep(0.1)
        assert echo_from(lab, 0, b.address)

        lab.partition(0, [b.address])
        assert not echo_from(lab, 0, b.address)  # a → b dropped
        assert not echo_from(lab, 1, a.address)  # b → a dropped
        assert echo(a.address) and echo(b.address)  # the client still reaches both

        lab.isolate(0)
        assert not echo(a.address)

        lab.heal()
        assert echo(a.address)
        assert echo_from(lab, 0, b.address)
    finally:
        for s in servers:
            s.kill()
            s.wait()


def test_close_removes_namespaces_and_bridge(lab: NetworkLab) -> None:
    host = lab.add_host()
    lab.close()
    assert host.namespace not in run_ip("ip", "netns", "list")
    assert lab.bridge not in run_ip("ip", "link", "show")
