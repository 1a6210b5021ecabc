"""Shutdown always finishes, and connections are limited (issue 21, parts 3 and 5).

Shutdown: ``ControlledShutdown`` against fakes (its attempts and its bound); ``ShutdownGuard``
in a child Python (the bound and a second signal end the process with the documented
statuses); then real three-broker clusters whose ZooKeeper is killed with -9: SIGTERM stops
a broker within its bound with status 0 and its logs flushed and checkpointed, a restart
recovers nothing, and a second SIGTERM ends a slow shutdown at once (status 143).

Limits: ``ConnectionLimits`` against a model of counts, and the config keys; then a real
broker: idle and half-sent connections closed after ``connections.max.idle.ms``; the per-IP,
override and total limits refuse the extra connection (one log line per burst) while a
well-behaved client keeps working; closing a connection makes room again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.broker.config import MAX_INT32, BrokerConfig, ConfigError
from sluice.broker.log.checkpoint import OffsetCheckpoint
from sluice.broker.log.log_manager import RECOVERY_POINT_FILE
from sluice.broker.server.connection_limits import ConnectionLimits, resolve_overrides
from sluice.broker.server.controlled_shutdown import ControlledShutdown
from sluice.broker.server.shutdown_guard import EXIT_SHUTDOWN_TIMEOUT
from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import ZooKeeperServer, new_chroot, zookeeper_missing
from tests.broker.server.broker_process import BrokerProcess, StartBroker
from tests.broker.server.clients import consume, produce, sample_messages, unique
from tests.broker.server.wire import WireClient

ROOT = Path(__file__).resolve().parents[3]

# -- ControlledShutdown ------------------------------------------------------------------


def test_controlled_shutdown_leaves_when_connected(caplog: pytest.LogCaptureFixture) -> None:
    left: list[bool] = []
    policy = ControlledShutdown(True, 3, 200)
    with caplog.at_level(logging.INFO):
        assert asyncio.run(policy.leave(lambda: True, lambda: left.append(True)))
    assert left == [True]
    assert "controlled shutdown succeeded (attempt 1)" in caplog.text


def test_controlled_shutdown_gives_up_within_its_budget(caplog: pytest.LogCaptureFixture) -> None:
    """ZooKeeper never connects: three failed attempts, one line each, within 3 x backoff."""
    policy = ControlledShutdown(True, 3, 200)
    assert policy.budget_s == pytest.approx(0.6)
    attempts: list[int] = []
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert not asyncio.run(policy.leave(lambda: False, lambda: None, attempts.append))
    assert time.monotonic() - started < policy.budget_s + 0.5
    assert attempts == [1, 2, 3]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "attempt 1 of 3 failed: not connected to ZooKeeper" in lines[0]
    assert "attempt 2 of 3 failed" in lines[1]
    assert "failed after 3 attempts (not connected to ZooKeeper): stopping anyway" in lines[2]


def test_a_leave_that_hangs_is_abandoned_and_started_once() -> None:
    calls: list[int] = []

    def hang() -> None:
        calls.append(1)
        time.sleep(5)  # a daemon thread: abandoned, not waited for

    policy = ControlledShutdown(True, 2, 200)
    started = time.monotonic()
    assert not asyncio.run(policy.leave(lambda: True, hang))
    assert time.monotonic() - started < 1.0
    assert calls == [1]


def test_controlled_shutdown_disabled_does_not_wait() -> None:
    policy = ControlledShutdown(False, 3, 5000)
    assert policy.budget_s == 0
    assert not asyncio.run(policy.leave(lambda: True, lambda: None))


# -- ShutdownGuard, in a child Python ----------------------------------------------------

_GUARDED = """
import asyncio, logging, os, signal, sys, time
from sluice.broker.server.shutdown_guard import ShutdownGuard

logging.basicConfig(level=logging.INFO, stream=sys.stdout)
flushed = []

async def main():
    stop = asyncio.Event()
    guard = ShutdownGuard(
        float(sys.argv[1]), on_first=stop.set, flush=lambda: flushed.append(1),
        describe=lambda: "a step that hangs",
    )
    assert guard.install(asyncio.get_running_loop())
    print("ready", flush=True)
    await stop.wait()
    print("stopping", flush=True)
    await asyncio.sleep(60)  # a shutdown step that never finishes

