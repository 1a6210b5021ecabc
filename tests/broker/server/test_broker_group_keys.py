"""The broker's ``group.consumer.*`` keys reach its KIP-848 coordinator: a heartbeat is answered
with the configured interval and the group is assigned by the first configured assignor."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.handlers.test_consumer_groups import _describe, _join
from tests.broker.server.wire import WireClient

pytestmark = [pytest.mark.broker]


def test_group_consumer_keys_from_the_broker_file(tmp_path: Path) -> None:
    props = {
        "group.consumer.heartbeat.interval.ms": "7000",
        "group.consumer.max.heartbeat.interval.ms": "15000",
        "group.consumer.assignors": "range,uniform",
    }
    broker = BrokerProcess(tmp_path, props, log_level="warning").start()
    try:
        create_topic(broker.bootstrap, "keys", partitions=2)
        with WireClient(broker.port) as client:
            answer = _join(client, "keys-group", "m1", "keys")
            assert answer.error_code == Errors.NONE
            assert answer.heartbeat_interval.total_seconds() == 7
            assert _describe(client, "keys-group").assignor_name == "range"
    finally:
        broker.stop()
