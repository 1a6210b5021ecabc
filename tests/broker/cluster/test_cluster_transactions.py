"""Transactions on three real brokers (confluent-kafka's transactional producer): markers sent
to partitions led by other brokers (WriteTxnMarkers), ``send_offsets_to_transaction`` with the
group coordinator and the transaction coordinator on different brokers, and the coordinator
killed (-9) mid-commit — the transaction then completes or aborts as a whole on the new
coordinator, and ``read_committed`` readers are never left stuck."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from sluice.broker.groups.offset_store import partition_for as group_partition
from sluice.broker.transactions.transaction_log import TOPIC as TXN_TOPIC
from sluice.broker.transactions.transaction_log import partition_for as txn_partition
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.server import clients
from tests.broker.server.clients import unique

pytestmark = pytest.mark.broker

PARTITIONS = 3
STATE_PARTITIONS = 50  # transaction.state.log.num.partitions's default
OFFSETS_PARTITIONS = 3  # the cluster's offsets.topic.num.partitions
# What a coordinator answers while it is being elected or is loading.
COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def txn_producer(bootstrap: str, txn_id: str, **config: Any) -> Producer:
    return clients.txn_producer(bootstrap, txn_id, init_timeout=60, **QUIET, **config)


def spread_topic(cluster: BrokerCluster) -> str:
    """A topic of three partitions whose leaders are three different brokers."""
    topic = unique("txn")
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    leaders = {cluster.wait_leader(topic, p).leader for p in range(PARTITIONS)}
    assert leaders == {0, 1, 2}, f"expected the partitions led by 3 brokers, found {leaders}"
    return topic


def produce_all(producer: Producer, topic: str, tag: str) -> list[bytes]:
    values = [f"{tag}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(3)]
    for v in values:
        producer.produce(topic, value=v, partition=int(v.split(b"-")[1]))
    producer.flush(30)
    return values


def read_all(
    bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 45.0
) -> list[bytes]:
    """Values of every partition (see ``clients.read_values``)."""
    return clients.read_values(
        bootstrap, topic, range(PARTITIONS), isolation, expected, timeout=timeout, **QUIET
    )


def committed(bootstrap: str, group: str, topic: str, *, stable: bool = True) -> int:
    """The committed offset, asked as librdkafka's default (read_committed: OffsetFetch's
    require_stable, retried while a transaction holds the offset) or, ``stable=False``, as a
    read_uncommitted consumer asks (a pending offset is not there yet)."""
    isolation = "read_committed" if stable else "read_uncommitted"
    return clients.committed_offset(
        bootstrap, group, topic, timeout=20, **QUIET, **{"isolation.level": isolation}
    )


def create_offsets_topic(bootstrap: str, topic: str) -> None:
    """Create ``__consumer_offsets`` by asking for a group's committed offset, until one is
    answered: while the new partitions' leaders are still being elected, the broker a client
    was sent to may answer NOT_COORDINATOR (as Kafka's would), and librdkafka hands that to
    ``committed()``'s caller instead of asking again."""

    def answered() -> bool:
        try:
            committed(bootstrap, unique("warmup"), topic)
        except KafkaException as exc:
            if exc.args[0].code() in COORDINATOR_MOVING:
                return False
            raise
        return True

    wait_until(answered, timeout=60, message="a committed offset answered by the coordinator")


def coordinator_of(cluster: BrokerCluster, txn_id: str) -> int:
    return int(cluster.wait_leader(TXN_TOPIC, txn_partition(txn_id, STATE_PARTITIONS)).leader)


def test_commit_and_abort_reach_every_leader(cluster: BrokerCluster) -> None:
    topic = spread_topic(cluster)
    producer = txn_producer(cluster.bootstrap, unique("tx"))
    expected: list[bytes] = []
    everything: list[bytes] = []
    for tag, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        values = produce_all(producer, topic, tag)
        everything += values
        if commit:
            producer.commit_transaction(60)
            expected += values
        else:
            producer.abort_transaction(60)
    assert sorted(read_all(cluster.bootstrap, topic, "read_committed", len(expected))) == sorted(
        expected
    )
    uncommitted = read_all(cluster.bootstrap, topic, "read_uncommitted", len(everything))
    assert sorted(uncommitted) == sorted(everything)


def test_offsets_sent_to_a_transaction_in_a_cluster(cluster: BrokerCluster) -> None:
    topic = spread_topic(cluster)
    source = unique("src")
    cluster.create_topic(source, 1, 3)
    txn_id = unique("tx")
    create_offsets_topic(cluster.bootstrap, source)
    producer = txn_producer(cluster.bootstrap, txn_id)  # creates __transaction_state
    txn_coordinator = coordinator_of(cluster, txn_id)
    # A group whose coordinator is another broker than the transaction's.
    for _ in range(100):
        group = unique("group")
        offsets_partition = group_partition(group, OFFSETS_PARTITIONS)
        if cluster.wait_leader("__consumer_offsets", offsets_partition).leader != txn_coordinator:
            break
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, **QUIET})
    metadata = consumer.consumer_group_metadata()
    try:
        kept: list[bytes] = []
        for offset, commit in ((7, False), (11, True), (13, False)):
            producer.begin_transaction()
            values = produce_all(producer, topic, f"o{offset}")
            producer.send_offsets_to_transaction([TopicPartition(source, 0, offset)], metadata, 60)
            if offset == 11:
                # pending: invisible where stability is not required (read_uncommitted)
                assert committed(cluster.bootstrap, group, source, stable=False) < 0
            if commit:
                producer.commit_transaction(60)
                kept += values
            else:
                producer.abort_transaction(60)
            now = committed(cluster.bootstrap, group, source)
            assert now == 11 if offset >= 11 else now < 0, (offset, now)
    finally:
        consumer.close()
    got = read_all(cluster.bootstrap, topic, "read_committed", len(kept))
    assert sorted(got) == sorted(kept)


