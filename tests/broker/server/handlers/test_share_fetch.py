"""Share groups (KIP-932) over the wire against real brokers: ShareGroupHeartbeat, ShareFetch
with piggybacked acknowledgements, ShareAcknowledge and ShareGroupDescribe, as kio-encoded
requests.

(confluent-kafka's ShareConsumer cannot be the client yet: librdkafka maps the assignment's
topic ids to names through Metadata v10+, which Sluice does not advertise, so it drops the
assignment as "Metadata not found for the assigned topic id".)

Two members share one group: every record goes to exactly one of them while all are accepted;
a released record comes back (delivery count 2), a rejected one never, one released at the
delivery limit (5) never; and after kill -9 of the broker, nothing acknowledged is delivered
again and nothing unacknowledged is lost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.share.share_partition import AcknowledgeType
from sluice.broker.share.share_state_log import TOPIC as STATE_TOPIC
from sluice.testing.broker import BrokerProcess
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = [pytest.mark.broker]

Acks = dict[tuple[int, int], AcknowledgeType]  # (partition, offset) -> type


class ShareMember:
    """One share-group member speaking the protocol by hand."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        self.wire = WireClient(broker.port)
        self.group, self.topic = group, topic
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.session_epoch = 0
        self.topic_id: uuid.UUID | None = None
        self.partitions: list[int] = []

    def close(self) -> None:
        self.wire.close()

    def heartbeat(self, *, leave: bool = False) -> Any:
        body = request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "member_epoch": -1 if leave else self.epoch,
            "subscribed_topic_names": None if self.epoch else [self.topic],
        })  # fmt: skip
        response = self.wire.call(body)
        assert response.error_code == Errors.NONE, response
        self.epoch = response.member_epoch
        if response.assignment is not None and response.assignment.topic_partitions:
            assigned = response.assignment.topic_partitions[0]
            self.topic_id, self.partitions = assigned.topic_id, sorted(assigned.partitions)
        return response

    def fetch(
        self, acks: Acks | None = None, *, max_wait: int = 200, final: bool = False,
        max_records: int = 500,
    ) -> Any:  # fmt: skip
        epoch = -1 if final else self.session_epoch
        partitions = [
            {"partition_index": p, "acknowledgement_batches": _batches(acks or {}, p)}
            for p in self.partitions
            if not final or _batches(acks or {}, p)
        ]
        body = request(ApiKey.SHARE_FETCH, 1, {
            "group_id": self.group, "member_id": self.member_id, "share_session_epoch": epoch,
            "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
            "batch_size": 500, "topics": [{"topic_id": self.topic_id, "partitions": partitions}],
            "forgotten_topics_data": [],
        })  # fmt: skip
        response = self.wire.call(body)
        if not final:
            self.session_epoch += 1
        return response

    def acknowledge(self, acks: Acks, *, final: bool = False) -> Any:
        body = request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": -1 if final else self.session_epoch,
            "topics": [{"topic_id": self.topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": _batches(acks, p)}
                for p in sorted({p for p, _ in acks})
            ]}],
        })  # fmt: skip
        response = self.wire.call(body)
        if not final:
            self.session_epoch += 1
        return response


def _batches(acks: Acks, partition: int) -> list[dict[str, Any]]:
    return [
        {"first_offset": o, "last_offset": o, "acknowledge_types": [int(kind)]}
        for (p, o), kind in sorted(acks.items())
        if p == partition
    ]


def acquired(response: Any) -> dict[tuple[int, int], int]:
    """(partition, offset) -> delivery count of what a ShareFetch handed out."""
    assert response.error_code == Errors.NONE, response
    out = {}
    for topic in response.responses:
        for p in topic.partitions:
            assert p.error_code == Errors.NONE, p
            for r in p.acquired_records:
                for o in range(r.first_offset, r.last_offset + 1):
                    out[(p.partition_index, o)] = r.delivery_count
    return out


def ack_errors(response: Any) -> list[int]:
    return [
        p.acknowledge_error_code if hasattr(p, "acknowledge_error_code") else p.error_code
        for t in response.responses
        for p in t.partitions
    ]


