"""kafka-python 3 against the broker: its default producer (idempotent, acks=all), a consumer
with ``assign()``, and ``KafkaAdminClient.create_topics``.

kafka-python infers the broker's version from the ApiVersions ranges (protocol.md): record
batches v2 need it to infer >= 0.11, ``create_topics`` with -1 partitions >= 2.4. These tests
pass only if what Sluice advertises reads as new enough.
"""

from __future__ import annotations

import warnings

import pytest

from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import Msg, assert_same_messages, consume, unique

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    pytest.importorskip("kafka")
    import kafka.codec
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = [
    pytest.mark.broker,
    # The same two calls, when a schema is first loaded lazily during a test; nothing else.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def test_admin_create_topics(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="sluice-test")
    try:
        explicit, defaults = unique("kp-admin"), unique("kp-admin")
        response = admin.create_topics(
            [NewTopic(explicit, 3, 1), NewTopic(defaults, -1, -1)], timeout_ms=10_000
        )
        assert {t["name"]: t["error_code"] for t in response["topics"]} == {
            explicit: 0,
            defaults: 0,
        }
        described = {t["name"]: t for t in admin.describe_topics([explicit, defaults])}
        assert len(described[explicit]["partitions"]) == 3
        assert len(described[defaults]["partitions"]) == 1  # num.partitions
        assert explicit in admin.list_topics()
    finally:
        admin.close()


@pytest.mark.parametrize("api_version", [None, (2, 8, 0)])
def test_default_producer_and_assign_consumer(
    broker: BrokerProcess, api_version: tuple[int, ...] | None
) -> None:
    """Unpinned, kafka-python negotiates; pinned to 2.8.0 it sends Kafka 2.8's versions
    unnegotiated: Produce v9 and Fetch v12, both flexible."""
    topic = unique("kp")
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=5, api_version=api_version
    )
    try:
        assert producer.config["enable_idempotence"]  # kafka-python 3's default
        assert producer.config["acks"] == -1
        msgs = [
            # kafka-python refuses a message with neither key nor value: never both null here.
            Msg(f"k{i}".encode() if i % 4 else None, None if i % 6 == 3 else f"v{i}".encode(),
                (("n", f"{i}".encode()),) if i % 2 else (), 1_700_000_000_000 + i)
            for i in range(60)
        ]  # fmt: skip
        futures = [
            producer.send(topic, key=m.key, value=m.value, partition=0,
                          headers=list(m.headers), timestamp_ms=m.timestamp)
            for m in msgs
        ]  # fmt: skip
        producer.flush(timeout=30)
        assert [f.get(timeout=10).offset for f in futures] == list(range(60))
    finally:
        producer.close(timeout=10)

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000,
        api_version=api_version,
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = list(consumer)
    finally:
        consumer.close()
    assert [r.offset for r in records] == list(range(60))
    got = [Msg(r.key, r.value, tuple((k, v) for k, v in r.headers), r.timestamp) for r in records]
    assert got == msgs
    # And librdkafka reads kafka-python's batches the same.
    assert_same_messages(msgs, consume(broker.bootstrap, topic, {0: 60})[0])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_producer(broker: BrokerProcess, codec: str) -> None:
    available = getattr(kafka.codec, f"has_{codec}")
    if not available():
        # kafka-python compresses with python-snappy, lz4 and zstandard, which the project
        # does not depend on (librdkafka covers every codec in test_roundtrip).
        pytest.skip(f"kafka-python has no library for {codec} here")
    topic = unique(f"kp-{codec}")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
    try:
        for i in range(20):
            producer.send(topic, key=b"k", value=b"x" * i, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    got = consume(broker.bootstrap, topic, {0: 20})[0]
    assert [m.value() for m in got] == [b"x" * i for i in range(20)]
