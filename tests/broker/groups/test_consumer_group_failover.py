"""A KIP-848 consumer group (``group.protocol=consumer``) across its coordinator's kill -9 on
three brokers.

Three librdkafka consumers read a 6-partition topic (replication factor 3) while the broker
leading the group's ``__consumer_offsets`` partition — its coordinator, chosen not to be the
controller — is killed. The partition's new leader rebuilds the group from the records the old
coordinator wrote there (Kafka 4's ConsumerGroup* records), so ConsumerGroupDescribe at the new
coordinator answers the same group: the same group and assignment epochs, the same members with
the same member epochs and assignments. The members go on under their epochs: no rebalance
callback fires, every message produced before and after the kill is delivered, the committed
offsets reach the end of every partition, and a member leaving afterwards hands its partitions
over at the new coordinator with no partition owned by two members at any time (the rebalance
callbacks' log is checked throughout). The time from the kill until ConsumerGroupDescribe
answers at the new coordinator is printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import partition_for
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.cluster.test_cluster_transactions import create_offsets_topic
from tests.broker.groups.test_consumer_protocol_clients import (
    PARTITIONS,
    Member,
    Ownership,
    _batch,
    _settle,
    _wait,
)
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker

OFFSETS_PARTITIONS = 3  # BrokerCluster's offsets.topic.num.partitions

#: (state, group epoch, assignment epoch, member id → (member epoch, client id, assignment))
Snapshot = tuple[str, int, int, dict[str, tuple[int, str, tuple[tuple[str, tuple[int, ...]], ...]]]]


def describe(port: int, group: str) -> Snapshot | None:
    """The group as ConsumerGroupDescribe answers it at the broker on ``port`` (None: that
    broker is not its coordinator, or not yet)."""
    body = request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                   {"group_ids": [group], "include_authorized_operations": False})  # fmt: skip
    try:
        with WireClient(port) as client:
            d = client.call(body).groups[0]
    except OSError:
        return None
    if d.error_code != Errors.NONE:
        return None
    members = {
        m.member_id: (
            m.member_epoch,
            m.client_id,
            tuple(
                sorted(
                    (tp.topic_name, tuple(sorted(tp.partitions)))
                    for tp in m.assignment.topic_partitions
                )
            ),  # fmt: skip
        )
        for m in d.members
    }
    return d.group_state, d.group_epoch, d.assignment_epoch, members


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    """The group's committed offset of every partition (OffsetFetch, no membership)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("hw"), **QUIET})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)]  # fmt: skip
    finally:
        c.close()


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def _coordinator(cluster: BrokerCluster, topic: str) -> tuple[str, int]:
    """A group id whose coordinator is not the controller (whose death would add the
    controller's own failover), and that coordinator, once its partition's ISR is full."""
    create_offsets_topic(cluster.bootstrap, topic)
    controller = cluster.controller_id()
    for _ in range(100):
        group = unique("kip848-fo")
        leader = cluster.wait_leader(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))
        if leader.leader != controller:
            break
    cluster.wait_isr(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS), {0, 1, 2},
                     timeout=60)  # fmt: skip
    return group, int(leader.leader)


def _stable(port: int, group: str, names: set[str]) -> Snapshot:
    """ConsumerGroupDescribe at ``port`` until the group is Stable with members ``names``,
    each at the group's epoch and owning a share of the partitions."""

    def settled() -> Snapshot | None:
        found = describe(port, group)
        if found is None:
            return None
        state, epoch, assignment_epoch, members = found
        owned = sorted(p for _e, _c, a in members.values() for _t, ps in a for p in ps)
        ok = (state == "Stable" and assignment_epoch == epoch
              and {c for _e, c, _a in members.values()} == names
              and all(e == epoch and a for e, _c, a in members.values())
              and owned == list(range(PARTITIONS)))  # fmt: skip
        return found if ok else None

    return wait_until(settled, 60, f"group {group} Stable with {sorted(names)}")


@pytest.mark.slow
def test_a_consumer_group_survives_its_coordinators_kill_9(cluster: BrokerCluster) -> None:
    topic = unique("kip848-fo")
    cluster.create_topic(topic, PARTITIONS, 3)
    group, coordinator = _coordinator(cluster, topic)
    own = Ownership()
    members = [Member(cluster.bootstrap, group, topic, f"c{i}", own, **QUIET) for i in range(3)]
    try:
        for m in members:
            m.start()
        _settle(own, {"c0", "c1", "c2"})
        wanted = _batch(topic, cluster.bootstrap, "before")

        def received() -> set[bytes]:
            return {v for m in members for v in list(m.received)}

        _wait(received, wanted)
        before = _stable(cluster.brokers[coordinator].port, group, {"c0", "c1", "c2"})
        events = len(own.log)

        cluster.kill(coordinator)
        killed = time.monotonic()
        new = cluster.wait_leader(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS),
                                  not_in={coordinator})  # fmt: skip
        port = cluster.brokers[int(new.leader)].port
        after = wait_until(lambda: describe(port, group), 60,
                           f"group {group} described at broker {new.leader}")  # fmt: skip
        print(f"\nthe group is described at broker {new.leader} {time.monotonic() - killed:.2f}"
              f" s after broker {coordinator}'s kill -9")  # fmt: skip
        # Reloaded from __consumer_offsets: the same epochs, members and assignments.
        assert after == before, f"before the kill: {before}\nat the new coordinator: {after}"

        wanted |= _batch(topic, cluster.bootstrap, "after")
        _wait(received, wanted, timeout=120)
        # The members went on under their epochs: not one rebalance callback since the kill.
        assert own.log[events:] == [], own.log[events:]
        assert describe(port, group) == before

        # The new coordinator rebalances: a member leaves, the others take its partitions.
        members[0].stop.set()
        members[0].join(30)
        _settle(own, {"c1", "c2"})
        _stable(port, group, {"c1", "c2"})
        wanted |= _batch(topic, cluster.bootstrap, "rebalanced")
        _wait(received, wanted)
        assert not own.violations, f"{own.violations}\n{own.log}"
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    # Everything consumed was committed at the new coordinator (the members' last commits
    # ran as they closed).
    ends = high_watermarks(cluster.bootstrap, topic)
    assert sum(ends) == len(wanted)
    assert committed(cluster.bootstrap, group, topic) == ends
