"""The leader's part of a marker (``transaction_host.write_marker``, reached here through
WriteTxnMarkers) and the coordinator epoch: a partition refuses a marker from an older
transaction-coordinator epoch than the last marker it wrote for the producer id
(TRANSACTION_COORDINATOR_FENCED, Kafka's ``ProducerAppendInfo.checkCoordinatorEpoch``), the
producer's transaction stays open, and a marker of the current epoch still ends it. The
refusal survives a restart of the broker (the epoch is replayed from the log)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _txn_batch(pid: int, seq: int) -> bytes:
    return encode_batch(
        [(b"k%d" % seq, b"v%d" % seq)], producer_id=pid, producer_epoch=0, base_sequence=seq,
        transactional=True,
    )  # fmt: skip


def _marker(wire: WireClient, topic: str, pid: int, *, commit: bool, coordinator_epoch: int) -> Any:
    body = request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [0]}],
    }]})  # fmt: skip
    return Errors(wire.call(body).markers[0].topics[0].partitions[0].error_code)


def _lso(wire: WireClient, topic: str) -> int:
    body = request(ApiKey.LIST_OFFSETS, 4, {
        "replica_id": -1, "isolation_level": 1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1},
        ]}],
    })  # fmt: skip
    return int(wire.call(body).topics[0].partitions[0].offset)


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic = unique("coord-epoch")
    broker.create_topic(topic)
    with WireClient(broker.port) as wire:
        pid, _ = wire.init_producer_id()
        assert wire.produce(topic, 0, _txn_batch(pid, 0)).error_code == 0
        assert _marker(wire, topic, pid, commit=True, coordinator_epoch=7) == Errors.NONE
        assert wire.produce(topic, 0, _txn_batch(pid, 1)).error_code == 0
        assert _lso(wire, topic) == 2  # the second transaction is open
        fenced = _marker(wire, topic, pid, commit=True, coordinator_epoch=6)
        assert fenced == Errors.TRANSACTION_COORDINATOR_FENCED
        assert _lso(wire, topic) == 2
    broker.stop()
    broker.start()
    with WireClient(broker.port) as wire:
        fenced = _marker(wire, topic, pid, commit=False, coordinator_epoch=6)
        assert fenced == Errors.TRANSACTION_COORDINATOR_FENCED
        assert _marker(wire, topic, pid, commit=True, coordinator_epoch=7) == Errors.NONE
        assert _lso(wire, topic) == 4  # two records and two markers, all decided
