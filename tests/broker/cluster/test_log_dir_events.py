"""Log dir events: a broker reports replicas on a failed log dir
(``/log_dir_event_notification/log_dir_event_<seq>``) and the controller moves their leadership
away and drops them from the ISRs; an empty report or a re-registration makes them eligible
again. The payload's encoding is checked against Kafka's."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from sluice.broker.cluster.zk_data import (
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    ZkDataError,
)
from sluice.testing.net import wait_until
from tests.broker.cluster import SimCluster


def test_event_payload_is_kafkas_plus_the_offline_partitions() -> None:
    data = LogDirEventNotificationSequenceZNode.encode(2, [("t", 1), ("a", 0)])
    doc = json.loads(data)
    assert {k: doc[k] for k in ("version", "broker", "event")} == {
        "version": 1, "broker": 2, "event": 1,
    }  # fmt: skip
    child = "log_dir_event_0000000004"
    assert LogDirEventNotificationSequenceZNode.sequence(child) == 4
    assert LogDirEventNotificationSequenceZNode.decode(child, data) == (
        2, frozenset({("t", 1), ("a", 0)}),
    )  # fmt: skip
    kafkas = b'{"version":1,"broker":3,"event":1}'  # as Kafka's propagateLogDirEvent writes it
    assert LogDirEventNotificationSequenceZNode.decode(child, kafkas) == (3, None)
    with pytest.raises(ZkDataError, match="event 1"):
        LogDirEventNotificationSequenceZNode.decode(child, b'{"version":1,"broker":3,"event":2}')
    with pytest.raises(ZkDataError, match="offline_partitions"):
        LogDirEventNotificationSequenceZNode.decode(
            child, b'{"version":1,"broker":3,"event":1,"offline_partitions":[["t"]]}'
        )


def test_offline_replicas_lose_leadership_and_isr(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    brokers = cluster.start(1, 2, 3)
    brokers[0].create_topic("t", 2, 3, {})
    for m in brokers:
        wait_until(lambda m=m: all(m.partition_state("t", p) for p in range(2)), message="states")
    state = brokers[0].partition_state("t", 0)
    assert state is not None and len(state.isr) == 3
    victim = cluster.brokers[state.leader]
    victim.report_offline_replicas(frozenset({("t", 0)}))

    def moved() -> bool:
        s = victim.partition_state("t", 0)
        return s is not None and s.leader != victim.broker_id and victim.broker_id not in s.isr

    wait_until(moved, 15, "leadership moved off the offline replica")
    after = victim.partition_state("t", 0)
    assert after is not None and after.leader_epoch == state.leader_epoch + 1
    assert after.leader in state.isr and len(after.isr) == 2
    other = brokers[0].partition_state("t", 1)
    assert other is not None and victim.broker_id in other.isr  # only the reported partition
    wait_until(
        lambda: zk_client.get_children(LogDirEventNotificationZNode.path()) == [],
        message="the event deleted once handled",
    )
    # Dirs back: the replica is eligible again; a re-registration also forgets the report.
    victim.report_offline_replicas(frozenset())

    def offline() -> frozenset[tuple[str, int]] | None:
        return cluster.controller().controller.offline_replicas().get(victim.broker_id)

    wait_until(lambda: offline() == frozenset(), message="offline set cleared")
    victim.report_offline_replicas(frozenset({("t", 1)}))
    wait_until(lambda: offline() == frozenset({("t", 1)}), message="second report")
    cluster.expire(victim.broker_id)
    wait_until(lambda: victim.session_intact(), 30, "re-registered")
    # The broker reports again after re-registering: its last report still stands.
    wait_until(
        lambda: offline() == frozenset({("t", 1)}),
        30, "the report re-sent after the re-registration",
    )  # fmt: skip


def test_a_report_without_partitions_means_every_replica(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    brokers = cluster.start(1, 2)
    brokers[0].create_topic("t", 2, 2, {})
    for m in brokers:
        wait_until(lambda m=m: all(m.partition_state("t", p) for p in range(2)), message="states")
    zk_client.create(
        LogDirEventNotificationSequenceZNode.path_prefix(),
        b'{"version":1,"broker":1,"event":1}',
        sequence=True,
    )

    def off() -> bool:
        states = [brokers[1].partition_state("t", p) for p in range(2)]
        return all(s is not None and s.leader == 2 and 1 not in s.isr for s in states)

    wait_until(off, 15, "broker 1 out of every ISR")
