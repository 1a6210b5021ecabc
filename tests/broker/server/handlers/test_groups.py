"""Consumer groups through the broker's group coordinator: confluent-kafka's ``subscribe()``
with each assignor, kafka-python's group consumer, a consumer killed with -9, two groups,
and ``sluice groups``; ListGroups' state and type filters over classic, consumer (KIP-848)
and share (KIP-932) groups, and DescribeGroups' static members, authorized operations and v6
answers, over the wire and through confluent-kafka's AdminClient."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.net import wait_until
from tests.broker.server.broker_process import BrokerProcess
from tests.broker.server.clients import Msg, create_topic, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker

PARTITIONS = 6


def values(n: int, tag: str) -> list[Msg]:
    return [Msg(None, f"{tag}-{i}".encode(), (), None) for i in range(n)]


class GroupMember(threading.Thread):
    """A confluent-kafka consumer in a group, polling on its own thread.

    Everything touching the consumer happens on that thread (librdkafka's ``assignment()``
    called from another thread while ``poll()`` runs can block); the assignment is tracked
    through the rebalance callbacks instead."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "enable.auto.commit": True, "auto.commit.interval.ms": 200, **config,
        })  # fmt: skip
        self.topic = topic
        self.received: list[bytes] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._owned: set[int] = set()
        self._lock = threading.Lock()

    def _assigned(self, _consumer: Consumer, partitions: list[Any]) -> None:
        with self._lock:
            self._owned.update(p.partition for p in partitions)

    def _revoked(self, _consumer: Consumer, partitions: list[Any]) -> None:
        with self._lock:
            self._owned.difference_update(p.partition for p in partitions)

    def run(self) -> None:
        self.consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            self.received.append(msg.value())
        self.consumer.close()

    def assignment(self) -> list[int]:
        with self._lock:
            return sorted(self._owned)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_share_a_topic_each_message_once(
    broker: BrokerProcess, strategy: str
) -> None:
    topic, group = unique("share"), unique("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [
        GroupMember(broker.bootstrap, group, topic, **{"partition.assignment.strategy": strategy})
        for _ in range(3)
    ]
    for m in members:
        m.start()
    try:
        wait_until(
            lambda: sum(len(m.assignment()) for m in members) == PARTITIONS
            and all(m.assignment() for m in members),
            30, "a balanced assignment",
        )  # fmt: skip
        owned = [p for m in members for p in m.assignment()]
        assert sorted(owned) == list(range(PARTITIONS))  # each partition owned once
        expected = [m.value for m in values(600, strategy)]
        produce(broker.bootstrap, topic, values(600, strategy))
        wait_until(lambda: sum(len(m.received) for m in members) >= 600, 30, "600 messages")
        got = [v for m in members for v in m.received]
        assert Counter(got) == Counter(expected)  # every message once, none twice
        assert all(not m.errors for m in members), [m.errors for m in members]
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=30)


# kafka-python reads its bundled data with importlib.resources' legacy API (as in
# test_kafka_python.py).
@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
@pytest.mark.parametrize("api_version", [None, (2, 4, 0), (2, 6, 0), (2, 7, 0)])
def test_kafka_python_group_consumer(
    broker: BrokerProcess, api_version: tuple[int, ...] | None
) -> None:
    # Pinned to 2.4.0 (as kafka-python's own suite is) below the 3.0 it infers, it sends
    # Kafka 2.4's versions unnegotiated: FindCoordinator v3, JoinGroup v6, SyncGroup and
    # Heartbeat v4, OffsetFetch v6 — the flexible group versions. Pinned to 2.6.0 (the group
    # versions of 2.5-2.8 are the same): JoinGroup v7, SyncGroup v5 with the protocol type
    # and name (KIP-559), OffsetFetch v7. Pinned to 2.7.0: Fetch v12 too, flexible.
    from kafka import KafkaConsumer

    topic, group = unique("kp-group"), unique("group")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, values(90, "kp"))
    consumer = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=15_000, api_version=api_version,
    )  # fmt: skip
    try:
        got = []
        for record in consumer:
            got.append(record.value)
            if len(got) == 90:
                break
        consumer.commit()
        assert sorted(got) == sorted(m.value for m in values(90, "kp"))
        committed = {p: consumer.committed(tp) for p, tp in enumerate(consumer.assignment())}
        assert sum(committed.values()) == 90
    finally:
        consumer.close()


