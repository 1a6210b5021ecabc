"""Network partitions of a three-broker cluster while an idempotent ``acks=all`` producer
runs (``min.insync.replicas=2``): a leader cut off from its followers and ZooKeeper, a
follower cut off and healed, and a leader whose ZooKeeper session expires (SIGSTOP past the
session timeout). Each ends by reading every partition back: every acknowledged message
present exactly once, at the offset acknowledged, in order."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bench.soak_check import check, read_back
from bench.soak_workload import AckedProducer
from sluice.testing.cluster import wait_for_metadata
from sluice.testing.faults import Cut, FaultLog, Pause, direct_produce, leader_of
from sluice.testing.netns import LabBroker, LabCluster
from tests.faults.conftest import SESSION_TIMEOUT_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "events"
PARTITIONS = 3
RATE = 300  # messages/s: enough to be mid-write when a fault lands, light on a 2-core box
# librdkafka's error code for Kafka's NONE is 0; anything else (or no answer) is a refusal.
ACKNOWLEDGED = 0


@pytest.fixture
def producer(lab_cluster: LabCluster) -> Iterator[AckedProducer]:
    lab_cluster.create_topic(TOPIC, PARTITIONS)
    producer = AckedProducer(
        lab_cluster.bootstrap, TOPIC, PARTITIONS, start=time.monotonic(), rate=RATE
    ).start()
    try:
        yield producer
    finally:
        producer.stop()


def wait_acks(producer: AckedProducer, more: int, timeout: float = 60.0) -> None:
    target = len(producer.acks) + more
    wait_for_metadata(lambda: len(producer.acks) >= target, timeout, f"{target} acks")


def finish(cluster: LabCluster, producer: AckedProducer) -> None:
    """Every partition back to a full ISR, the producer drained, everything read back."""
    everyone = set(cluster.brokers)
    for p in range(PARTITIONS):
        cluster.wait_views(everyone, TOPIC, p, lambda v: set(v.isr) == everyone, 60, "full ISR")
    wait_acks(producer, 3 * RATE)  # producing works again after the heal
    producer.stop()
    result = check(producer.acks, read_back(cluster.bootstrap, TOPIC, PARTITIONS))
    assert result.acked > 0
    assert result.ok, result.as_dict()
    assert not producer.fatal_errors


def test_leader_cut_from_zookeeper_and_followers_fences_itself(
    lab_cluster: LabCluster, producer: AckedProducer, fault_log: FaultLog
) -> None:
    wait_acks(producer, RATE)
    old = leader_of(lab_cluster, TOPIC, 0)
    others = [i for i in lab_cluster.brokers if i != old]
    cut = fault_log.inject(Cut("partition", f"broker {old}", cluster=lab_cluster, broker_id=old))
    # The others elect a new leader once the old one's session expires.
    lab_cluster.wait_views(others, TOPIC, 0, lambda p: p.leader in others, 30, "a new leader")
    # The old leader, still reachable by clients, must not acknowledge an acks=all write:
    # it cannot reach a follower (min.insync.replicas=2) nor shrink the ISR in ZooKeeper.
    deposed = lab_cluster.brokers[old]
    assert isinstance(deposed, LabBroker)
    assert direct_produce(deposed, TOPIC, 0, b"to the deposed leader") != ACKNOWLEDGED
    wait_acks(producer, RATE)  # the producer moved on to the new leader
    fault_log.heal(cut)
    # Healed, the old leader learns it was deposed and follows.
    lab_cluster.wait_views(
        lab_cluster.brokers, TOPIC, 0, lambda p: p.leader != old, 60, "old leader deposed"
    )
    finish(lab_cluster, producer)


def test_follower_cut_leaves_and_rejoins_the_isr(
    lab_cluster: LabCluster, producer: AckedProducer, fault_log: FaultLog
) -> None:
    wait_acks(producer, RATE)
    leader = leader_of(lab_cluster, TOPIC, 0)
    follower = next(
        i for i in lab_cluster.brokers if i not in (leader, lab_cluster.controller_id())
    )
    cut = fault_log.inject(
        Cut("partition", f"broker {follower}", cluster=lab_cluster, broker_id=follower)
    )
    others = [i for i in lab_cluster.brokers if i != follower]
    lab_cluster.wait_views(
        others, TOPIC, 0, lambda p: follower not in p.isr, 30, "follower out of the ISR"
    )
    wait_acks(producer, RATE)  # acks=all goes on with two replicas in sync
    fault_log.heal(cut)
    lab_cluster.wait_views(
        lab_cluster.brokers, TOPIC, 0, lambda p: follower in p.isr, 60, "follower back"
    )
    finish(lab_cluster, producer)


def test_leader_session_expiry_by_sigstop(
    lab_cluster: LabCluster, producer: AckedProducer, fault_log: FaultLog
) -> None:
    wait_acks(producer, RATE)
    old = leader_of(lab_cluster, TOPIC, 0)
    others = [i for i in lab_cluster.brokers if i != old]
    paused = fault_log.inject(
        Pause("session-expiry", f"broker {old}", broker=lab_cluster.brokers[old])
    )
    started = time.monotonic()
    lab_cluster.wait_views(others, TOPIC, 0, lambda p: p.leader in others, 30, "a new leader")
    time.sleep(max(0.0, SESSION_TIMEOUT_S + 1 - (time.monotonic() - started)))
    fault_log.heal(paused)
    # Right after SIGCONT, before it has heard from ZooKeeper, the old leader may still think
    # it leads: an acks=all write must still not be acknowledged.
    deposed = lab_cluster.brokers[old]
    assert isinstance(deposed, LabBroker)
    assert direct_produce(deposed, TOPIC, 0, b"to the woken leader") != ACKNOWLEDGED
    lab_cluster.wait_views(
        lab_cluster.brokers, TOPIC, 0, lambda p: p.leader != old, 60, "old leader deposed"
    )
    finish(lab_cluster, producer)