asyncio.run(main())
"""


def _guarded(bound: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_GUARDED), str(bound)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_the_bound_ends_a_hung_shutdown() -> None:
    proc = _guarded(1.0)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == EXIT_SHUTDOWN_TIMEOUT, out
    assert time.monotonic() - started < 1.0 + 3.0 + 2.0  # bound + flush bound + slack
    assert "shutdown did not finish within 1.0s (a step that hangs)" in out
    assert "logs flushed" in out


def test_a_second_signal_ends_a_shutdown_at_once() -> None:
    proc = _guarded(60.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "stopping"
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGINT, out
    assert time.monotonic() - started < 3.0
    assert "second SIGINT: stopping now" in out


# -- a cluster whose ZooKeeper died ------------------------------------------------------

# Short attempts, so the controlled part's budget is 3 s and the whole bound 23 s.
SHUTDOWN_OVERRIDES = {
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "1000",
}


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test's own: the tests kill it."""
    missing = zookeeper_missing()
    if missing is not None:
        pytest.skip(f"ZooKeeper is needed but {missing}")
    server = ZooKeeperServer(tmp_path / "zookeeper").start()
    try:
        yield server
    finally:
        server.stop()


def _cluster(tmp_path: Path, zk: ZooKeeperServer, overrides: dict[str, str]) -> BrokerCluster:
    connect = zk.connect_string + new_chroot(zk)
    return BrokerCluster(tmp_path / "cluster", connect, overrides=overrides)


def _recovery_points(broker: BrokerProcess) -> dict[tuple[str, int], int]:
    return OffsetCheckpoint(broker.log_dir / RECOVERY_POINT_FILE).read()


@pytest.mark.broker
@pytest.mark.slow
def test_sigterm_stops_a_broker_whose_zookeeper_died(
    tmp_path: Path, private_zookeeper: ZooKeeperServer
) -> None:
    """ZooKeeper killed -9, then SIGTERM: the broker gives up the controlled part after its
    three attempts, stops within its bound with status 0 — logs flushed, checkpointed, the
    clean-shutdown marker written — and a restart recovers nothing and serves everything."""
    cluster = _cluster(tmp_path, private_zookeeper, SHUTDOWN_OVERRIDES)
    with cluster:
        topic = unique("zk-dead")
        cluster.create_topic(topic, partitions=2, replication_factor=3)
        messages = sample_messages(60)
        delivered = produce(cluster.bootstrap, topic, messages, acks="all")
        counts = {p: sum(d.partition == p for d in delivered) for p in (0, 1)}
        broker = cluster.brokers[2]

        private_zookeeper.kill()
        time.sleep(1.0)  # the brokers see the connection drop
        bound = 3 * 1.0 + 20.0  # controlled.shutdown budget + SHUTDOWN_GRACE
        started = time.monotonic()
        code = broker.stop(timeout=bound + 10)
        elapsed = time.monotonic() - started
        output = broker.output()
        assert code == 0, f"exit status {code} after {elapsed:.1f}s:\n{broker.output_tail()}"
        assert elapsed < bound, f"stopped after {elapsed:.1f}s, bound {bound}s"
        assert "controlled shutdown failed after 3 attempts" in output, broker.output_tail()
        assert "stopped cleanly" in output
        assert broker.clean_shutdown_marker.exists()
        points = _recovery_points(broker)
        assert {p: points.get((topic, p)) for p in counts} == counts, "not all flushed"

        private_zookeeper.restart()
        broker.start()
        assert "(0 bytes cut by recovery)" in broker.output_tail(200)
        cluster.wait_registered({0, 1, 2}, timeout=60)
        for p in counts:
            cluster.wait_isr(topic, p, {0, 1, 2}, timeout=60)
        got = consume(broker.bootstrap, topic, counts, timeout=30)
        values = sorted(m.value() or b"" for ms in got.values() for m in ms)
        assert values == sorted(m.value or b"" for m in messages)


