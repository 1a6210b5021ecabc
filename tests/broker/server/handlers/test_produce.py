"""Idempotent produce on the wire: the exact bytes a producer would resend after a lost
response, and the sequence errors it must get for a gap or an old epoch.

The batches are built with ``sluice.broker.log.records.encode_batch`` (producer id, epoch and base
sequence in the header, as librdkafka writes them) and sent in hand-built Produce v8 requests,
so each resend is byte-for-byte the same request.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch, encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, frame_of, request

pytestmark = pytest.mark.broker


def _batch(pid: int, epoch: int, seq: int, n: int, tag: str) -> bytes:
    records = [(f"k{seq + i}".encode(), f"{tag}-{seq + i}".encode()) for i in range(n)]
    return encode_batch(
        records,
        timestamps=[1_700_000_000_000 + i for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def _stored_values(wire: WireClient, topic: str) -> list[bytes | None]:
    records = bytearray(wire.fetch(topic, 0, 0).records)
    return [r.value for h in iter_batches(records) for r in decode_batch(records, h.position)]


def test_resent_batch_is_acknowledged_with_its_original_offset(broker: BrokerProcess) -> None:
    topic = unique("idem")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        pid, epoch = wire.init_producer_id()
        # Someone else's records first, so the producer's batch does not start at offset 0.
        assert wire.produce(topic, 0, encode_batch([(None, b"other")])).error_code == Errors.NONE
        first = _batch(pid, epoch, 0, 5, "a")
        answer = wire.produce(topic, 0, first)
        assert (answer.error_code, answer.base_offset) == (Errors.NONE, 1)
        again = wire.produce(topic, 0, first)  # the same bytes: a retry after a lost response
        assert (again.error_code, again.base_offset) == (Errors.NONE, 1)
        second = wire.produce(topic, 0, _batch(pid, epoch, 5, 3, "a"))
        assert (second.error_code, second.base_offset) == (Errors.NONE, 6)
        # An older batch among the last five is still recognised as a duplicate.
        assert wire.produce(topic, 0, first).base_offset == 1
        assert wire.list_offset(topic, 0, -1) == 9
        values = _stored_values(wire, topic)
    assert values == [b"other"] + [b"a-%d" % i for i in range(8)]  # each record once


def test_duplicate_on_another_connection(broker: BrokerProcess) -> None:
    """A producer that reconnects and resends is still recognised: the state is per
    partition, not per connection."""
    topic = unique("idem-reconnect")
    create_topic(broker.bootstrap, topic)
    batch = None
    with WireClient(broker.port) as wire:
        pid, epoch = wire.init_producer_id()
        batch = _batch(pid, epoch, 0, 4, "r")
        assert wire.produce(topic, 0, batch).base_offset == 0
    with WireClient(broker.port) as wire:
        assert wire.produce(topic, 0, batch).base_offset == 0
        assert wire.list_offset(topic, 0, -1) == 4


def test_sequence_gap_is_out_of_order(broker: BrokerProcess) -> None:
    topic = unique("gap")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        pid, epoch = wire.init_producer_id()
        assert wire.produce(topic, 0, _batch(pid, epoch, 0, 3, "g")).error_code == Errors.NONE
        gap = wire.produce(topic, 0, _batch(pid, epoch, 5, 2, "g"))  # expected sequence 3
        assert gap.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
        assert gap.base_offset == -1
        assert "expected sequence 3, found 5" in (gap.error_message or "")
        # The gap wrote nothing, and the right next sequence is still accepted.
        assert wire.produce(topic, 0, _batch(pid, epoch, 3, 2, "g")).base_offset == 3
        assert wire.list_offset(topic, 0, -1) == 5


def test_unknown_producer_and_stale_epoch(broker: BrokerProcess) -> None:
    topic = unique("epoch")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        pid, _ = wire.init_producer_id()
        # The first batch this partition sees from a producer must have sequence 0.
        unknown = wire.produce(topic, 0, _batch(pid, 0, 7, 1, "u"))
        assert unknown.error_code == Errors.UNKNOWN_PRODUCER_ID
        assert wire.produce(topic, 0, _batch(pid, 3, 0, 1, "u")).error_code == Errors.NONE
        stale = wire.produce(topic, 0, _batch(pid, 2, 1, 1, "u"))
        assert stale.error_code == Errors.INVALID_PRODUCER_EPOCH
        assert wire.list_offset(topic, 0, -1) == 1


def test_producer_ids_are_unique(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        ids = {wire.init_producer_id()[0] for _ in range(5)}
    assert len(ids) == 5


@pytest.mark.parametrize("version", [3, 8])
def test_invalid_acks_is_answered_per_partition(broker: BrokerProcess, version: int) -> None:
    """acks=2 is refused with INVALID_REQUIRED_ACKS for every partition, nothing appended,
    and the connection stays usable (found by the fuzz test: the v8 answer lacked fields)."""
    topic = unique("acks")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        answer = wire.produce(topic, 0, encode_batch([(None, b"x")]), acks=2, version=version)
        assert answer.error_code == Errors.INVALID_REQUIRED_ACKS
        assert answer.base_offset == -1
        assert wire.list_offset(topic, 0, -1) == 0


# -- per-record errors (KIP-467) ------------------------------------------------------------------


def _keyless_every_tenth(n: int) -> list[tuple[bytes | None, bytes]]:
    """``n`` records, those at index 3, 13, 23 ... without a key."""
    return [(None if i % 10 == 3 else f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]


def test_keyless_records_to_a_compacted_topic_are_named_in_record_errors(
    broker: BrokerProcess,
) -> None:
    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    batch = encode_batch(_keyless_every_tenth(100))
    with WireClient(broker.port) as wire:
        answer = wire.produce(topic, 0, batch)
        assert answer.error_code == Errors.INVALID_RECORD
        assert [e.batch_index for e in answer.record_errors] == list(range(3, 100, 10))
        assert all(
            e.batch_index_error_message
            == f"Compacted topic cannot accept message without key in topic partition {topic}-0."
            for e in answer.record_errors
        )
        assert answer.error_message is not None and "found 10 without one" in answer.error_message
        # Before v8 there is no field for them: the batch is refused whole, as before.
        old = wire.produce(topic, 0, batch, version=7)
        assert old.error_code == Errors.INVALID_RECORD
        # Nothing of either batch was written; a batch with every key is.
        assert wire.list_offset(topic, 0, -1) == 0
        keyed = encode_batch([(b"k", b"v")] * 3)
        assert wire.produce(topic, 0, keyed).error_code == Errors.NONE


def test_record_errors_in_the_raw_response_bytes(broker: BrokerProcess) -> None:
    """The v8 partition answer as Kafka writes it: Index, ErrorCode, BaseOffset,
    LogAppendTime, LogStartOffset, RecordErrors [BatchIndex int32, message string],
    ErrorMessage string — read here from the frame, not through a codec."""
    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    records = [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")]
    body = request(
        ApiKey.PRODUCE,
        8,
        {
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(records)}]}
            ],
        },
    )
    with WireClient(broker.port) as wire:
        wire.send_raw(frame_of(body, 77))
        frame = wire.recv_frame()
    assert frame is not None
    # The frame starts after the size prefix: correlation id, topics count, topic name.
    correlation_id, topics = struct.unpack_from(">ii", frame, 0)
    assert (correlation_id, topics) == (77, 1)
    (name_len,) = struct.unpack_from(">h", frame, 8)
    assert frame[10 : 10 + name_len].decode() == topic
    pos = 10 + name_len
    (partitions, index, code, base, append_time, start, errors) = struct.unpack_from(
        ">iihqqqi", frame, pos
    )
    assert (partitions, index, code, base, errors) == (1, 0, Errors.INVALID_RECORD, -1, 2)
    pos += struct.calcsize(">iihqqqi")
    seen = []
    for _ in range(errors):
        (batch_index, n) = struct.unpack_from(">ih", frame, pos)
        pos += 6
        seen.append((batch_index, frame[pos : pos + n].decode()))
        pos += n
    assert [i for i, _ in seen] == [1, 3]
    assert all("without key" in message for _, message in seen)
    (n,) = struct.unpack_from(">h", frame, pos)
    assert "found 2 without one" in frame[pos + 2 : pos + 2 + n].decode()
    # Then only the throttle time.
    assert len(frame) == pos + 2 + n + 4


def test_confluent_kafka_fails_the_keyless_records_and_the_rest_differently(
    broker: BrokerProcess,
) -> None:
    """librdkafka reads record_errors: the named messages fail with INVALID_RECORD, the
    batch's others with _INVALID_DIFFERENT_RECORD (and can be produced again)."""
    from confluent_kafka import KafkaError, Producer

    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 1000,  # the 100 messages go in one batch
            "batch.num.messages": 1000,
            "message.send.max.retries": 0,
        }
    )
    outcome: dict[int, int] = {}

    def report(err: Any, msg: Any) -> None:
        outcome[int(msg.value().decode()[1:])] = 0 if err is None else err.code()

    for i, (key, value) in enumerate(_keyless_every_tenth(100)):
        producer.produce(topic, value=value, key=key, partition=0, on_delivery=report)
        assert i == int(value.decode()[1:])
    assert producer.flush(30) == 0
    assert len(outcome) == 100
    keyless = {i for i in range(100) if i % 10 == 3}
    assert {i for i, code in outcome.items() if code == KafkaError.INVALID_RECORD} == keyless
    assert {
        i for i, code in outcome.items() if code == KafkaError._INVALID_DIFFERENT_RECORD
    } == set(range(100)) - keyless
