"""Static membership (KIP-345) through a real broker with confluent-kafka (librdkafka) and
kafka-python consumers carrying ``group.instance.id``: a restarted static member gets its old
partitions back without a rebalance (the other member sees no callback), a duplicate is fenced.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import pytest
from confluent_kafka import Consumer

from sluice.testing.net import wait_until

from .broker_process import BrokerProcess
from .clients import create_topic, unique

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 4


class StaticMember(threading.Thread):
    """A confluent-kafka consumer with a ``group.instance.id``, polling on its own thread;
    every rebalance callback is counted. ``close()`` of a static member sends no LeaveGroup
    (librdkafka), as a process that dies or restarts."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
            "auto.offset.reset": "earliest", "session.timeout.ms": 30_000,
            "heartbeat.interval.ms": 300, "enable.auto.commit": False,
        })  # fmt: skip
        self.topic = topic
        self.callbacks: list[tuple[str, list[int]]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._owned: set[int] = set()

    def _assigned(self, _c: Consumer, partitions: list[Any]) -> None:
        with self._lock:
            self._owned.update(p.partition for p in partitions)
            self.callbacks.append(("assign", sorted(p.partition for p in partitions)))

    def _revoked(self, _c: Consumer, partitions: list[Any]) -> None:
        with self._lock:
            self._owned.difference_update(p.partition for p in partitions)
            self.callbacks.append(("revoke", sorted(p.partition for p in partitions)))

    def run(self) -> None:
        self.consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        while not self.stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error():
                self.errors.append(str(msg.error()))
        self.consumer.close()

    def assignment(self) -> list[int]:
        with self._lock:
            return sorted(self._owned)

    def halt(self) -> None:
        self.stop.set()
        self.join(30)


def _stable_pair(broker: BrokerProcess) -> tuple[str, str, StaticMember, StaticMember]:
    topic, group = unique("static"), unique("static-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    a = StaticMember(broker.bootstrap, group, topic, "instance-a")
    b = StaticMember(broker.bootstrap, group, topic, "instance-b")
    a.start()
    b.start()
    wait_until(
        lambda: len(a.assignment()) + len(b.assignment()) == PARTITIONS
        and a.assignment() and b.assignment(),
        40, "the two static members to share the partitions",
    )  # fmt: skip
    return topic, group, a, b


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    broker: BrokerProcess,
) -> None:
    topic, group, a, b = _stable_pair(broker)
    try:
        time.sleep(1.5)  # settled: no rebalance under way
        a_partitions, b_partitions = a.assignment(), b.assignment()
        b_callbacks = list(b.callbacks)
        a.halt()  # closed without LeaveGroup: a static member's close()
        restarted = StaticMember(broker.bootstrap, group, topic, "instance-a")
        restarted.start()
        try:
            wait_until(lambda: restarted.assignment() == a_partitions, 30,
                       f"the restarted member to get {a_partitions} back")  # fmt: skip
            time.sleep(2)  # several heartbeat intervals: a rebalance would show by now
            assert b.callbacks == b_callbacks, "the other member saw a rebalance"
            assert b.assignment() == b_partitions
            assert restarted.callbacks == [("assign", a_partitions)]
            assert not restarted.errors and not b.errors
        finally:
            restarted.halt()
    finally:
        b.halt()


def test_a_duplicate_static_member_fences_the_old_one(broker: BrokerProcess) -> None:
    topic, group, a, b = _stable_pair(broker)
    duplicate = StaticMember(broker.bootstrap, group, topic, "instance-a")
    try:
        a_partitions = a.assignment()
        duplicate.start()
        wait_until(lambda: duplicate.assignment() == a_partitions, 30,
                   "the duplicate to take the instance's partitions")  # fmt: skip
        # The old process, still running, is fenced at its next heartbeat: a fatal error.
        wait_until(lambda: any("fenced" in e.lower() for e in a.errors), 20,
                   f"FENCED_INSTANCE_ID on the old member (errors: {a.errors})")  # fmt: skip
        assert not b.errors
    finally:
        for m in (a, b, duplicate):
            m.halt()


def test_kafka_python_static_member_rejoins_without_a_rebalance(broker: BrokerProcess) -> None:
    topic, group = unique("static-kp"), unique("static-kp-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    other = StaticMember(broker.bootstrap, group, topic, "instance-b")
    other.start()

    def kp_consumer() -> KafkaConsumer:
        c = KafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group,
            group_instance_id="kp-instance", session_timeout_ms=30_000,
            heartbeat_interval_ms=300, enable_auto_commit=False,
        )  # fmt: skip
        return c

    def partitions_of(c: KafkaConsumer) -> list[int]:
        c.poll(timeout_ms=200)
        return sorted(tp.partition for tp in c.assignment())

    try:
        first = kp_consumer()
        wait_until(lambda: len(partitions_of(first)) + len(other.assignment()) == PARTITIONS
                   and other.assignment(), 40, "kafka-python and librdkafka to share")  # fmt: skip
        time.sleep(1.5)
        mine, callbacks = partitions_of(first), list(other.callbacks)
        # A static member's close() sends no LeaveGroup (KIP-345) in kafka-python either.
        first.close(autocommit=False)
        second = kp_consumer()
        try:
            wait_until(lambda: partitions_of(second) == mine, 30, f"{mine} back")
            time.sleep(2)
            assert other.callbacks == callbacks, "the other member saw a rebalance"
        finally:
            second.close(autocommit=False)
    finally:
        other.halt()
