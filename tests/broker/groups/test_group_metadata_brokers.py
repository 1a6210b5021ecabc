"""Group metadata in ``__consumer_offsets`` through real brokers and confluent-kafka:

* a reader of the topic (a plain consumer assigned to its partitions, decoding key version 2
  and ``GroupMetadataValue`` with Sluice's decoder, as Burrow does with its own) sees the
  group's generation, leader and members' client ids;
* a standalone broker killed (-9) and restarted reloads the group: its members' heartbeats
  and commits go on with the same generation and assignment, no rebalance;
* on three brokers, the group's coordinator killed (-9): the offsets partition's new leader
  rebuilds the stable group, so the members commit again at the new coordinator with the
  same generation and assignments (no revocation, no new member ids, no new group record).
  The time from the kill until both members' commits succeed again is printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from sluice.broker.groups.offset_store import TOPIC as OFFSETS_TOPIC
from sluice.broker.groups.offset_store import partition_for
from sluice.broker.groups.offsets_topic_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    decode_group_metadata_value,
    decode_key,
)
from sluice.testing.broker import BrokerProcess
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.net import wait_until
from tests.broker.cluster.test_cluster_transactions import create_offsets_topic
from tests.broker.server.clients import Msg, produce, unique

pytestmark = pytest.mark.broker

PARTITIONS = 4


class Member:
    """One confluent-kafka consumer of the group, counting its rebalance callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        self.client_id = client_id
        self.assigned: list[list[int]] = []
        self.revoked = 0
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest", **QUIET,
        })  # fmt: skip
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: self.assigned.append(sorted(p.partition for p in ps)),
            on_revoke=lambda _c, _ps: setattr(self, "revoked", self.revoked + 1),
        )
        self.topic = topic

    def commit(self) -> bool:
        """Commit offset 1 of every partition it owns; whether the commit succeeded."""
        owned = self.assigned[-1] if self.assigned else []
        try:
            self.consumer.commit(
                offsets=[TopicPartition(self.topic, p, 1) for p in owned],
                asynchronous=False,
            )
        except KafkaException:
            return False
        return True


def stable(members: list[Member], timeout: float = 60.0) -> None:
    """Poll until the members hold every partition between them, each its own."""

    def settled() -> bool:
        for m in members:
            m.consumer.poll(0.1)
        owned = [p for m in members if m.assigned for p in m.assigned[-1]]
        return sorted(owned) == list(range(PARTITIONS)) and all(
            m.assigned and m.assigned[-1] for m in members
        )

    wait_until(settled, timeout, "the members to share every partition", interval=0)


def group_record(bootstrap: str, group: str, partitions: int) -> GroupMetadataValue | None:
    """The last metadata record of ``group`` in ``__consumer_offsets`` (None: a tombstone
    or none), read as a plain topic."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                       "enable.auto.commit": False, **QUIET})  # fmt: skip
    try:
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(group, partitions), OFFSET_BEGINNING)
        _low, high = reader.get_watermark_offsets(tp, timeout=10)
        reader.assign([tp])
        last: GroupMetadataValue | None = None
        deadline = time.monotonic() + 30
        position = -1
        while position < high - 1 and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None or message.error() is not None:
                continue
            position = message.offset()
            key = decode_key(message.key())
            if isinstance(key, GroupMetadataKey) and key.group == group:
                value = message.value()
                last = None if value is None else decode_group_metadata_value(value)
        assert position >= high - 1, f"read {OFFSETS_TOPIC} to {position}, expected {high - 1}"
        return last
    finally:
        reader.close()


def close(members: list[Member]) -> None:
    for m in members:
        m.consumer.close()


def test_a_reader_sees_the_members_and_a_restarted_broker_keeps_the_group(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "broker", {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        topic, group = unique("gm"), unique("gm-group")
        broker.create_topic(topic, PARTITIONS)
        produce(broker.bootstrap, topic, [Msg(None, b"v")] * 8)
        members = [Member(broker.bootstrap, group, topic, f"client-{n}") for n in "ab"]
        stable(members)
        assert all(m.commit() for m in members)
        record = group_record(broker.bootstrap, group, 1)
        assert record is not None and record.protocol_type == "consumer"
        assert {m.client_id for m in record.members} == {"client-a", "client-b"}
        assert record.leader in {m.member_id for m in record.members}
        assert all(m.assignment for m in record.members)

        assigned = [list(m.assigned) for m in members]
        revoked = [m.revoked for m in members]
        broker.restart(kill=True)
        wait_until(lambda: all(m.commit() for m in members), 60, "commits after the restart")
        for m in members:
            m.consumer.poll(0.5)
        assert [list(m.assigned) for m in members] == assigned
        assert [m.revoked for m in members] == revoked  # no rebalance
        assert group_record(broker.bootstrap, group, 1) == record  # no rebalance since
        close(members)
    finally:
        broker.stop()


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect, overrides={"group.initial.rebalance.delay.ms": "0"}
                       ) as c:  # fmt: skip
        yield c


@pytest.mark.slow
def test_a_stable_group_survives_its_coordinators_kill_9(
    cluster: BrokerCluster,
) -> None:
    topic = unique("gm")
    cluster.create_topic(topic, PARTITIONS, 3)
    produce(cluster.bootstrap, topic, [Msg(None, b"v")] * 8)
    controller = cluster.controller_id()
    offsets_partitions = 3  # the cluster's offsets.topic.num.partitions
    members: list[Member] = []
    try:
        # A group whose coordinator is not the controller (whose death would add the
        # controller's own failover to what is measured).
        create_offsets_topic(cluster.bootstrap, topic)
        for _ in range(100):
            group = unique("gm-group")
            leader = cluster.wait_leader(OFFSETS_TOPIC, partition_for(group, offsets_partitions))
            if leader.leader != controller:
                break
        coordinator = int(leader.leader)
        cluster.wait_isr(OFFSETS_TOPIC, partition_for(group, offsets_partitions), {0, 1, 2},
                         timeout=60)  # fmt: skip
        members = [Member(cluster.bootstrap, group, topic, f"client-{n}") for n in "ab"]
        stable(members)
        assert all(m.commit() for m in members)
        before = group_record(cluster.bootstrap, group, offsets_partitions)
        assert before is not None and {m.client_id for m in before.members} == {
            "client-a", "client-b",
        }  # fmt: skip
        assigned = [list(m.assigned) for m in members]
        revoked = [m.revoked for m in members]

        cluster.kill(coordinator)
        killed = time.monotonic()
        done: dict[str, float] = {}

        def committed_again() -> bool:
            for m in members:
                m.consumer.poll(0.05)
                if m.client_id not in done and m.commit():
                    done[m.client_id] = time.monotonic() - killed
            return len(done) == len(members)

        wait_until(committed_again, 90, "both members to commit at the new coordinator",
                   interval=0)  # fmt: skip
        print(
            f"\ncommits succeed again {max(done.values()):.2f} s after the coordinator's "
            f"kill -9 ({', '.join(f'{k} {v:.2f} s' for k, v in sorted(done.items()))})"
        )
        new = cluster.wait_leader(OFFSETS_TOPIC, partition_for(group, offsets_partitions),
                                  not_in={coordinator})  # fmt: skip
        assert int(new.leader) != coordinator
        for m in members:
            m.consumer.poll(0.5)
        assert [list(m.assigned) for m in members] == assigned
        assert [m.revoked for m in members] == revoked  # no rebalance
        after = group_record(cluster.bootstrap, group, offsets_partitions)
        assert after == before  # same generation, members and assignments: no rebalance
    finally:
        close(members)
