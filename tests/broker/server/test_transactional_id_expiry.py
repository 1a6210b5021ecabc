"""``transactional.id.expiration.ms`` on a real broker: an idle transactional id is removed
(a tombstone in ``__transaction_state``), so the next InitProducerId for it gets a new
producer id at epoch 0 instead of the old one's epoch bumped; an id in use keeps its
producer id. (That a reload replays the tombstone is ``tests/broker/transactions``'.)"""

from __future__ import annotations

import time

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker

EXPIRY_MS = 1_500


def _init(wire: WireClient, txn_id: str) -> tuple[int, int]:
    body = request(
        ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": txn_id, "transaction_timeout": 10_000}
    )
    deadline = time.monotonic() + 30
    while True:  # the coordinator loads its partitions on the first request
        response = wire.call(body)
        code = Errors(response.error_code)
        if code == Errors.NONE:
            return int(response.producer_id), int(response.producer_epoch)
        assert code.retriable or code == Errors.NOT_COORDINATOR, code
        assert time.monotonic() < deadline, f"InitProducerId still answers {code.name}"
        time.sleep(0.2)


def test_an_idle_transactional_id_expires(start_broker: StartBroker) -> None:
    broker = start_broker({
        "transactional.id.expiration.ms": str(EXPIRY_MS),
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
        "transaction.state.log.num.partitions": "2",
    })  # fmt: skip
    idle, busy = unique("idle-tx"), unique("busy-tx")
    with WireClient(broker.port) as wire:
        idle_pid, _ = _init(wire, idle)
        busy_pid, _ = _init(wire, busy)
        assert _init(wire, idle) == (idle_pid, 1)  # known: the same producer id, bumped
        deadline = time.monotonic() + 3 * EXPIRY_MS / 1000
        epoch = 1
        while time.monotonic() < deadline:  # keep "busy" in use meanwhile
            pid, epoch = _init(wire, busy)
            assert pid == busy_pid
            time.sleep(EXPIRY_MS / 4000)
        new_pid, new_epoch = _init(wire, idle)
        assert (new_epoch, new_pid != idle_pid) == (0, True), "the idle id did not expire"
