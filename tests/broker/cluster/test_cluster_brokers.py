"""Three real broker processes, one real ZooKeeper: replication and failover end to end.

Faults are injected the hard way — ``kill -9`` of a broker (the partition leader, the
controller), a ZooKeeper restart — while real clients (confluent-kafka) produce with
``acks=all`` and idempotence; the checks are what a user would check: every acknowledged
message is read back exactly once and in order, and Metadata shows leaders and ISRs as the
ISR design says they should be (design.md, decisions 5 and 6).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.cluster import wait_for_metadata as wait_for
from sluice.testing.zookeeper import ZooKeeperServer
from tests.broker.server.clients import ContinuousProducer, read_partition, unique

pytestmark = pytest.mark.broker


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


# -- 1. leaders killed under an acks=all idempotent producer --------------------------------


@pytest.mark.slow
def test_leader_kill_rounds_lose_nothing_and_old_leader_rejoins(cluster: BrokerCluster) -> None:
    topic = unique("failover")
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = ContinuousProducer(
        cluster.bootstrap, topic, interval=0.002, acks="all", **QUIET
    ).start()
    try:
        producer.wait_acked(100)
        for _round in range(3):
            leader = cluster.wait_leader(topic, 0).leader
            cluster.kill(leader)
            moved = cluster.wait_leader(topic, 0, not_in={leader})
            assert leader not in moved.isrs
            before = len(producer.acked)
            producer.wait_acked(before + 100)  # the new leader takes writes
            cluster.restart(leader)
            # The old leader truncates what was never committed, catches up and rejoins.
            cluster.wait_isr(topic, 0, {0, 1, 2})
        producer.wait_acked(len(producer.acked) + 100)
    finally:
        producer.stop()
    producer.assert_exactly_once(read_partition(cluster.bootstrap, topic, 0))


def produce_values(
    bootstrap: str, topic: str, values: list[bytes], **config: object
) -> list[KafkaError | None]:
    """Produce ``values`` to partition 0, one at a time in order; each delivery's error (None
    if acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET, **config})
    results: list[KafkaError | None] = []
    try:
        for value in values:
            producer.produce(
                topic, value, partition=0, on_delivery=lambda err, _m: results.append(err)
            )
            assert producer.flush(30) == 0, "a delivery report never came"
    finally:
        producer.close()
    return results


# -- 0. the happy path: a replicated topic, a consumer group --------------------------------


def test_replicated_topic_round_trip_through_a_group(cluster: BrokerCluster) -> None:
    topic = unique("replicated")
    cluster.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    md = cluster.metadata(topic=topic).topics[topic]
    assert {p.leader for p in md.partitions.values()} <= {0, 1, 2}
    for p in md.partitions.values():
        assert sorted(p.replicas) == [0, 1, 2] and sorted(p.isrs) == [0, 1, 2]
    values = [b"m%d" % i for i in range(300)]
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, **QUIET}
    )  # fmt: skip
    errors: list[KafkaError] = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors[:3]
    producer.close()
    group = unique("group")
    c = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group,
         "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET}
    )  # fmt: skip
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        ends: dict[int, int] = {}  # partition → next offset, for the partitions read from
        deadline = time.monotonic() + 40
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
                ends[m.partition()] = m.offset() + 1
        assert sorted(got) == sorted(values)
        assert sum(ends.values()) == len(values)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == ends
    finally:
        c.close()


# -- 2. the controller killed ---------------------------------------------------------------


@pytest.mark.slow
def test_controller_kill_elects_a_new_one_that_creates_topics_and_moves_leaders(
    cluster: BrokerCluster,
) -> None:
    before = unique("before")
    cluster.create_topic(before, 1, 3)
    old = cluster.controller_id()
    cluster.kill(old)
    live = set(cluster.running())

    def new_controller() -> tuple[int] | None:
        named = {md.controller_id for _, md in cluster.views()}
        return (named.pop(),) if len(named) == 1 and named <= live else None

    (new,) = wait_for(new_controller, 30, f"one controller among {sorted(live)}")
    assert new != old
    cluster.wait_registered(live)
    # The new controller creates the partition states of a new topic...
    after = unique("after")
    cluster.create_topic(after, 2, 2)
    # ...and moves leaders off dead brokers.
    leader = cluster.wait_leader(before, 0).leader
    assert leader in live
    cluster.kill(leader)
    (survivor,) = live - {leader}
    moved = cluster.wait_leader(before, 0, not_in={leader})
    assert moved.leader == survivor and list(moved.isrs) == [survivor]
    for p in range(2):
        cluster.wait_leader(after, p, not_in={leader})
    assert produce_values(cluster.bootstrap, before, [b"still-here"], acks="all") == [None]
    assert read_partition(cluster.bootstrap, before, 0) == [b"still-here"]


# -- 3. ZooKeeper restarted under load -------------------------------------------------------


@pytest.mark.slow
def test_zookeeper_restart_under_load_loses_nothing(tmp_path: Path) -> None:
    zk = ZooKeeperServer(tmp_path / "zookeeper").start()
    try:
        with BrokerCluster(tmp_path, zk.connect_string + "/sluice") as cluster:
            topic = unique("zk-restart")
            cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
            producer = ContinuousProducer(
                cluster.bootstrap, topic, interval=0.005, acks="all", **QUIET
            ).start()
            try:
                producer.wait_acked(100)
                zk.restart()  # SIGTERM: sessions survive in its snapshot
                cluster.wait_registered({0, 1, 2})
                producer.wait_acked(len(producer.acked) + 100)
                zk.restart(kill=True)  # a crash
                cluster.wait_registered({0, 1, 2})
                producer.wait_acked(len(producer.acked) + 100)
                # The cluster still acts on ZooKeeper: a new topic gets leaders.
                cluster.create_topic(unique("after-restart"), 1, 3)
            finally:
                producer.stop()
            cluster.wait_isr(topic, 0, {0, 1, 2})
            producer.assert_exactly_once(read_partition(cluster.bootstrap, topic, 0))
    finally:
        zk.stop()