def produce(broker: BrokerProcess, topic: str, partitions: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def drain(
    members: Iterable[ShareMember],
    acks: dict[ShareMember, Acks] | None = None,
    *,
    quiet: float = 1.0,
    deadline: float = 30.0,
) -> dict[ShareMember, dict[tuple[int, int], int]]:
    """Fetch round-robin, acknowledging each member's last fetch as ``acks`` says (default
    ACCEPT), until ``quiet`` seconds pass with nothing new."""
    got: dict[ShareMember, dict[tuple[int, int], int]] = {m: {} for m in members}
    pending: dict[ShareMember, Acks] = {m: {} for m in members}
    last_new = time.monotonic()
    end = time.monotonic() + deadline
    while time.monotonic() - last_new < quiet:
        assert time.monotonic() < end
        for m in got:
            response = m.fetch(pending[m], max_records=7)
            assert all(code == Errors.NONE for code in ack_errors(response)), response
            fresh = acquired(response)
            pending[m] = {k: (acks or {}).get(m, {}).get(k, AcknowledgeType.ACCEPT)
                          for k in fresh}  # fmt: skip
            if fresh:
                last_new = time.monotonic()
                for k, count in fresh.items():
                    got[m][k] = count
    for m, pend in pending.items():
        if pend:
            m.acknowledge(pend)
    return got


def join_group(broker: BrokerProcess, group: str, topic: str, n: int) -> list[ShareMember]:
    members = [ShareMember(broker, group, topic) for _ in range(n)]
    for m in members:
        m.heartbeat()
    for m in members:
        m.heartbeat()
        assert m.topic_id is not None and m.partitions
        m.fetch()  # opens the session; creates the share-partitions at the log end (latest)
    return members


def test_two_members_share_every_record_once(broker: BrokerProcess) -> None:
    topic, group = unique("share"), unique("sg")
    broker.create_topic(topic, 2)
    a, b = join_group(broker, group, topic, 2)
    try:
        produce(broker, topic, 2, 40)
        got = drain([a, b])
        assert got[a] and got[b], "both members received records"
        assert not set(got[a]) & set(got[b])
        assert set(got[a]) | set(got[b]) == {(i % 2, i // 2) for i in range(40)}
        assert set(got[a].values()) | set(got[b].values()) == {1}
        # All accepted: nothing comes again.
        assert acquired(a.fetch(max_wait=300)) == {} and acquired(b.fetch(max_wait=300)) == {}
        described = a.wire.call(request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}))  # fmt: skip
        (g,) = described.groups
        assert g.error_code == Errors.NONE and g.group_state == "Stable"
        assert {m.member_id for m in g.members} == {a.member_id, b.member_id}
    finally:
        for m in (a, b):
            m.heartbeat(leave=True)
            m.close()


def test_released_comes_back_rejected_and_over_the_limit_do_not(broker: BrokerProcess) -> None:
    topic, group = unique("share"), unique("sg")
    broker.create_topic(topic, 1)
    (a, b) = join_group(broker, group, topic, 2)
    try:
        produce(broker, topic, 1, 3)
        first = acquired(a.fetch(max_wait=2000))
        assert set(first) == {(0, 0), (0, 1), (0, 2)}
        # Release 0, reject 1, accept 2: b gets 0 again (its 2nd delivery), never 1 or 2.
        response = a.acknowledge({(0, 0): AcknowledgeType.RELEASE, (0, 1): AcknowledgeType.REJECT,
                                  (0, 2): AcknowledgeType.ACCEPT})  # fmt: skip
        assert ack_errors(response) == [Errors.NONE]
        assert acquired(b.fetch(max_wait=2000)) == {(0, 0): 2}
        # Released up to the delivery limit (5): then archived, never delivered again.
        count = 2
        holder, other = b, a
        while True:
            holder.acknowledge({(0, 0): AcknowledgeType.RELEASE})
            again = acquired(other.fetch(max_wait=300))
            if count == 5:
                assert again == {}
                break
            count += 1
            assert again == {(0, 0): count}
            holder, other = other, holder
        assert acquired(a.fetch(max_wait=300)) == {} and acquired(b.fetch(max_wait=300)) == {}
        # Acknowledging what one does not hold is refused, and changes nothing.
        response = a.acknowledge({(0, 2): AcknowledgeType.RELEASE})
        assert ack_errors(response) != [Errors.NONE]
    finally:
        for m in (a, b):
            m.close()


def test_session_epochs(broker: BrokerProcess) -> None:
    topic, group = unique("share"), unique("sg")
    broker.create_topic(topic, 1)
    (a,) = join_group(broker, group, topic, 1)
    try:
        a.session_epoch = 5  # the session is at 1
        assert a.fetch().error_code != Errors.NONE
        stranger = ShareMember(broker, group, topic)
        stranger.topic_id, stranger.partitions, stranger.session_epoch = a.topic_id, [0], 3
        assert stranger.acknowledge({(0, 0): AcknowledgeType.ACCEPT}).error_code != Errors.NONE
        stranger.close()
        # A new session (epoch 0) replaces the old one; records the old one held come back.
        a.session_epoch = 0
        produce(broker, topic, 1, 2)
        assert set(acquired(a.fetch(max_wait=2000))) == {(0, 0), (0, 1)}
        a.session_epoch = 0
        assert acquired(a.fetch(max_wait=2000)) == {(0, 0): 2, (0, 1): 2}
        # Epoch -1 closes the session after its acknowledgements: 0 accepted, 1 released.
        response = a.fetch({(0, 0): AcknowledgeType.ACCEPT}, final=True)
        assert ack_errors(response) == [Errors.NONE]
        a.session_epoch = 0
        assert acquired(a.fetch(max_wait=2000)) == {(0, 1): 3}
    finally:
        a.close()


def test_kill_9_keeps_what_was_acknowledged(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group = "share-restart", "sg-restart"
    broker.create_topic(topic, 2)
    (a,) = join_group(broker, group, topic, 1)
    produce(broker, topic, 2, 20)
    held: dict[tuple[int, int], int] = {}
    deadline = time.monotonic() + 20
    while len(held) < 20:
        assert time.monotonic() < deadline
        held.update(acquired(a.fetch(max_wait=500)))
    accepted = {k for k in held if k[1] % 3 == 0}
    rejected = {k for k in held if k[1] % 3 == 1}
    acks = {k: AcknowledgeType.ACCEPT for k in accepted}
    acks.update({k: AcknowledgeType.REJECT for k in rejected})
    assert ack_errors(a.acknowledge(acks)) == [Errors.NONE, Errors.NONE]
    a.close()
    broker.restart(kill=True)
    b = ShareMember(broker, group, topic)
    b.heartbeat()
    try:
        again = drain([b])[b]
        # Not acknowledged (still acquired at the kill): delivered again; done with: never.
        assert set(again) == set(held) - accepted - rejected
    finally:
        b.close()


def test_a_state_not_writable_yet_gives_no_records_and_no_error(broker: BrokerProcess) -> None:
    """A share-partition whose state cannot be committed in ``__share_group_state`` (here the
    topic asks for two in-sync replicas of a standalone broker) gives no records and no
    error until it can, as Kafka answers a share-partition not initialized yet:
    librdkafka's share consumer raises LEADER_NOT_AVAILABLE to the application."""
    topic, group = unique("share"), unique("sg")
    broker.create_topic(topic, 1)
    warm = join_group(broker, unique("sg"), topic, 1)[0]  # creates __share_group_state
    warm.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def state_min_insync(n: int) -> None:
        entry = ConfigEntry(
            "min.insync.replicas", str(n), incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource("topic", STATE_TOPIC, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    member = ShareMember(broker, group, topic)
    state_min_insync(2)
    try:
        member.heartbeat()
        member.heartbeat()
        produce(broker, topic, 1, 5)
        response = member.fetch(max_wait=300)
        assert acquired(response) == {}  # no error either: acquired() checks every code
    finally:
        state_min_insync(1)  # as a standalone broker creates it
    try:
        deadline = time.monotonic() + 30
        got: dict[tuple[int, int], int] = {}
        while not got:
            assert time.monotonic() < deadline, "expected records once the state is writable"
            got = acquired(member.fetch(max_wait=300))
        assert set(got) == {(0, i) for i in range(5)}
    finally:
        member.heartbeat(leave=True)
        member.close()
