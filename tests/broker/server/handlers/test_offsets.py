"""OffsetCommit and OffsetFetch against a standalone broker, by hand over the wire, as an
``assign()`` consumer commits (generation -1, no member id): what is committed is fetched
back; a partition that does not exist is refused and nothing of it is stored; OffsetFetch
v7's ``require_stable`` (KIP-447) answers UNSTABLE_OFFSET_COMMIT while a transaction holds
an offset for the partition."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import txn_producer, unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _commit(wire: WireClient, group: str, topic: str, offsets: dict[int, int]) -> Any:
    body = request(
        ApiKey.OFFSET_COMMIT,
        2,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_metadata": "m"}
                        for p, o in offsets.items()
                    ],
                }
            ],
        },
    )
    return wire.call(body)


def _fetch(
    wire: WireClient,
    group: str,
    topic: str,
    partitions: list[int],
    version: int = 1,
    require_stable: bool = False,
) -> dict[int, Any]:
    body = request(
        ApiKey.OFFSET_FETCH,
        version,
        {"group_id": group, "require_stable": require_stable,
         "topics": [{"name": topic, "partition_indexes": partitions}]},
    )  # fmt: skip
    (answered,) = wire.call(body).topics
    return {p.partition_index: p for p in answered.partitions}


def test_committed_offsets_are_fetched_back(broker: BrokerProcess) -> None:
    topic, group = unique("offsets"), unique("offsets-group")
    create_topic(broker.bootstrap, topic, partitions=2)
    with WireClient(broker.port) as wire:
        before = _fetch(wire, group, topic, [0, 1])
        assert [(p.error_code, p.committed_offset) for p in before.values()] == [
            (Errors.NONE, -1),
            (Errors.NONE, -1),
        ]
        response = _commit(wire, group, topic, {0: 7, 1: 3})
        assert [p.error_code for p in response.topics[0].partitions] == [Errors.NONE] * 2
        after = _fetch(wire, group, topic, [0, 1])
    assert {p: (a.error_code, a.committed_offset, a.metadata) for p, a in after.items()} == {
        0: (Errors.NONE, 7, "m"),
        1: (Errors.NONE, 3, "m"),
    }


def test_a_partition_that_does_not_exist_is_refused(broker: BrokerProcess) -> None:
    topic, group = unique("offsets"), unique("offsets-group")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        response = _commit(wire, group, topic, {0: 5, 4: 5})
        codes = {p.partition_index: p.error_code for p in response.topics[0].partitions}
        assert codes == {0: Errors.NONE, 4: Errors.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = _fetch(wire, group, topic, [0, 4])
    assert fetched[0].committed_offset == 5
    assert fetched[4].committed_offset == -1


def test_require_stable_answers_unstable_while_a_transaction_holds_an_offset(
    broker: BrokerProcess,
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic, group = unique("stable"), unique("stable-group")
    create_topic(broker.bootstrap, topic, partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    producer = txn_producer(broker.bootstrap, unique("stable-tx"))
    try:
        with WireClient(broker.port) as wire:
            _commit(wire, group, topic, {0: 5, 1: 6})
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, 9)], consumer.consumer_group_metadata(), 30
            )
            stable = _fetch(wire, group, topic, [0, 1], version=7, require_stable=True)
            assert {p: (a.error_code, a.committed_offset) for p, a in stable.items()} == {
                0: (Errors.UNSTABLE_OFFSET_COMMIT, -1),  # retriable: the client asks again
                1: (Errors.NONE, 6),  # no transaction holds an offset for it
            }
            # Without require_stable (and before v7) the committed offset is answered.
            for version, flag in ((7, False), (6, False)):
                got = _fetch(wire, group, topic, [0], version=version, require_stable=flag)
                assert (got[0].error_code, got[0].committed_offset) == (Errors.NONE, 5)
            producer.commit_transaction(30)
            after = _fetch(wire, group, topic, [0], version=7, require_stable=True)
            assert (after[0].error_code, after[0].committed_offset) == (Errors.NONE, 9)
    finally:
        consumer.close()


def test_offset_for_leader_epoch_v4_answers_as_v3(broker: BrokerProcess) -> None:
    # v4 (Kafka 2.8's, sent by kafka-python pinned to 2.8) is v3 made flexible. (Its semantics
    # are test_epochs'; this checks the flexible version reaches the handler and comes back.)
    from sluice.broker.log.records import encode_batch

    topic = unique("epochs-v4")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        assert wire.produce(topic, 0, encode_batch([(None, b"a"), (None, b"b")])).error_code == 0
        answers = []
        for version in (3, 4):
            body = request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {
                "replica_id": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
                    {"partition": 3, "current_leader_epoch": -1, "leader_epoch": 0},
                ]}],
            })  # fmt: skip
            answers.append([
                (p.partition, p.error_code, p.leader_epoch, p.end_offset)
                for p in wire.call(body).topics[0].partitions
            ])  # fmt: skip
    assert answers[0] == answers[1] == [
        (0, Errors.NONE, 0, 2), (3, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]  # fmt: skip
