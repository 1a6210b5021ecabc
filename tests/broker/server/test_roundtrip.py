"""confluent-kafka (librdkafka) end to end: what is produced comes back byte for byte.

Every message produced must come back with the same key, value, headers and CreateTime
timestamp, in partition order — for each compression codec, with and without idempotence,
with null keys, null and empty values and headers with null values. The broker stores the
producer's batches as sent (it only stamps offsets and the leader epoch into their headers),
so anything else would mean it damaged a batch.
"""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

from sluice.broker.log import records
from sluice.broker.log.record_batch import HEADER_SIZE, iter_batches
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import (
    Msg,
    assert_same_messages,
    consume,
    consumer,
    poll_messages,
    produce,
    sample_messages,
    unique,
)
from tests.broker.server.wire import WireClient

pytestmark = pytest.mark.broker

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # attribute bits 0-2


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_byte_identical(broker: BrokerProcess, codec: str, idempotent: bool) -> None:
    topic = unique(f"rt-{codec}")
    create_topic(broker.bootstrap, topic, partitions=2)
    per_partition = {p: sample_messages(120, tag=f"{codec}{p}") for p in (0, 1)}
    for p, msgs in per_partition.items():
        delivered = produce(
            broker.bootstrap,
            topic,
            msgs,
            partition=p,
            compression_type=codec,
            enable_idempotence=idempotent,
            batch_num_messages=40,  # several batches per partition
        )
        assert sorted(d.offset for d in delivered) == list(range(len(msgs)))
        assert {d.partition for d in delivered} == {p}
    got = consume(broker.bootstrap, topic, {p: len(m) for p, m in per_partition.items()})
    for p, msgs in per_partition.items():
        assert_same_messages(msgs, got[p])
        assert [m.offset() for m in got[p]] == list(range(len(msgs)))
    # The batches on the broker really are compressed with the codec (librdkafka quietly
    # sends them uncompressed to a broker it believes too old), and stored as sent. The one
    # exception is librdkafka's own rule (rdkafka_msgset_writer.c): a batch whose compressed
    # records would be larger than the plain ones is sent uncompressed — so an uncompressed
    # batch is accepted only when compressing its records would not have shrunk them much
    # (within 10%: our codec library and librdkafka's need not agree to the byte).
    with WireClient(broker.port) as wire:
        stored = bytearray(wire.fetch(topic, 0, 0).records)
    headers = list(iter_batches(stored))
    assert len(headers) >= 3
    assert CODECS[codec] in {h.compression for h in headers}
    for h in headers:
        if h.compression == CODECS[codec]:
            continue
        assert h.compression == 0, f"batch at {h.base_offset} has codec {h.compression}"
        plain = bytes(stored[h.position + HEADER_SIZE : h.position + h.size])
        assert len(records.compress(CODECS[codec], plain)) * 10 > len(plain) * 9, (
            f"batch at {h.base_offset} ({h.record_count} records) left uncompressed "
            "although the codec would have shrunk it"
        )
    assert all((h.producer_id >= 0) == idempotent for h in headers)


def test_exact_create_time_and_large_values(broker: BrokerProcess) -> None:
    topic = unique("ts")
    create_topic(broker.bootstrap, topic)
    chosen = 1_234_567_890_123
    msgs = [
        Msg(b"exact", b"at a chosen time", (), chosen),
        Msg(b"early", b"\x00" * 10, (("h", b""),), 1),  # 1 ms after the epoch
        Msg(None, bytes(range(256)) * 2000, (), chosen + 5),  # 512 kB, one record
    ]
    produce(broker.bootstrap, topic, msgs, partition=0, compression_type="none")
    got = consume(broker.bootstrap, topic, {0: len(msgs)})[0]
    assert_same_messages(msgs, got)
    assert got[0].timestamp() == (1, chosen)  # TIMESTAMP_CREATE_TIME


def test_assign_seek_and_watermarks(broker: BrokerProcess) -> None:
    topic = unique("seek")
    create_topic(broker.bootstrap, topic)
    msgs = [Msg(b"k", b"v%d" % i, (), 1_700_000_000_000 + i) for i in range(30)]
    produce(broker.bootstrap, topic, msgs, partition=0)
    c = consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 30)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        first = poll_messages(c, 5)
        assert [m.offset() for m in first] == [0, 1, 2, 3, 4]
        c.seek(TopicPartition(topic, 0, 20))
        after_seek = poll_messages(c, 10)
        assert [m.offset() for m in after_seek] == list(range(20, 30))
        assert after_seek[0].value() == b"v20"
        c.seek(TopicPartition(topic, 0, 7))  # rewind (paper §3.2: consumers may re-read)
        assert poll_messages(c, 1)[0].value() == b"v7"
        assert c.position([TopicPartition(topic, 0)])[0].offset == 8
    finally:
        c.close()


def test_assign_at_end_sees_only_new_messages(broker: BrokerProcess) -> None:
    topic = unique("end")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"old")], partition=0)
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        assert c.poll(1.0) is None
        produce(broker.bootstrap, topic, [Msg(None, b"new")], partition=0)
        got = poll_messages(c, 1)
        assert (got[0].offset(), got[0].value()) == (1, b"new")
    finally:
        c.close()


def test_offsets_for_times(broker: BrokerProcess) -> None:
    topic = unique("times")
    create_topic(broker.bootstrap, topic)
    base = 1_600_000_000_000
    msgs = [Msg(None, b"%d" % i, (), base + i * 1000) for i in range(50)]
    produce(broker.bootstrap, topic, msgs, partition=0, batch_num_messages=7)
    c = consumer(broker.bootstrap)
    try:
        cases = {
            base - 1: 0,  # before everything: the first message
            base: 0,
            base + 1: 1,  # between two timestamps: the first at or after
            base + 20_000: 20,
            base + 49_000: 49,
            base + 49_001: -1,  # after everything: none (the client reports -1)
        }
        for timestamp, expected in cases.items():
            found = c.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)
            assert found[0].error is None
            assert found[0].offset == expected, f"timestamp {timestamp}"
    finally:
        c.close()


def test_committed_offsets_round_trip(broker: BrokerProcess) -> None:
    topic = unique("commit")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [Msg(None, b"x")] * 10, partition=0)
    group = unique("group")
    c = consumer(broker.bootstrap, group_id=group)
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < 0  # none yet
        c.commit(
            offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 0)], asynchronous=False
        )
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 7), (1, 0)]
    finally:
        c.close()
    # Another consumer of the group resumes from the committed offset.
    c = consumer(broker.bootstrap, group_id=group)
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 7
        c.assign([TopicPartition(topic, 0)])  # no offset: start from the committed one
        assert poll_messages(c, 3)[0].offset() == 7
    finally:
        c.close()