# -- 4. min.insync.replicas -----------------------------------------------------------------


@pytest.mark.slow
def test_acks_all_needs_min_insync_replicas(cluster: BrokerCluster) -> None:
    topic = unique("min-isr")
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    strict = {"acks": "all", "retries": 0, "message.timeout.ms": 5000}
    assert produce_values(cluster.bootstrap, topic, [b"a"], **strict) == [None]
    leader = cluster.wait_leader(topic, 0).leader
    followers = sorted({0, 1, 2} - {leader})
    for f in followers:
        cluster.kill(f)
    cluster.wait_isr(topic, 0, {leader})
    (error,) = produce_values(cluster.bootstrap, topic, [b"refused"], **strict)
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
    # acks=1 does not ask for the ISR.
    assert produce_values(cluster.bootstrap, topic, [b"b"], acks=1) == [None]
    cluster.restart(followers[0])
    cluster.wait_isr(topic, 0, {leader, followers[0]})
    assert produce_values(cluster.bootstrap, topic, [b"c"], **strict) == [None]
    assert read_partition(cluster.bootstrap, topic, 0) == [b"a", b"b", b"c"]


# -- 5. the ISR article's scenario: an old leader's uncommitted m3 ---------------------------


@pytest.mark.slow
def test_old_leader_truncates_its_uncommitted_message_and_rejoins(
    tmp_path: Path, zk_connect: str
) -> None:
    # Longer timeouts than the other tests: A must be killed before anyone notices that B and
    # C are gone (else A's ISR shrinks to [A] and m3 becomes committed).
    slow_to_notice = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000"}
    with BrokerCluster(tmp_path, zk_connect, overrides=slow_to_notice) as cluster:
        topic = unique("isr-article")
        cluster.create_topic(topic, 1, 3)
        p = cluster.wait_leader(topic, 0)
        a = p.leader
        b, c = (r for r in p.replicas if r != a)
        # m1, m2: committed on all three.
        assert produce_values(cluster.bootstrap, topic, [b"m1", b"m2"], acks="all") == [None] * 2
        cluster.wait_partition(topic, 0, lambda pm: len(pm.isrs) == 3, 10, "full ISR")
        # m3: appended by A alone, then A dies too.
        cluster.kill(b)
        cluster.kill(c)
        leader_only = cluster.brokers[a].bootstrap
        assert produce_values(leader_only, topic, [b"m3"], acks=1) == [None]
        cluster.kill(a)
        # B and C come back; one of them leads (both were in the ISR), A is out of it.
        cluster.restart(b)
        cluster.restart(c)
        cluster.wait_leader(topic, 0, not_in={a}, timeout=40)
        cluster.wait_isr(topic, 0, {b, c})
        assert produce_values(cluster.bootstrap, topic, [b"m4"], acks="all") == [None]
        # A comes back as a follower: it deletes m3, catches up and rejoins the ISR.
        cluster.restart(a)
        cluster.wait_isr(topic, 0, {a, b, c})
        assert "truncating from 3 to 2" in cluster.brokers[a].output()
        # Read A's own log: make it the only replica left (clean shutdowns move leadership
        # at once) and read the partition from it.
        cluster.brokers[b].stop()
        cluster.brokers[c].stop()
        assert cluster.wait_leader(topic, 0).leader == a
        assert read_partition(leader_only, topic, 0) == [b"m1", b"m2", b"m4"]


# -- 6. the group coordinator killed -----------------------------------------------------------


@pytest.mark.slow
def test_coordinator_killed_group_carries_on_with_committed_offsets(
    cluster: BrokerCluster,
) -> None:
    """Committed offsets live in the replicated ``__consumer_offsets``; the broker that
    becomes leader of the group's partition loads them, so after the coordinator dies the
    group resumes exactly where it committed: nothing re-read, nothing skipped."""
    topic, group = unique("coord"), unique("group")
    cluster.create_topic(topic, 3, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, **QUIET})  # fmt: skip
    first = [b"before-%d" % i for i in range(150)]
    for v in first:
        producer.produce(topic, v)
    assert producer.flush(30) == 0

    def consume(count: int, timeout: float = 60.0) -> list[bytes]:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, **QUIET})  # fmt: skip
        got: list[bytes] = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.value())
            # A little longer: anything re-read from before the commit would show up here.
            settle = time.monotonic() + 2
            while time.monotonic() < settle:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.value())
            c.commit(asynchronous=False)
        finally:
            c.close()
        return got

    assert sorted(consume(len(first))) == sorted(first)
    admin = cluster.admin()
    coordinator = admin.describe_consumer_groups([group])[group].result(timeout=15).coordinator.id
    cluster.kill(coordinator)
    survivors = [b for b in cluster.running() if b != coordinator]
    cluster.wait_registered(set(survivors))
    second = [b"after-%d" % i for i in range(90)]
    for v in second:
        producer.produce(topic, v)
    assert producer.flush(60) == 0
    producer.close()
    assert sorted(consume(len(second))) == sorted(second)
    fresh = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    now = fresh.describe_consumer_groups([group])[group].result(timeout=30)
    assert now.coordinator.id != coordinator
