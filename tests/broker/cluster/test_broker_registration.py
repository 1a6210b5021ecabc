"""BrokerRegistration through ClusterMetadata: the session's health as a leader may act on it
(suspended, lost, back), and a stop that never waits for a ZooKeeper that is down."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from sluice.broker.cluster.broker_registration import BrokerRegistration
from sluice.broker.cluster.cluster_metadata import ClusterMetadata
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import ZooKeeperServer, kazoo_client
from tests.broker.cluster import SimCluster


@pytest.fixture
def own_zookeeper(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test's own, to stop and start (``zookeeper``: the availability
    check and skip-or-fail rule)."""
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        yield server
    finally:
        server.stop()


def test_session_intact_follows_suspension_and_stop_does_not_wait(
    own_zookeeper: ZooKeeperServer,
) -> None:
    client = kazoo_client(own_zookeeper.connect_string, timeout=10.0)
    metadata = ClusterMetadata(client, 1, listener_host="127.0.0.1", listener_port=9001)
    try:
        metadata.start()
        assert metadata.session_intact()
        own_zookeeper.restart()  # same session after the blip: intact again
        wait_until(lambda: client.connected and metadata.session_intact(), 45, "reconnected")
        own_zookeeper.stop()
        wait_until(lambda: not metadata.session_intact(), 15, "suspension noticed")
        started = time.monotonic()
        metadata.stop()
        assert time.monotonic() - started < 5.0, "stop waited for ZooKeeper"
    finally:
        metadata.stop()
        client.stop()
        client.close()


def test_expiry_fences_until_reregistered(cluster: SimCluster, zk_client: KazooClient) -> None:
    (b1,) = cluster.start(1)
    first = b1.registration.czxid
    assert first == zk_client.get("/brokers/ids/1")[1].czxid and b1.session_intact()
    seen: list[bool] = []
    cluster.clients[1].add_listener(lambda _state: seen.append(b1.session_intact()))
    cluster.expire(1)
    wait_until(lambda: b1.session_intact(), 30, "re-registered")
    assert False in seen  # fenced in between
    assert b1.registration.czxid == zk_client.get("/brokers/ids/1")[1].czxid != first


def test_deregister_is_skipped_when_not_connected(zk_connect: str) -> None:
    client = kazoo_client(zk_connect)
    client.ensure_path("/brokers/ids")
    registration = BrokerRegistration(client, 7, timeout=1.0)
    registration.register("127.0.0.1", 9007, None)
    registration.mark_registered()
    assert registration.session_intact
    client.stop()  # the session closes: its znode goes with it
    started = time.monotonic()
    registration.deregister()
    assert time.monotonic() - started < 1.0 and not registration.session_intact
    client.close()
    check = kazoo_client(zk_connect)
    try:
        assert check.exists("/brokers/ids/7") is None
    finally:
        check.stop()
        check.close()
