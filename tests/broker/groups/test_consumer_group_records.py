"""Consumer groups (KIP-848) in ``__consumer_offsets``: the records Kafka 4 writes, their bytes,
a group rendered and rebuilt, and a standalone broker restarted (kill -9) keeping the group."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from sluice.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from sluice.broker.groups.consumer_group_records import group_records, load_group
from sluice.broker.groups.offsets_topic_records import (
    ConsumerGroupMetadataValue,
    ConsumerMemberKey,
    decode_record_key,
    encode_record_key,
    encode_value,
)
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request


def test_bytes_as_kafka_4_writes_them() -> None:
    # Key: the record type (INT16) then the non-flexible key fields.
    key = encode_record_key(8, ConsumerMemberKey("g", "m"))
    assert key == struct.pack(">hh", 8, 1) + b"g" + struct.pack(">h", 1) + b"m"
    # Value: version 0, flexible: the epoch, then the tagged fields (none while the hash is 0;
    # with one: tag 0, size 8, the INT64).
    assert encode_value("ConsumerGroupMetadataValue", 0, ConsumerGroupMetadataValue(5)) == (
        struct.pack(">hi", 0, 5) + b"\x00"
    )
    hashed = encode_value("ConsumerGroupMetadataValue", 0, ConsumerGroupMetadataValue(5, 9))
    assert hashed == struct.pack(">hi", 0, 5) + b"\x01\x00\x08" + struct.pack(">q", 9)


def test_a_group_rendered_and_rebuilt() -> None:
    topics = {"t": 4}
    ids = {"t": uuid.UUID(int=42)}
    c = ConsumerGroupCoordinator()
    a = c.heartbeat("g", "m1", 0, topics=topics, rebalance_timeout_ms=1000,
                    subscribed_names=["t"], instance_id="i1")  # fmt: skip
    c.heartbeat("g", "m2", 0, topics=topics, rebalance_timeout_ms=1000, subscribed_names=["t"])
    c.heartbeat("g", "m1", 1, topics=topics, owned=a.assignment)  # m1 revoking: unrevoked state
    group = c.groups["g"]
    records = group_records(group, ids)
    assert sorted(decode_record_key(k)[0] for k in records) == [3, 5, 5, 6, 7, 7, 8, 8]
    back = load_group("g", records, {v: k for k, v in ids.items()}, session_deadline=0.0)
    assert (back.group_epoch, back.target_epoch) == (group.group_epoch, group.target_epoch)
    assert back.target == group.target and back.owners == group.owners
    for member_id, m in group.members.items():
        b = back.members[member_id]
        assert (b.member_epoch, b.previous_member_epoch, b.state, b.assigned,
                b.pending_revocation, b.instance_id, b.subscribed_names) == (
            m.member_epoch, m.previous_member_epoch, m.state, m.assigned,
            m.pending_revocation, m.instance_id, m.subscribed_names)  # fmt: skip
    assert back.static_members == {"i1": "m1"}


def _beat(client: WireClient, group: str, member: str, epoch: int, **kw: Any) -> Any:
    values = {"group_id": group, "member_id": member, "member_epoch": epoch,
              "topic_partitions": None, **kw}  # fmt: skip
    return client.call(request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values))


def test_a_restarted_broker_keeps_the_group(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker")
    broker.start()
    try:
        topic, group = unique("cgr"), unique("cgr-group")
        broker.create_topic(topic, 4)
        join = {"rebalance_timeout": 30_000, "subscribed_topic_names": [topic],
                "topic_partitions": []}  # fmt: skip
        with WireClient(broker.port) as client:
            a = _beat(client, group, "m1", 0, **join)
            owned = [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                     for tp in a.assignment.topic_partitions]  # fmt: skip
            assert _beat(client, group, "m1", 1, topic_partitions=owned).error_code == 0
        broker.restart(kill=True)
        with WireClient(broker.port) as client:
            # The member goes on at its epoch, owning what it owned: nothing moves.
            r = _beat(client, group, "m1", 1, topic_partitions=owned)
            assert (r.error_code, r.member_epoch, r.assignment) == (Errors.NONE, 1, None)
            asked = {"group_ids": [group], "include_authorized_operations": False}
            body = request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, asked)
            described = client.call(body).groups[0]
            assert (described.group_state, described.group_epoch) == ("Stable", 1)
            assert [m.member_id for m in described.members] == ["m1"]
        # A reader of __consumer_offsets sees Kafka 4's record types for the group.
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("r"),
                           "enable.auto.commit": False})  # fmt: skip
        try:
            seen: set[int] = set()
            parts = [TopicPartition("__consumer_offsets", p, 0) for p in range(50)]
            reader.assign(parts)
            for _ in range(40):
                message = reader.poll(0.2)
                if message is not None and message.error() is None and message.key():
                    key_type, key = decode_record_key(message.key())
                    if key is not None and getattr(key, "group", None) == group:
                        seen.add(key_type)
            assert seen == {3, 5, 6, 7, 8}
        finally:
            reader.close()
    finally:
        broker.stop()