@pytest.mark.broker
@pytest.mark.slow
def test_a_second_sigterm_ends_a_slow_shutdown(
    tmp_path: Path, private_zookeeper: ZooKeeperServer
) -> None:
    """Long controlled-shutdown attempts (3 x 30 s) and ZooKeeper dead: the second SIGTERM
    ends the broker at once with status 143; it restarts, recovering its logs."""
    slow = {"controlled.shutdown.retry.backoff.ms": "30000"}
    cluster = _cluster(tmp_path, private_zookeeper, slow)
    with cluster:
        topic = unique("slow-stop")
        cluster.create_topic(topic, partitions=1, replication_factor=3)
        produce(cluster.bootstrap, topic, sample_messages(20), acks="all")
        broker = cluster.brokers[1]
        private_zookeeper.kill()
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGTERM)
        wait_until(
            lambda: (
                "controlled shutdown, attempt" in broker.output()
                or "attempt 1 of 3 failed" in broker.output()
                or "shutting down" in broker.output()
            ),
            20,
            "the broker to begin its shutdown",
        )
        time.sleep(1.0)  # inside the first controlled-shutdown attempt
        assert broker.running, broker.output_tail()
        started = time.monotonic()
        code = broker.stop(timeout=15)
        assert code == 128 + signal.SIGTERM, broker.output_tail()
        assert time.monotonic() - started < 5.0
        assert "second SIGTERM: stopping now" in broker.output()

        private_zookeeper.restart()
        broker.start()
        cluster.wait_registered({0, 1, 2}, timeout=60)
        cluster.wait_isr(topic, 0, {0, 1, 2}, timeout=60)
        consume(broker.bootstrap, topic, {0: 20}, timeout=30)


# -- ConnectionLimits --------------------------------------------------------------------


def _limits(**kwargs: int | dict[str, int]) -> ConnectionLimits:
    settings: dict[str, object] = {
        "max_connections": MAX_INT32,
        "max_per_ip": MAX_INT32,
        "per_ip_overrides": {},
        "max_idle_ms": 600_000,
        **kwargs,
    }
    return ConnectionLimits(**settings)  # type: ignore[arg-type]


def test_per_ip_limit_and_override() -> None:
    limits = _limits(max_per_ip=2, per_ip_overrides={"10.0.0.9": 0, "10.0.0.5": 3})
    a = [limits.admit("10.0.0.1"), limits.admit("10.0.0.1")]
    assert all(a) and limits.admit("10.0.0.1") is None
    assert limits.admit("::ffff:10.0.0.1") is None  # the same client over IPv6
    assert limits.admit("10.0.0.2") is not None
    assert limits.admit("10.0.0.9") is None
    assert [limits.admit("10.0.0.5") is not None for _ in range(4)] == [True] * 3 + [False]
    slot = a[0]
    assert slot is not None
    limits.release(slot)
    limits.release(slot)  # idempotent
    assert limits.admit("10.0.0.1") is not None


def test_total_limit() -> None:
    limits = _limits(max_connections=2)
    first = limits.admit("10.0.0.1")
    assert first is not None and limits.admit("10.0.0.2") is not None
    assert limits.admit("10.0.0.3") is None
    limits.release(first)
    assert limits.admit("10.0.0.3") is not None


def test_refusals_are_logged_once_per_burst(caplog: pytest.LogCaptureFixture) -> None:
    limits = _limits(max_per_ip=1)
    slot = limits.admit("10.0.0.1")
    assert slot is not None
    with caplog.at_level(logging.INFO):
        for _ in range(50):
            assert limits.admit("10.0.0.1") is None
        limits.release(slot)
        assert limits.admit("10.0.0.1") is not None
        assert limits.admit("10.0.0.1") is None  # a new burst
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "max.connections.per.ip allows 1 from 10.0.0.1" in lines[0]
    assert "after refusing 50" in lines[1]


def test_idle_connections_are_those_waiting_for_bytes() -> None:
    limits = _limits(max_idle_ms=1000)
    waiting, busy = limits.admit("10.0.0.1"), limits.admit("10.0.0.1")
    assert waiting is not None and busy is not None
    waiting.waiting_since = 100.0
    assert limits.idle(100.5) == []
    assert limits.idle(101.0) == [waiting]  # busy (waiting_since None) is never idle
    assert _limits(max_idle_ms=-1).idle_check_interval is None


