"""Tests for sluice.pipeline.consumer.connector: the paper's ZooKeeper-coordinated consumer group
(Alg. 1), with its rebalancer, fetcher and streams at work.

Everything runs against a real ZooKeeper (the ``zk_connect`` chroot fixtures) and a real
Sluice broker subprocess (one per module, a topic per test). Consumers run as threads of this
process, except where a process must die (SIGKILL) or restart: those run
``tests.pipeline.zk_broker_fixture`` as a child.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from functools import partial
from itertools import islice
from typing import Any

import pytest
from kazoo.client import KazooClient

from sluice.broker.cluster.zk_data import TopicZNode
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.connector import (
    ConsumerTimeoutError,
    ZookeeperConsumerConnector,
    create_java_consumer_connector,
)
from sluice.pipeline.consumer.registry import OffsetZNode, OwnerZNode, thread_id
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import ZooKeeperServer
from tests.pipeline.zk_broker_fixture import Broker, Collector, counts, start_child

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    process = Broker(tmp_path_factory.mktemp("zk-consumer-broker")).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def topic(broker: Broker) -> str:
    name = f"zkc-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, PARTITIONS)
    return name


def settings(zk_connect: str, broker: Broker, group: str, **extra: str) -> dict[str, str]:
    """Consumer properties for tests: short backoffs and sessions, frequent commits."""
    return {
        "zookeeper.connect": zk_connect,
        "group.id": group,
        "bootstrap.servers": broker.bootstrap,
        "auto.offset.reset": "smallest",
        "rebalance.backoff.ms": "100",
        "rebalance.max.retries": "10",
        "zookeeper.session.timeout.ms": "2000",
        "auto.commit.interval.ms": "200",
        "topic.metadata.refresh.interval.ms": "1000",
        **extra,
    }


def join(config: dict[str, str], topic: str, streams: int = 1) -> Collector:
    connector = ZookeeperConsumerConnector(config)
    try:
        return Collector(connector, connector.create_message_streams({topic: streams})[topic])
    except BaseException:
        connector.shutdown()
        raise


def zk_owners(zk: KazooClient, group: str, topic: str) -> dict[int, str]:
    path = f"/consumers/{group}/owners/{topic}"
    if not zk.exists(path):
        return {}
    owners = {}
    for child in zk.get_children(path):
        tp = TopicPartition(topic, int(child))
        owners[tp.partition] = OwnerZNode.decode(group, tp, zk.get(f"{path}/{child}")[0])
    return owners


def zk_offsets(zk: KazooClient, group: str, topic: str) -> dict[int, int]:
    path = f"/consumers/{group}/offsets/{topic}"
    if not zk.exists(path):
        return {}
    return {
        int(c): OffsetZNode.decode(group, TopicPartition(topic, int(c)), zk.get(f"{path}/{c}")[0])
        for c in zk.get_children(path)
    }


def ownership_settled(zk: KazooClient, group: str, topic: str, collectors: list[Collector]) -> bool:
    """Every partition owned by exactly one live consumer, and the znodes say the same."""
    expected: dict[int, str] = {}
    for c in collectors:
        for tp, stream in c.connector.owned_partitions().items():
            if tp.partition in expected:
                return False  # two consumers think they own it: not settled (never observed)
            expected[tp.partition] = thread_id(c.connector.consumer_id, stream)
    return set(expected) == set(range(PARTITIONS)) and zk_owners(zk, group, topic) == expected


def values(n: int, prefix: str = "m") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# --------------------------------------------------------------------------------------------
# A group with no failures
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
def test_group_consumes_every_message_exactly_once(
    strategy: str, zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = f"g-{strategy}"
    config = settings(zk_connect, broker, group, **{"partition.assignment.strategy": strategy})
    broker.produce(topic, values(60, "before"), PARTITIONS)
    collectors: list[Collector] = []
    try:
        # Three consumers started together; the first reads with two streams.
        starters = [
            threading.Thread(
                target=lambda i=i: collectors.append(
                    join({**config, "consumer.id": f"c{i}"}, topic, streams=2 if i == 0 else 1)
                )
            )
            for i in range(3)
        ]
        for thread in starters:
            thread.start()
        for thread in starters:
            thread.join(30)
        assert len(collectors) == 3
        collectors.sort(key=lambda c: c.connector.consumer_id)
        broker.produce(topic, values(60, "after"), PARTITIONS)
        wait_until(lambda: len(counts(collectors)) == 120, 30, "all 120 messages")
        wait_until(
            lambda: ownership_settled(zk_client, group, topic, collectors), 10, "settled owners"
        )
        # c0's partitions are spread over its two streams (members c0-0 and c0-1).
        assert set(collectors[0].connector.owned_partitions().values()) == {0, 1}
    finally:
        for collector in collectors:
            collector.stop()
    delivered = counts(collectors)
    assert sorted(delivered) == [(p, o) for p in range(PARTITIONS) for o in range(20)]
    assert set(delivered.values()) == {1}, "a message was delivered twice"
    assert all(r[3].startswith(("before", "after")) for c in collectors for r in c.records)
    # Shutdown committed everything and left no ephemeral znodes behind.
    assert zk_offsets(zk_client, group, topic) == dict.fromkeys(range(PARTITIONS), 20)
    assert zk_owners(zk_client, group, topic) == {}
    assert zk_client.get_children(f"/consumers/{group}/ids") == []


def test_late_joiners_take_partitions_without_loss_or_duplicates(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = "g-join"
    config = settings(zk_connect, broker, group)
    total = 900

    def produce_slowly() -> None:
        for batch in range(total // 90):
            broker.produce(topic, values(90, f"b{batch}-"), PARTITIONS)
            time.sleep(0.05)

    producing = threading.Thread(target=produce_slowly)
    first = join({**config, "consumer.id": "a"}, topic)
    collectors = [first]
    try:
        producing.start()
        wait_until(lambda: first.count() >= 100, 20, "the first consumer to get going")
        assert len(first.connector.owned_partitions()) == PARTITIONS
        collectors.append(join({**config, "consumer.id": "b"}, topic))
        wait_until(lambda: collectors[1].count() >= 50, 20, "the second consumer to get going")
        collectors.append(join({**config, "consumer.id": "c"}, topic))
        producing.join(60)
        wait_until(lambda: len(counts(collectors)) == total, 30, f"all {total} messages")
        wait_until(
            lambda: ownership_settled(zk_client, group, topic, collectors), 10, "settled owners"
        )
        moved = {tp.partition for c in collectors[1:] for tp in c.connector.owned_partitions()}
        assert len(moved) == 4, "range gives b and c two partitions each"
        assert first.connector.stats.rebalances >= 3
    finally:
        for collector in collectors:
            collector.stop()
    delivered = counts(collectors)
    assert sorted(delivered) == [(p, o) for p in range(PARTITIONS) for o in range(150)]
    duplicates = sum(n - 1 for n in delivered.values())
    # Every release commits the consumed offsets first, so no offset was left uncommitted
    # when its partition moved: not a single duplicate.
    assert duplicates == 0


# --------------------------------------------------------------------------------------------
# Failures and races
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_dead_consumer_is_replaced_from_its_last_committed_offsets(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = "g-kill"
    config = settings(zk_connect, broker, group)
    survivor = join({**config, "consumer.id": "a-survivor"}, topic)
    child = None
    try:
        # The child commits by hand after printing, every 10 messages, and reads slowly, so
        # it dies with consumed-but-uncommitted messages.
        child_config = {**config, "consumer.id": "b-victim", "auto.commit.enable": "false"}
        child = start_child(child_config, topic, "--commit-every", "10", "--delay-ms", "15")
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr and child.stderr.read()
        wait_until(
            lambda: len(survivor.connector.owned_partitions()) == PARTITIONS // 2, 20, "a split"
        )
        victim = {p for p, owner in zk_owners(zk_client, group, topic).items() if "victim" in owner}
        assert len(victim) == PARTITIONS // 2
        broker.produce(topic, values(600), PARTITIONS)
        printed: list[tuple[int, int]] = []
        while len(printed) < 45:
            line = child.stdout.readline()
            assert line, "the child exited early"
            printed.append((int(line.split()[0]), int(line.split()[1])))
        child.send_signal(signal.SIGKILL)
        committed_at_death = zk_offsets(zk_client, group, topic)
        rest, _ = child.communicate(timeout=10)
        printed += [(int(a), int(b)) for a, b in (line.split() for line in rest.splitlines())]
        # The session expires (2 s), the ephemerals vanish, the survivor takes everything.
        wait_until(lambda: len(counts([survivor]) | Counter(printed)) == 600, 30, "600 messages")
        assert len(survivor.connector.owned_partitions()) == PARTITIONS
        assert zk_client.get_children(f"/consumers/{group}/ids") == ["a-survivor"]
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.communicate()
        survivor.stop()
    taken_over = [(p, o) for _, p, o, _ in survivor.records if p in victim]
    for p in victim:  # the survivor started each partition exactly at the committed offset
        assert min(o for q, o in taken_over if q == p) == committed_at_death[p]
    duplicates = sorted(set(printed) & set(taken_over))
    assert all(o >= committed_at_death[p] for p, o in duplicates)
    assert duplicates, "the child was killed between commits: some messages came twice"
    both = counts([survivor]) + Counter(printed)
    assert sorted(both) == [(p, o) for p in range(PARTITIONS) for o in range(100)]


@pytest.mark.slow
def test_expired_session_re_registers_and_rebalances(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = "g-expire"
    config = settings(zk_connect, broker, group)
    collectors = [join({**config, "consumer.id": name}, topic) for name in ("a", "b")]
    a = collectors[0].connector
    try:
        broker.produce(topic, values(120, "one"), PARTITIONS)
        wait_until(lambda: len(counts(collectors)) == 120, 20, "the first 120 messages")
        # ZooKeeper's own trick: a second client on the same session closes it.
        old_session = a._zk.client_id
        thief = KazooClient(hosts=zk_connect, client_id=old_session)
        thief.start(10)
        thief.stop()
        thief.close()
        wait_until(lambda: a._zk.client_id not in (None, old_session), 20, "a new session")
        broker.produce(topic, values(120, "two"), PARTITIONS)
        # It registers again under its new session and takes back its half.
        ids = f"/consumers/{group}/ids"
        wait_until(lambda: sorted(zk_client.get_children(ids)) == ["a", "b"], 20, "a is back")
        wait_until(lambda: len(a.owned_partitions()) == PARTITIONS // 2, 20, "a's share")
        wait_until(
            lambda: ownership_settled(zk_client, group, topic, collectors), 20, "settled owners"
        )
        wait_until(lambda: len(counts(collectors)) == 240, 20, "all 240 messages")
        assert a.stats.sessions_lost == 1 and collectors[1].connector.stats.sessions_lost == 0
    finally:
        for collector in collectors:
            collector.stop()
    assert sorted(counts(collectors)) == [(p, o) for p in range(PARTITIONS) for o in range(40)]


@pytest.mark.slow
def test_watches_are_re_armed_after_a_zookeeper_restart(
    zookeeper: ZooKeeperServer, zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = "g-zk-restart"
    # Sessions long enough to outlive the restart: the znodes stay, kazoo's watches do not.
    config = settings(zk_connect, broker, group, **{"zookeeper.session.timeout.ms": "15000"})
    collectors = [join({**config, "consumer.id": name}, topic) for name in ("a", "b")]
    try:
        sessions = [c.connector._zk.client_id for c in collectors]
        zookeeper.restart(kill=True)
        wait_until(lambda: all(c.connector._zk.connected for c in collectors), 40, "reconnections")
        # Usually both sessions survive. Rarely kazoo's reconnect stalls until the session
        # expires (then that consumer re-registers, as tested above); one survivor suffices.
        survived = [
            c.connector._zk.client_id == s for c, s in zip(collectors, sessions, strict=True)
        ]
        assert any(survived)
        # A newcomer must be noticed through watches that were re-armed after the restart.
        collectors.append(join({**config, "consumer.id": "c"}, topic))
        wait_until(
            lambda: ownership_settled(zk_client, group, topic, collectors), 20, "settled owners"
        )
        assert all(len(c.connector.owned_partitions()) == 2 for c in collectors)
        broker.produce(topic, values(60), PARTITIONS)
        wait_until(lambda: len(counts(collectors)) == 60, 20, "all 60 messages")
    finally:
        for collector in collectors:
            collector.stop()
    assert set(counts(collectors).values()) == {1}


def release_slowly(connector: ZookeeperConsumerConnector, delay: float) -> None:
    """Make a joined consumer slow to give up its partitions: the paper's late notification."""
    rebalancer = connector._rebalancer
    assert rebalancer is not None
    release = rebalancer.release

    def slow_release(why: str) -> None:
        if why == "rebalance" and connector.owned_partitions():
            time.sleep(delay)
        release(why)

    rebalancer.release = slow_release  # type: ignore[method-assign]