KILLED_CONSUMER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "enable.auto.commit": True,
                  "auto.commit.interval.ms": 200})
    c.subscribe([sys.argv[3]])
    while True:
        m = c.poll(0.2)
        if m is not None and not m.error():
            print(m.value().decode(), flush=True)
    """
)


def test_a_consumer_killed_with_minus_9_hands_its_partitions_over(
    broker: BrokerProcess,
) -> None:
    topic, group = unique("kill"), unique("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    victim = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONSUMER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    survivor = GroupMember(broker.bootstrap, group, topic)
    survivor.start()
    victim_got: list[str] = []
    reader = threading.Thread(target=lambda: victim_got.extend(victim.stdout or []), daemon=True)
    reader.start()
    try:
        wait_until(lambda: len(survivor.assignment()) in (2, 3, 4), 30, "a shared assignment")
        first = values(300, "before")
        produce(broker.bootstrap, topic, first)
        wait_until(lambda: len(survivor.received) + len(victim_got) >= 300, 30, "the first 300")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        reader.join(timeout=10)
        produce(broker.bootstrap, topic, values(300, "after"))
        # Its partitions move once its session (6 s) expires, and nothing is left behind.
        wait_until(lambda: survivor.assignment() == list(range(PARTITIONS)), 30, "a takeover")
        expected = {m.value for m in values(300, "before") + values(300, "after")}
        all_got = survivor.received + [v.strip().encode() for v in victim_got]
        wait_until(lambda: expected <= set(survivor.received + [v.strip().encode()
                                                              for v in victim_got]), 30,
                   "every message")  # fmt: skip
        all_got = survivor.received + [v.strip().encode() for v in victim_got]
        duplicates = len(all_got) - len(set(all_got))
        # Duplicates come only from offsets the victim consumed but had not committed.
        assert duplicates <= len(victim_got), (duplicates, len(victim_got))
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.stop.set()
        survivor.join(timeout=30)
        if victim.stdout:
            victim.stdout.close()


def test_two_groups_each_receive_the_whole_stream(broker: BrokerProcess) -> None:
    topic = unique("two-groups")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values(100, "both"))
    members = [GroupMember(broker.bootstrap, unique("group"), topic) for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: all(len(m.received) >= 100 for m in members), 30, "both groups")
        for m in members:
            assert sorted(m.received) == sorted(v.value for v in values(100, "both"))
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=30)


def sluice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args], capture_output=True, text=True, timeout=60
    )


def test_groups_cli_list_describe_and_reset(broker: BrokerProcess) -> None:
    topic, group = unique("cli"), unique("group")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, values(40, "cli"), partition=0)
    member = GroupMember(broker.bootstrap, group, topic)
    member.start()
    try:
        wait_until(lambda: len(member.received) >= 40, 30, "40 messages")
        time.sleep(0.5)  # an auto-commit
        described = sluice("groups", "describe", "--group", group,
                           "--bootstrap-server", broker.bootstrap)  # fmt: skip
        assert described.returncode == 0, described.stderr
        assert "Stable" in described.stdout and topic in described.stdout
        row = next(line for line in described.stdout.splitlines()
                   if line.startswith(topic) and line.split()[1] == "0")  # fmt: skip
        assert row.split()[2:5] == ["40", "40", "0"]  # committed, log end, lag
        listed = sluice("groups", "list", "--bootstrap-server", broker.bootstrap)
        assert group in listed.stdout.split()
        refused = sluice("groups", "reset-offsets", "--group", group, "--topic", topic,
                         "--to-earliest", "--execute",
                         "--bootstrap-server", broker.bootstrap)  # fmt: skip
        assert refused.returncode == 1 and "active members" in refused.stderr
    finally:
        member.stop.set()
        member.join(timeout=30)
    wait_until(lambda: "Empty" in sluice("groups", "describe", "--group", group,
                                         "--bootstrap-server", broker.bootstrap).stdout,
               20, "the group to empty")  # fmt: skip
    dry = sluice("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0",
                 "--shift-by", "-15", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert dry.returncode == 0 and "dry run" in dry.stdout
    assert [line.split()[2:] for line in dry.stdout.splitlines() if line.startswith(topic)] == [
        ["40", "25"]
    ]
    done = sluice("groups", "reset-offsets", "--group", group, "--topic", topic,
                  "--to-offset", "10", "--execute",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = sluice("groups", "describe", "--group", group, "--bootstrap-server", broker.bootstrap)
    row = next(line for line in after.stdout.splitlines()
               if line.startswith(topic) and line.split()[1] == "0")  # fmt: skip
    assert row.split()[2] == "10"


# -- ListGroups v3-5, DescribeGroups v3-6 -------------------------------------------------------

#: READ, DESCRIBE and DELETE, the operations Kafka supports on a group (no authorizer: all).
GROUP_OPERATIONS = (1 << 3) | (1 << 8) | (1 << 6)


def _commit_offsets_only(client: WireClient, group: str, topic: str) -> None:
    """A classic group known by its committed offsets alone (Empty)."""
    body = request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}],
    })  # fmt: skip
    assert client.call(body).topics[0].partitions[0].error_code == Errors.NONE


def _consumer_group_member(client: WireClient, group: str, topic: str) -> None:
    body = request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": uuid.uuid4().hex, "member_epoch": 0,
        "rebalance_timeout": 30_000, "subscribed_topic_names": [topic], "topic_partitions": [],
    })  # fmt: skip
    assert client.call(body).error_code == Errors.NONE


def _share_group_member(client: WireClient, group: str, topic: str) -> None:
    body = request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": uuid.uuid4().hex, "member_epoch": 0,
        "subscribed_topic_names": [topic],
    })  # fmt: skip
    assert client.call(body).error_code == Errors.NONE


def _listed(client: WireClient, version: int, **filters: list[str]) -> dict[str, Any]:
    response = client.call(request(ApiKey.LIST_GROUPS, version, filters))
    assert response.error_code == Errors.NONE
    return {g.group_id: g for g in response.groups}


def test_list_groups_by_state_and_type(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    topic = unique("lg")
    create_topic(broker.bootstrap, topic, 2)
    empty, stable, consumer, share = (unique(f"lg-{kind}") for kind in
                                      ("empty", "stable", "consumer", "share"))  # fmt: skip
    member = GroupMember(broker.bootstrap, stable, topic)
    member.start()
    try:
        wait_until(lambda: len(member.assignment()) == 2, 30, "the classic member's assignment")
        with WireClient(broker.port) as client:
            _commit_offsets_only(client, empty, topic)
            _consumer_group_member(client, consumer, topic)
            _share_group_member(client, share, topic)
            every = _listed(client, 5)
            ours = {g: (every[g].protocol_type, every[g].group_state, every[g].group_type)
                    for g in (empty, stable, consumer, share)}  # fmt: skip
            assert ours[empty] == ("consumer", "Empty", "classic")
            assert ours[stable] == ("consumer", "Stable", "classic")
            assert ours[consumer][0::2] == ("consumer", "consumer")
            assert ours[share] == ("share", "Stable", "share")
            # Filters match case-insensitively; an empty one keeps everything.
            shares = _listed(client, 5, types_filter=["Share"])
            assert share in shares and not {empty, stable, consumer} & set(shares)
            classic = _listed(client, 5, types_filter=["classic"], states_filter=[])
            assert {empty, stable} <= set(classic) and not {consumer, share} & set(classic)
            empties = _listed(client, 4, states_filter=["EMPTY"])
            assert empty in empties and not {stable, share} & set(empties)
            assert {empty, stable, consumer, share} <= set(_listed(client, 3))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        result = admin.list_consumer_groups(
            states={ConsumerGroupState.EMPTY}, types={ConsumerGroupType.CLASSIC},
            request_timeout=15,
        ).result(15)  # fmt: skip
        assert not result.errors, result.errors
        found = {g.group_id: g for g in result.valid}
        assert empty in found and stable not in found and consumer not in found
        assert (found[empty].state, found[empty].type) == (
            ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC,
        )  # fmt: skip
    finally:
        member.stop.set()
        member.join(timeout=30)


def _described(client: WireClient, version: int, group: str, ops: bool = False) -> Any:
    body = request(ApiKey.DESCRIBE_GROUPS, version,
                   {"groups": [group], "include_authorized_operations": ops})  # fmt: skip
    return client.call(body).groups[0]


def test_describe_groups_static_members_operations_and_v6(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AclOperation, AdminClient

    topic, group, consumer = unique("dg"), unique("dg-static"), unique("dg-consumer")
    create_topic(broker.bootstrap, topic, 2)
    member = GroupMember(broker.bootstrap, group, topic, **{"group.instance.id": "static-1"})
    member.start()
    try:
        wait_until(lambda: len(member.assignment()) == 2, 30, "the static member's assignment")
        with WireClient(broker.port) as client:
            for version in (4, 5, 6):
                got = _described(client, version, group)
                assert (got.error_code, got.group_state) == (Errors.NONE, "Stable")
                assert [m.group_instance_id for m in got.members] == ["static-1"]
                assert got.authorized_operations == -(1 << 31)  # not asked
            assert _described(client, 3, group, ops=True).authorized_operations == (
                GROUP_OPERATIONS
            )
            # v0-5 say Dead for a group that is not (classic); v6 says why (KIP-1043).
            missing = unique("dg-missing")
            assert _described(client, 5, missing).group_state == "Dead"
            gone = _described(client, 6, missing)
            assert (gone.error_code, gone.error_message) == (
                Errors.GROUP_ID_NOT_FOUND, f"Group {missing} not found.",
            )  # fmt: skip
            _consumer_group_member(client, consumer, topic)
            other = _described(client, 6, consumer)
            assert (other.error_code, other.error_message) == (
                Errors.GROUP_ID_NOT_FOUND, f"Group {consumer} is not a classic group.",
            )  # fmt: skip
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.describe_consumer_groups(
            [group], include_authorized_operations=True, request_timeout=15
        )
        description = futures[group].result(15)
        assert description.state == ConsumerGroupState.STABLE
        assert [m.group_instance_id for m in description.members] == ["static-1"]
        assert set(description.authorized_operations) == {
            AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        }  # fmt: skip
    finally:
        member.stop.set()
        member.join(timeout=30)


def _join_v7(client: WireClient, group: str, member_id: str) -> Any:
    return client.call(request(ApiKey.JOIN_GROUP, 7, {
        "group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}],
    }))  # fmt: skip


def _sync_v5(
    client: WireClient, group: str, joined: Any, protocol: tuple[str | None, str | None]
) -> Any:
    return client.call(request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "protocol_type": protocol[0], "protocol_name": protocol[1],
        "assignments": [{"member_id": joined.member_id, "assignment": b"a"}],
    }))  # fmt: skip


def test_join_group_v7_and_sync_group_v5_carry_the_protocol(broker: BrokerProcess) -> None:
    # KIP-559: JoinGroup v7 answers the group's protocol type; SyncGroup v5 must name the
    # type and the name, which must be the group's (else INCONSISTENT_GROUP_PROTOCOL), and
    # answers both. Errors carry null for them, as Kafka's.
    group = unique("kip559")
    with WireClient(broker.port) as client:
        first = _join_v7(client, group, "")
        assert (first.error_code, first.protocol_type) == (Errors.MEMBER_ID_REQUIRED, None)
        joined = _join_v7(client, group, first.member_id)
        assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (
            Errors.NONE, "consumer", "range",
        )  # fmt: skip
        for wrong in (("connect", "range"), ("consumer", "roundrobin"), (None, "range"),
                      ("consumer", None)):  # fmt: skip
            refused = _sync_v5(client, group, joined, wrong)
            assert (refused.error_code, refused.protocol_type, refused.protocol_name) == (
                Errors.INCONSISTENT_GROUP_PROTOCOL, None, None,
            ), wrong  # fmt: skip
        synced = _sync_v5(client, group, joined, ("consumer", "range"))
        assert (synced.error_code, synced.protocol_type, synced.protocol_name) == (
            Errors.NONE, "consumer", "range",
        )  # fmt: skip
        assert bytes(synced.assignment) == b"a"