def test_overrides_resolve_host_names() -> None:
    assert resolve_overrides({"localhost": 4, "::1": 2}).get("127.0.0.1") == 4
    with pytest.raises(ValueError, match="no-such-host.invalid"):
        resolve_overrides({"no-such-host.invalid": 1})


def test_config_keys() -> None:
    default = BrokerConfig.from_properties({})
    assert (default.connections_max_idle_ms, default.max_connections) == (600_000, MAX_INT32)
    assert default.controlled_shutdown_enable
    assert (
        default.controlled_shutdown_max_retries,
        default.controlled_shutdown_retry_backoff_ms,
    ) == (3, 5000)
    config = BrokerConfig.from_properties(
        {
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "127.0.0.1:5, [::1]:7,gateway:0",
            "controlled.shutdown.enable": "false",
        }
    )
    assert dict(config.max_connections_per_ip_overrides) == {"127.0.0.1": 5, "::1": 7, "gateway": 0}
    assert not config.controlled_shutdown_enable
    for bad in (
        {"max.connections.per.ip": "0"},
        {"max.connections.per.ip.overrides": "127.0.0.1"},
        {"max.connections.per.ip.overrides": "127.0.0.1:-1"},
        {"max.connections": "-1"},
        {"connections.max.idle.ms": "0"},
        {"controlled.shutdown.max.retries": "-1"},
    ):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            BrokerConfig.from_properties(bad)


# -- a real broker -----------------------------------------------------------------------


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.broker
def test_idle_and_half_sent_connections_are_closed(start_broker: StartBroker) -> None:
    broker = start_broker({"connections.max.idle.ms": "800"})
    with WireClient(broker.port) as busy:
        idle, half = _connect(broker.port), _connect(broker.port)
        half.sendall(b"\x00\x00\x00\x40\x00\x12")  # 64 bytes announced, 2 sent
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # a client that keeps asking stays connected
            assert busy.api_versions_ok()
            time.sleep(0.2)
        assert _closed_by_peer(idle, 2.0), "an idle connection outlived connections.max.idle.ms"
        assert _closed_by_peer(half, 2.0), "a half-sent request held its connection"
        assert busy.api_versions_ok()
        idle.close()
        half.close()


@pytest.mark.broker
def test_per_ip_limit_refuses_the_extra_connection(start_broker: StartBroker) -> None:
    broker = start_broker({"max.connections.per.ip": "3"})
    with WireClient(broker.port) as client:
        assert client.api_versions_ok()
        others = [_connect(broker.port) for _ in range(2)]
        time.sleep(0.3)  # accepted
        extra = [_connect(broker.port) for _ in range(5)]
        assert all(_closed_by_peer(sock, 3.0) for sock in extra), "a 4th connection was kept"
        assert client.api_versions_ok()
        assert broker.output().count("refusing new connections") == 1, broker.output_tail()
        for sock in others + extra:
            sock.close()
        wait_until(broker.answers, 5, "room for a new connection once others closed")
        assert re.search(
            r"accepting connections from 127.0.0.1 again after refusing \d+", broker.output()
        )
        assert client.api_versions_ok()


@pytest.mark.broker
def test_override_and_total_limits(start_broker: StartBroker) -> None:
    broker = start_broker({"max.connections.per.ip.overrides": "127.0.0.1:2"})
    with WireClient(broker.port) as client:
        held = _connect(broker.port)
        time.sleep(0.3)
        refused = _connect(broker.port)
        assert _closed_by_peer(refused, 3.0), "the override of 2 let a 3rd connection in"
        assert client.api_versions_ok()
        assert "max.connections.per.ip.overrides allows 2 from 127.0.0.1" in broker.output()
        held.close()
        refused.close()
        wait_until(broker.answers, 5, "room again once a connection closed")
    # max.connections: two open, the third refused.
    total = start_broker({"max.connections": "2"})
    with WireClient(total.port) as client:
        second = _connect(total.port)
        time.sleep(0.3)
        third = _connect(total.port)
        assert _closed_by_peer(third, 3.0), "max.connections=2 let a 3rd connection in"
        assert client.api_versions_ok()
        assert "max.connections=2 are open" in total.output()
        second.close()
        third.close()
        wait_until(total.answers, 5, "room again once a connection closed")
        assert client.api_versions_ok()
