"""ClusterMetadata: registration, the watched view, listeners, the leader's conditional ISR write,
producer-id blocks and re-registration after a session expiry."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from sluice.broker.cluster.cluster_metadata import (
    BrokerInfo,
    BrokerRegistrationError,
    ClusterMetadata,
    PartitionState,
)
from sluice.broker.cluster.topic_metadata import InvalidConfigError, InvalidPartitionsError
from sluice.broker.cluster.zk_data import BrokerIdZNode, ClusterIdZNode
from sluice.common.topic_partition import InvalidTopicError
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import ZooKeeperServer, kazoo_client
from tests.broker.cluster import SimCluster


class Recorder:
    """A metadata listener that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[set[tuple[str, int]] | None] = []
        self._lock = threading.Lock()

    def __call__(self, changed: set[tuple[str, int]] | None) -> None:
        with self._lock:
            self.calls.append(changed)

    def seen(self) -> set[tuple[str, int]]:
        with self._lock:
            return set().union(*(c for c in self.calls if c is not None))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()


def test_registration_and_cluster_view(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, b2, b3 = cluster.start(1, 2, 3, rack="r1")
    expected = {
        b: BrokerInfo(b, "127.0.0.1", 9000 + b, "r1", (("PLAINTEXT", "127.0.0.1", 9000 + b),))
        for b in (1, 2, 3)
    }
    for m in (b1, b2, b3):
        assert m.brokers() == expected
    data, stat = zk_client.get("/brokers/ids/2")
    assert BrokerIdZNode.decode(2, data) == expected[2] and stat.ephemeralOwner != 0
    assert b1.cluster_id == b2.cluster_id == b3.cluster_id
    assert ClusterIdZNode.decode(zk_client.get("/cluster/id")[0]) == b1.cluster_id
    assert len({m.controller_id() for m in (b1, b2, b3)}) == 1

    info = b1.create_topic("orders", 3, 2, {"retention.ms": "1000"})
    for m in (b1, b2, b3):
        wait_until(lambda m=m: all(m.partition_state("orders", p) for p in range(3)))
        assert m.get("orders") == info and m.topics() == {"orders": info}
        for p in range(3):
            state = m.partition_state("orders", p)
            assert state is not None and state.leader == m.replicas("orders", p)[0]
            assert state.isr == m.replicas("orders", p) and state.zk_version == 0
    assert b2.get("missing") is None and b2.partition_state("missing", 0) is None


def test_create_topic_validation_and_defaults(cluster: SimCluster) -> None:
    (b1,) = cluster.start(1, num_partitions=4, default_replication_factor=1)
    with pytest.raises(InvalidTopicError):
        b1.create_topic("bad/name", 1, 1, {})
    with pytest.raises(InvalidPartitionsError):
        b1.create_topic("t", 0, 1, {})
    with pytest.raises(InvalidConfigError):
        b1.create_topic("t", 1, 1, {"retention.ms": 5})  # type: ignore[dict-item]
    info = b1.create_topic("t", -1, -1, {})
    assert (info.partitions, info.replication_factor) == (4, 1)
    assert b1.get("t") == info  # visible to the creating broker at once
    internal = b1.create_topic("__consumer_offsets", 1, 1, {})
    assert internal.internal and wait_until(lambda: b1.get("__consumer_offsets")) == internal


def test_listeners_hear_of_changed_partitions(cluster: SimCluster) -> None:
    b1, b2, b3 = cluster.start(1, 2, 3)
    recorder = Recorder()
    b2.add_listener(recorder)
    b1.create_topic("t", 4, 2, {})
    everything = {("t", p) for p in range(4)}
    wait_until(lambda: recorder.seen() == everything, message="creation heard")
    for m in (b1, b2, b3):
        wait_until(lambda m=m: all(m.partition_state("t", p) for p in range(4)))

    # One partition's ISR changes: only that partition is reported, by every broker (the
    # leader that wrote it included).
    state = b2.partition_state("t", 1)
    assert state is not None
    leader = cluster.brokers[state.leader]
    recorders = {m.broker_id: Recorder() for m in (b1, b3)}
    for m in (b1, b3):
        m.add_listener(recorders[m.broker_id])
    recorder.reset()
    assert leader.update_isr("t", 1, state.leader_epoch, (state.leader,), state.zk_version)
    for r in (recorder, *recorders.values()):
        wait_until(lambda r=r: r.seen() == {("t", 1)}, message="ISR change heard")
    assert b2.partition_state("t", 1).isr == (state.leader,)  # type: ignore[union-attr]

    # A broker leaves: the partitions it holds are reported.
    recorder.reset()
    victim = next(b for b in (1, 3) if b != b2.broker_id)
    on_victim = {("t", p) for p in range(4) if victim in b2.replicas("t", p)}
    cluster.kill(victim)
    wait_until(lambda: on_victim <= recorder.seen(), message="broker loss heard")
    assert victim not in b2.brokers()


def test_update_isr_is_conditional(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, b2 = cluster.start(1, 2)
    b1.create_topic("t", 1, 2, {})
    state = wait_until(lambda: b1.partition_state("t", 0), message="state")
    leader = cluster.brokers[state.leader]
    follower = cluster.brokers[3 - state.leader]

    with pytest.raises(ValueError, match="must be in the ISR"):
        leader.update_isr("t", 0, state.leader_epoch, (follower.broker_id,), state.zk_version)
    # only the leader, at its epoch and the version it read, may write
    assert follower.update_isr("t", 0, state.leader_epoch, (2, 1), state.zk_version) is None
    assert (
        leader.update_isr("t", 0, state.leader_epoch + 1, (state.leader,), state.zk_version) is None
    )
    shrunk = leader.update_isr("t", 0, state.leader_epoch, (state.leader,), state.zk_version)
    assert shrunk == PartitionState(
        state.leader, state.leader_epoch, (state.leader,), state.controller_epoch, 1
    )
    assert leader.partition_state("t", 0) == shrunk  # its own view at once
    # a second write from the stale version fails; from the new one it succeeds
    assert leader.update_isr("t", 0, state.leader_epoch, state.isr, state.zk_version) is None
    grown = leader.update_isr("t", 0, state.leader_epoch, state.isr, shrunk.zk_version)
    assert grown is not None and grown.isr == state.isr and grown.zk_version == 2
    wait_until(lambda: follower.partition_state("t", 0) == grown, message="follower view")
    assert leader.update_isr("missing", 0, 0, (leader.broker_id,), 0) is None


def test_producer_ids_are_unique_across_brokers(cluster: SimCluster) -> None:
    brokers = cluster.start(1, 2, 3)
    ids: list[list[int]] = []

    def take(m: ClusterMetadata) -> None:
        mine = [m.next_producer_id() for _ in range(700)]
        ids.append(mine)

    threads = [threading.Thread(target=take, args=(m,)) for m in brokers for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    everything = [i for chunk in ids for i in chunk]
    assert len(everything) == 6 * 700 == len(set(everything))
    assert min(everything) == 0 and max(everything) < 6 * 1000  # blocks of 1000, few wasted


def test_reregisters_after_session_expiry(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, b2 = cluster.start(1, 2)
    recorder = Recorder()
    b2.add_listener(recorder)
    _, before = zk_client.get("/brokers/ids/2")
    cluster.expire(2)
    wait_until(lambda: None in recorder.calls, message="a re-read-everything call")
    _, after = zk_client.get("/brokers/ids/2")
    assert after.czxid != before.czxid and after.ephemeralOwner != before.ephemeralOwner
    cluster.wait_for_brokers({1, 2})
    assert set(b1.brokers()) == {1, 2}


def test_stop_deregisters(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, b2 = cluster.start(1, 2)
    b2.stop()
    del cluster.brokers[2]
    assert zk_client.exists("/brokers/ids/2") is None
    wait_until(lambda: set(b1.brokers()) == {1}, message="broker 2 gone from the view")


def test_duplicate_broker_id_is_refused(cluster: SimCluster, zk_connect: str) -> None:
    cluster.start(1)
    client = kazoo_client(zk_connect)
    try:
        twin = ClusterMetadata(
            client, 1, listener_host="127.0.0.1", listener_port=1, registration_timeout=0.3
        )
        with pytest.raises(BrokerRegistrationError, match="registered by another session"):
            twin.start()
        twin.stop()
    finally:
        client.stop()
        client.close()


def test_zookeeper_restart_is_ridden_out(zk_connect: str, zookeeper: ZooKeeperServer) -> None:
    # The scenario is a restart the sessions outlive (SUSPENDED → CONNECTED); an expiry is
    # test_reregisters_after_session_expiry's. With kazoo's default 10 s sessions, a loaded CI
    # machine restarting the JVM and backing off its reconnects expired them (the controller
    # moved), so these sessions get 40 s (the server's maxSessionTimeout is 60 s).
    cluster = SimCluster(zk_connect, session_timeout=40.0)
    try:
        _ride_out_a_restart(cluster, zookeeper)
    finally:
        cluster.close()


def _ride_out_a_restart(cluster: SimCluster, zookeeper: ZooKeeperServer) -> None:
    b1, b2 = cluster.start(1, 2)
    controller = cluster.controller()
    sessions = {b: c.client_id for b, c in cluster.clients.items()}
    b1.create_topic("before", 2, 2, {})
    wait_until(lambda: b2.partition_state("before", 1), message="states")
    zookeeper.restart()  # same data, sessions not expired: a SUSPENDED → CONNECTED blip
    # kazoo's reconnect backs off; on a loaded machine (CI) it can take well over 10 s.
    wait_until(
        lambda: all(c.connected for c in cluster.clients.values()), timeout=45, message="reconnect"
    )
    assert {b: c.client_id for b, c in cluster.clients.items()} == sessions, "a session expired"
    b2.create_topic("after", 2, 2, {})
    for m in (b1, b2):
        wait_until(lambda m=m: m.partition_state("after", 1), message="states after restart")
        assert set(m.brokers()) == {1, 2} and m.controller_id() == controller.broker_id
    assert controller.controller.is_active