@pytest.mark.slow
def test_coordinator_killed_mid_commit(cluster: BrokerCluster) -> None:
    topic = spread_topic(cluster)
    txn_id = unique("tx")
    producer = txn_producer(cluster.bootstrap, txn_id, **{"transaction.timeout.ms": 60_000})
    producer.begin_transaction()
    before = produce_all(producer, topic, "before")
    producer.commit_transaction(60)

    producer.begin_transaction()
    doomed = produce_all(producer, topic, "mid")
    coordinator = coordinator_of(cluster, txn_id)
    # Stall the commit between PrepareCommit and CompleteCommit: the leader of one of the
    # transaction's partitions dies first, so its marker cannot be written for a while...
    other = next(b for b in sorted(cluster.running()) if b != coordinator)
    cluster.kill(other)
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(90)
            outcome.append(None)
        except KafkaException as exc:
            outcome.append(exc)

    committer = threading.Thread(target=commit)
    committer.start()
    time.sleep(1.0)  # PrepareCommit written, the marker to the dead leader being retried
    # ... and then the coordinator dies too; the other broker comes back.
    cluster.kill(coordinator)
    cluster.restart(other)
    committer.join(120)
    assert not committer.is_alive()

    # Readers must get past the transaction: a message written after it is visible to a
    # read_committed reader on every partition (the last stable offset moved on).
    after = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, **QUIET})
    tail = [f"after-{p}".encode() for p in range(PARTITIONS)]
    for p, v in enumerate(tail):
        after.produce(topic, value=v, partition=p)
    assert after.flush(60) == 0
    got = read_all(cluster.bootstrap, topic, "read_committed", len(before) + len(tail), 90)
    assert set(tail) <= set(got), f"read_committed readers stuck: {sorted(set(tail) - set(got))}"
    seen = [v for v in got if v in set(doomed)]
    # All or nothing, and all if the producer was told the commit succeeded.
    assert sorted(seen) in ([], sorted(doomed)), f"a partial transaction: {seen}"
    if outcome == [None]:
        assert sorted(seen) == sorted(doomed)
    assert [v for v in got if v in set(before)] and set(before) <= set(got)
