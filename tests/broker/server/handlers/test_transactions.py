"""Transactions end to end with librdkafka (confluent-kafka): commit and abort seen by
``read_committed`` and ``read_uncommitted`` consumers, offsets sent to a transaction visible
only after its commit, a zombie fenced by a newer producer of the same transactional id, a
producer killed mid-transaction (aborted after its timeout, readers unblocked), and a broker
restart mid-transaction."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import (
    FAST_RECONNECT,
    committed_offset,
    read_values,
    txn_producer,
    unique,
)

pytestmark = pytest.mark.broker

# A read_uncommitted consumer's OffsetFetch does not require stable offsets (KIP-447).
UNCOMMITTED = {"isolation.level": "read_uncommitted"}


def read_all(
    bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 20.0
) -> list[bytes]:
    """Values of partition 0 (see ``clients.read_values``)."""
    return read_values(bootstrap, topic, [0], isolation, expected, timeout=timeout)


def produce_txn(producer: Producer, topic: str, values: list[bytes], *, commit: bool) -> None:
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, value=v, partition=0)
    producer.flush(30)  # sent before the abort (librdkafka purges what is unsent)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_read_committed_skips_aborted_transactions(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, unique("tx"))
    produce_txn(p, topic, [b"c1-%d" % i for i in range(5)], commit=True)
    produce_txn(p, topic, [b"a1-%d" % i for i in range(4)], commit=False)
    produce_txn(p, topic, [b"c2-%d" % i for i in range(3)], commit=True)
    produce_txn(p, topic, [b"a2-%d" % i for i in range(2)], commit=False)
    committed = [b"c1-%d" % i for i in range(5)] + [b"c2-%d" % i for i in range(3)]
    assert read_all(broker.bootstrap, topic, "read_committed", 8) == committed
    everything = read_all(broker.bootstrap, topic, "read_uncommitted", 14)
    assert len(everything) == 14 and set(committed) <= set(everything)


def test_read_committed_stops_at_an_open_transaction(broker: BrokerProcess) -> None:
    topic = unique("txn-open")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, unique("tx"))
    produce_txn(p, topic, [b"before"], commit=True)
    p.begin_transaction()
    p.produce(topic, value=b"pending", partition=0)
    p.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(30)
    assert read_all(broker.bootstrap, topic, "read_committed", 1, timeout=4) == [b"before"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                  "isolation.level": "read_committed"})  # fmt: skip
    try:  # ListOffsets(latest, read_committed) answers the LSO
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] == 2
    finally:
        c.close()
    p.commit_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed", 3) == [
        b"before", b"pending", b"after"
    ]  # fmt: skip


def test_offsets_sent_to_a_transaction_are_visible_only_after_commit(
    broker: BrokerProcess,
) -> None:
    source, sink, group = unique("src"), unique("sink"), unique("group")
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    metadata = consumer.consumer_group_metadata()
    p = txn_producer(broker.bootstrap, unique("tx"))
    try:
        for offset, commit in ((7, False), (11, True)):
            p.begin_transaction()
            p.produce(sink, value=b"out-%d" % offset, partition=0)
            p.send_offsets_to_transaction([TopicPartition(source, 0, offset)], metadata, 30)
            p.flush(30)
            # Pending: invisible to a read_uncommitted fetch (require_stable false); a
            # read_committed one (librdkafka's default, OffsetFetch v7's require_stable) is
            # answered UNSTABLE_OFFSET_COMMIT and keeps asking until the transaction ends.
            assert committed_offset(broker.bootstrap, group, source, **UNCOMMITTED) < 0
            if offset == 7:
                with pytest.raises(KafkaException, match="Timed out"):
                    committed_offset(broker.bootstrap, group, source, timeout=2.0)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        assert committed_offset(broker.bootstrap, group, source) == 11
    finally:
        consumer.close()
    assert read_all(broker.bootstrap, sink, "read_committed", 1) == [b"out-11"]


def test_a_zombie_is_fenced_by_a_newer_producer(broker: BrokerProcess) -> None:
    topic, txn_id = unique("zombie"), unique("tx")
    create_topic(broker.bootstrap, topic)
    zombie = txn_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(30)
    fresh = txn_producer(broker.bootstrap, txn_id)  # aborts the zombie's transaction
    produce_txn(fresh, topic, [b"fresh"], commit=True)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"fresh"]


KILLED_PRODUCER = textwrap.dedent(
    """
    import os, sys
    from confluent_kafka import Producer
    bootstrap, topic, txn_id = sys.argv[1:]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"doomed-%d" % i, partition=0)
    p.flush(30)
    print("sent", flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_a_producer_killed_mid_transaction_is_aborted_after_its_timeout(
    broker: BrokerProcess,
) -> None:
    topic = unique("killed")
    create_topic(broker.bootstrap, topic)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_PRODUCER, broker.bootstrap, topic, unique("tx")],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert b"sent" in done.stdout, done.stderr.decode()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"later", partition=0)
    plain.flush(30)
    # Blocked behind the open transaction, then unblocked once the coordinator aborts it
    # (timeout 2 s, checked every 10 s: Kafka's default interval).
    started = time.monotonic()
    assert read_all(broker.bootstrap, topic, "read_committed", 1, timeout=30) == [b"later"]
    assert time.monotonic() - started >= 1.0
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted", 4)) == 4


@pytest.mark.parametrize("kill", [False, True])
def test_a_transaction_survives_a_broker_restart(start_broker: StartBroker, kill: bool) -> None:
    broker = start_broker()
    topic = unique("restart")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, unique("tx"), **FAST_RECONNECT)
    produce_txn(p, topic, [b"first"], commit=True)
    p.begin_transaction()
    p.produce(topic, value=b"across", partition=0)
    p.flush(30)
    broker.restart(kill=kill)
    p.commit_transaction(60)
    produce_txn(p, topic, [b"after"], commit=True)
    assert read_all(broker.bootstrap, topic, "read_committed", 3) == [b"first", b"across", b"after"]


def test_a_read_committed_reader_creates_no_transaction_state(start_broker: StartBroker) -> None:
    """librdkafka reads ``read_committed`` by default. On a broker that never saw a
    transaction there is none to resolve: its Fetch and ListOffsets leave
    ``__transaction_state`` uncreated (creating it held the event loop)."""
    broker = start_broker()
    topic = unique("plain")
    create_topic(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for value in (b"a", b"b"):
        plain.produce(topic, value=value, partition=0)
    plain.flush(30)
    assert read_all(broker.bootstrap, topic, "read_committed", 2) == [b"a", b"b"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                  "isolation.level": "read_committed"})  # fmt: skip
    try:  # ListOffsets(latest, read_committed)
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] == 2
        assert "__transaction_state" not in c.list_topics(timeout=10).topics
    finally:
        c.close()
    assert not list(broker.log_dir.glob("__transaction_state-*"))
    # The first transactional producer creates it, as before.
    txn_producer(broker.bootstrap, unique("tx"))
    assert len(list(broker.log_dir.glob("__transaction_state-*"))) > 0
