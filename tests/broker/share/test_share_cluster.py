"""Share groups on the 3-broker cluster (ZooKeeper): the member heartbeats to the group's
coordinator (FindCoordinator's answer) and fetches each partition from its leader, in one share
session per broker, as a share consumer does; every record is delivered once.

Coordinator failover is not served: each share-partition's state lives on its leader's disk
(``ShareStateStore``), so a new leader starts it again by ``share.auto.offset.reset``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.cluster import BrokerCluster
from tests.broker.server.handlers.test_share_fetch import ShareMember, drain, produce
from tests.broker.server.wire import WireClient, request

pytestmark = [pytest.mark.broker]


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def test_a_member_fetches_from_every_leader(cluster: BrokerCluster) -> None:
    topic, group = "share-cluster", "sg-cluster"
    cluster.create_topic(topic, 3)
    leaders = {p: cluster.wait_leader(topic, p).leader for p in range(3)}
    deadline = time.monotonic() + 30
    with WireClient(cluster.brokers[0].port) as wire:
        # The first FindCoordinator creates __consumer_offsets; its leaders come a moment later.
        while True:
            find = request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
            found = wire.call(find)
            if found.error_code == Errors.NONE:
                break
            assert found.error_code == Errors.COORDINATOR_NOT_AVAILABLE
            assert time.monotonic() < deadline
            time.sleep(0.2)
    coordinator = ShareMember(cluster.brokers[found.node_id], group, topic)
    coordinator.heartbeat()
    coordinator.heartbeat()
    assert coordinator.partitions == [0, 1, 2]
    # One connection and share session per leader, with the partitions it leads.
    members = {}
    for broker_id in sorted(set(leaders.values())):
        m = ShareMember(cluster.brokers[broker_id], group, topic)
        m.member_id, m.topic_id = coordinator.member_id, coordinator.topic_id
        m.partitions = [p for p, leader in leaders.items() if leader == broker_id]
        m.fetch()  # opens the session
        members[broker_id] = m
    try:
        produce(cluster.brokers[0], topic, 3, 30)  # bootstraps from one broker
        got = drain(list(members.values()))
        everything = [k for m in members.values() for k in got[m]]
        assert sorted(everything) == sorted((i % 3, i // 3) for i in range(30))
    finally:
        coordinator.heartbeat(leave=True)
        coordinator.close()
        for m in members.values():
            m.close()