def test_ownership_conflicts_back_off_and_converge(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    group = "g-race"
    config = settings(zk_connect, broker, group)
    broker.produce(topic, values(300), PARTITIONS)
    slow_connector = ZookeeperConsumerConnector({**config, "consumer.id": "a-slow"})
    slow = Collector(slow_connector, slow_connector.create_message_streams(topic, 1))
    collectors = [slow]
    try:
        release_slowly(slow_connector, 1.5)
        assert len(slow.connector.owned_partitions()) == PARTITIONS
        # Three more start at once; their shares are still owned by the slow consumer.
        starters = [
            threading.Thread(
                target=lambda i=i: collectors.append(
                    join({**config, "consumer.id": f"n{i}"}, topic)
                )
            )
            for i in range(3)
        ]
        for thread in starters:
            thread.start()
        for thread in starters:
            thread.join(60)
        assert len(collectors) == 4
        wait_until(
            lambda: ownership_settled(zk_client, group, topic, collectors), 20, "settled owners"
        )
        wait_until(lambda: len(counts(collectors)) == 300, 20, "all 300 messages")
        conflicts = sum(c.connector.stats.ownership_conflicts for c in collectors)
        assert conflicts >= 1, "the race was not exercised"
        assert all(c.connector.stats.failed_rounds == 0 for c in collectors)
        assert all(len(c.connector.owned_partitions()) >= 1 for c in collectors)
    finally:
        for collector in collectors:
            collector.stop()
    assert set(counts(collectors).values()) == {1}


# --------------------------------------------------------------------------------------------
# Offsets: a new group's start, restarts, several groups
# --------------------------------------------------------------------------------------------


def take(stream: Any, n: int) -> list[tuple[int, int, str]]:
    return [(m.partition, m.offset, m.value.decode()) for m in islice(stream, n)]


@pytest.mark.slow
def test_new_group_start_and_resume_after_restart(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    broker.produce(topic, values(60, "old"), PARTITIONS)
    largest = settings(zk_connect, broker, "g-largest", **{"auto.offset.reset": "largest"})
    with create_java_consumer_connector({**largest, "consumer.timeout.ms": "300"}) as connector:
        [stream] = connector.create_message_streams(topic, 1)
        with pytest.raises(ConsumerTimeoutError):
            next(stream)  # the group starts at the end: nothing old
        assert zk_offsets(zk_client, "g-largest", topic) == dict.fromkeys(range(PARTITIONS), 10)
        broker.produce(topic, values(12, "new"), PARTITIONS)
        assert sorted(v for _, _, v in take(stream, 12)) == sorted(values(12, "new"))
        with pytest.raises(ConsumerTimeoutError):
            next(stream)
    assert list(stream) == []  # shut down: the stream has ended

    # A smallest-group consumer reads 30 of the 72 messages and stops; a new process resumes.
    smallest = settings(zk_connect, broker, "g-smallest", **{"consumer.id": "first"})
    with ZookeeperConsumerConnector(smallest) as connector:
        [stream] = connector.create_message_streams(topic, 1)
        first = take(stream, 30)
    committed = zk_offsets(zk_client, "g-smallest", topic)
    assert sum(committed.values()) == 30
    assert all(o < committed[p] for p, o, _ in first)
    child = start_child({**smallest, "consumer.id": "second"}, topic, "--stop-after", "42")
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    second = [(int(a), int(b)) for a, b in (line.split() for line in out.splitlines()[1:])]
    assert sorted(second + [(p, o) for p, o, _ in first]) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(12)
    )
    assert zk_offsets(zk_client, "g-smallest", topic) == dict.fromkeys(range(PARTITIONS), 12)


def test_two_groups_each_receive_the_whole_stream(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    broker.produce(topic, values(120), PARTITIONS)
    x = [join(settings(zk_connect, broker, "x", **{"consumer.id": f"x{i}"}), topic) for i in (0, 1)]
    y = [join(settings(zk_connect, broker, "y"), topic, streams=3)]
    try:
        wait_until(lambda: len(counts(x)) == 120 and len(counts(y)) == 120, 30, "both groups")

        # The periodic commit (auto.commit.interval.ms=200) writes both groups' offsets.
        def all_committed(group: str) -> bool:
            return sum(zk_offsets(zk_client, group, topic).values()) == 120

        for group in ("x", "y"):
            wait_until(partial(all_committed, group), 5, f"group {group}'s offsets")
    finally:
        for collector in x + y:
            collector.stop()
    assert set(counts(x).values()) == {1} and set(counts(y).values()) == {1}


# --------------------------------------------------------------------------------------------
# The broker and topic registries (cluster mode's layout) trigger rebalances too
# --------------------------------------------------------------------------------------------


def test_topic_registry_changes_trigger_a_rebalance(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    config = settings(zk_connect, broker, "g-topics", **{"partition.assignment.strategy": "sticky"})
    collector = join(config, topic)
    connector = collector.connector
    try:
        assert len(connector.owned_partitions()) == PARTITIONS  # from the broker's Metadata
        # /brokers/topics/<topic> appears (cluster mode): it now decides the partition count.
        # First as Kafka 0.8 wrote it (version 1), then as Sluice's cluster mode and Kafka 2.x
        # write it (version 2): the consumer reads both.
        path = TopicZNode.path(topic)
        kafka_08 = {"version": 1, "partitions": {str(p): [1] for p in range(4)}}
        zk_client.create(path, json.dumps(kafka_08).encode(), makepath=True)
        wait_until(lambda: len(connector.owned_partitions()) == 4, 10, "4 partitions")
        zk_client.set(path, TopicZNode.encode({p: [1] for p in range(PARTITIONS)}))
        wait_until(lambda: len(connector.owned_partitions()) == PARTITIONS, 10, "6 partitions")
        before = connector.stats.rebalances
        zk_client.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
        wait_until(lambda: connector.stats.rebalances > before, 10, "a broker-change rebalance")
    finally:
        collector.stop()


def test_shutdown_is_idempotent_and_streams_end(
    zk_connect: str, zk_client: KazooClient, broker: Broker, topic: str
) -> None:
    connector = ZookeeperConsumerConnector(settings(zk_connect, broker, "g-close"))
    streams = connector.create_message_streams({topic: 2})
    with pytest.raises(RuntimeError, match="once"):
        connector.create_message_streams({topic: 1})
    assert zk_client.get_children("/consumers/g-close/ids") == [connector.consumer_id]
    connector.shutdown()
    connector.shutdown()
    assert [list(s) for s in streams[topic]] == [[], []]
    assert zk_client.get_children("/consumers/g-close/ids") == []
    assert zk_owners(zk_client, "g-close", topic) == {}
