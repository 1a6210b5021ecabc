"""Idempotent produce on the wire: the exact bytes a producer would resend after a lost
response, and the sequence errors it must get for a gap or an old epoch.

The batches are built with ``sluice.broker.log.records.encode_batch`` (producer id, epoch and base
sequence in the header, as librdkafka writes them) and sent in hand-built Produce v8 requests,
so each resend is byte-for-byte the same request.
"""

from __future__ import annotations

import pytest

from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch, encode_batch
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient

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
