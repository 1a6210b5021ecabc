"""Share groups on the 3-broker cluster (ZooKeeper): the member heartbeats to the group's
coordinator (FindCoordinator's answer) and fetches each partition from its leader, in one share
session per broker, as a share consumer does; every record is delivered once.

Failover: two confluent-kafka ShareConsumers accept some records, release some and hold the
rest when the broker that leads the partition and is its share coordinator (the leader of the
``__share_group_state`` partition the share-partition's key hashes to) is killed with
SIGKILL; the new leader reads the state back from the replicated topic, and two new consumers
get every record but the accepted ones, each once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    Message,
    Producer,
    ShareConsumer,
    TopicPartition,
)

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.share_state_host import NUM_PARTITIONS
from sluice.broker.share.share_state_log import TOPIC as STATE_TOPIC
from sluice.broker.share.share_state_records import (
    ShareStateKey,
    decode_key,
    partition_for,
)
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


# -- share coordinator failover ------------------------------------------------------------------


def _share_consumer(cluster: BrokerCluster, group: str, topic: str, **config: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, **config})
    c.subscribe([topic])
    return c


def _topic_id(cluster: BrokerCluster, topic: str) -> uuid.UUID:
    with WireClient(cluster.brokers[cluster.running()[0]].port) as wire:
        return wire.topic_id(topic)


def _state_keys(cluster: BrokerCluster, partition: int) -> list[tuple[int, ShareStateKey]]:
    """(record type, key) of every record in a ``__share_group_state`` partition, read with a
    plain consumer (the records decode as Kafka's)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "sg-state-reader",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(STATE_TOPIC, partition), timeout=10
        )
        consumer.assign([TopicPartition(STATE_TOPIC, partition, 0)])
        found: list[tuple[int, ShareStateKey]] = []
        deadline = time.monotonic() + 20
        position = 0
        while position < high:
            assert time.monotonic() < deadline, f"expected {high} state records in 20 s"
            m = consumer.poll(0.5)
            if m is None or m.error() is not None:
                continue
            decoded = decode_key(m.key() or b"")
            assert decoded is not None, m.key()
            found.append(decoded)
            position = m.offset() + 1
        return found
    finally:
        consumer.close()


def _poll_while(consumers: list[ShareConsumer], waiting: Callable[[], bool], what: str) -> None:
    """Poll ``consumers`` (expecting nothing) while ``waiting()``, at most 60 s."""
    deadline = time.monotonic() + 60
    while waiting():
        assert time.monotonic() < deadline, f"expected {what} within 60 s"
        for c in consumers:
            assert not list(c.poll(0.3))


def _poll_until_quiet(consumers: list[ShareConsumer], quiet: float) -> list[Message]:
    got: list[Message] = []
    last = time.monotonic()
    deadline = last + 90
    while time.monotonic() - last < quiet:
        assert time.monotonic() < deadline, "expected the consumers to run dry within 90 s"
        for c in consumers:
            for m in c.poll(0.3):
                assert m.error() is None, m.error()
                got.append(m)
                last = time.monotonic()
    return got


@pytest.mark.slow
@pytest.mark.parametrize("coordinator", ["the leader", "another broker"])
def test_kill_9_of_the_leader_keeps_acknowledged_and_loses_nothing(
    cluster: BrokerCluster, coordinator: str
) -> None:
    """Two ShareConsumers accept a third of what they hold, release a third and keep the rest
    acquired; the partition's leader is killed — its share coordinator too, or with the share
    coordinator on another broker, so that the state was written there with a Produce; two
    new consumers get every record but the accepted ones — the released and the held ones
    again (delivery count 2), the others once — and none twice."""
    topic = "share-failover"
    cluster.create_topic(topic, 1)
    leader = cluster.wait_leader(topic, 0).leader
    topic_id = _topic_id(cluster, topic)
    # A first group creates __share_group_state (with its first share-partition).
    warm = _share_consumer(cluster, "sg-warm-up", topic)
    try:
        _poll_while([warm], lambda: STATE_TOPIC not in cluster.metadata().topics,
                    f"{STATE_TOPIC} to be created")  # fmt: skip
    finally:
        warm.close()
    leaders = {p: cluster.wait_leader(STATE_TOPIC, p).leader for p in range(NUM_PARTITIONS)}

    # A group whose share coordinator for the partition — the leader of the state partition
    # its key hashes to, what FindCoordinator key type 2 answers — is the partition's leader
    # (or is not).
    def coordinated_as_wanted(group: str) -> bool:
        at = leaders[partition_for(ShareStateKey(group, topic_id, 0), NUM_PARTITIONS)]
        return (at == leader) == (coordinator == "the leader")

    group = next((g for i in range(200) if coordinated_as_wanted(g := f"sg-failover-{i}")), None)
    assert group is not None, f"expected a group coordinated by {coordinator} among 200"
    key = ShareStateKey(group, topic_id, 0)
    state_partition = partition_for(key, NUM_PARTITIONS)
    explicit = {"share.acknowledgement.mode": "explicit", "max.poll.records": 10}
    first = [_share_consumer(cluster, group, topic, **explicit) for _ in range(2)]
    try:
        # The share-partition exists once its first snapshot is in the state topic (its start,
        # the log end then): produce after that.
        _poll_while(first, lambda: (0, key) not in _state_keys(cluster, state_partition),
                    "the share-partition's first snapshot")  # fmt: skip
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
        for i in range(60):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        held: dict[int, list[Message]] = {0: [], 1: []}
        deadline = time.monotonic() + 60
        while not all(held.values()):  # each consumer polls one batch, then keeps it
            assert time.monotonic() < deadline, "expected both consumers to get records in 60 s"
            for i, c in enumerate(first):
                if not held[i]:
                    held[i] = list(c.poll(0.5))
        accepted, released = set(), set()
        for i, c in enumerate(first):
            for m in held[i]:
                if m.offset() % 3 == 0:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add((m.partition(), m.offset()))
                elif m.offset() % 3 == 1:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                    released.add((m.partition(), m.offset()))
            c.commit_sync()  # answered once the state is committed on the in-sync replicas
        assert accepted and released
        cluster.kill(leader)  # SIGKILL: the partition's leader (and maybe share coordinator)
        cluster.wait_leader(topic, 0, not_in={leader})
    finally:
        for c in first:
            c.close()
    after = [_share_consumer(cluster, group, topic) for _ in range(2)]
    try:
        again = _poll_until_quiet(after, quiet=6.0)
    finally:
        for c in after:
            c.close()
    keys = [(m.partition(), m.offset()) for m in again]
    assert len(keys) == len(set(keys)), "a record was delivered twice after the failover"
    assert not set(keys) & accepted, "an accepted record was delivered again"
    assert set(keys) == {(0, i) for i in range(60)} - accepted, "an unacknowledged record was lost"
    counts = {(m.partition(), m.offset()): m.delivery_count() for m in again}
    kept = {(m.partition(), m.offset()) for ms in held.values() for m in ms} - accepted
    assert {counts[k] for k in kept} == {2}, "a held or released record's delivery count"
