"""kafka-python's transactional producer against the broker: commit, abort,
``send_offsets_to_transaction``, and its ``read_committed`` consumer skipping aborted data."""

from __future__ import annotations

import warnings

import pytest

from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.handlers.test_transactions import read_all

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    pytest.importorskip("kafka")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed",
        enable_auto_commit=False, consumer_timeout_ms=3000,
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) >= expected + 5:
                break
        return values
    finally:
        consumer.close()


def test_commit_abort_and_offsets(broker: BrokerProcess) -> None:
    topic, source, group = unique("kp-txn"), unique("kp-src"), unique("kp-group")
    create_topic(broker.bootstrap, topic)
    create_topic(broker.bootstrap, source)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("tx"))
    try:
        producer.init_transactions()
        for tag, commit in ((b"c1", True), (b"ab", False), (b"c2", True)):
            producer.begin_transaction()
            for i in range(3):
                producer.send(topic, value=tag + b"-%d" % i, partition=0)
            producer.send_offsets_to_transaction(
                {TopicPartition(source, 0): OffsetAndMetadata(5 if commit else 99, "", -1)},
                group,
            )
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()
    committed = [b"c1-0", b"c1-1", b"c1-2", b"c2-0", b"c2-1", b"c2-2"]
    assert _read_committed(broker.bootstrap, topic, 6) == committed
    assert read_all(broker.bootstrap, topic, "read_committed", 6) == committed  # librdkafka too
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted", 9)) == 9
    checker = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    try:
        assert checker.committed(TopicPartition(source, 0)) == 5
    finally:
        checker.close()
