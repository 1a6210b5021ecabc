"""OffsetForLeaderEpoch against a standalone broker, by hand over the wire: where an epoch
ended in the leader's log, and the leader-epoch checks (KIP-101, KIP-320)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _epoch_end(wire: WireClient, topic: str, leader_epoch: int, current: int = -1) -> Any:
    body = request(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        3,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": current,
                            "leader_epoch": leader_epoch,
                        }
                    ],
                }
            ],
        },
    )
    return wire.call(body).topics[0].partitions[0]


def test_the_current_epoch_ends_at_the_log_end(broker: BrokerProcess) -> None:
    topic = unique("epochs")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        batch = encode_batch([(None, b"a"), (None, b"b"), (None, b"c")])
        assert wire.produce(topic, 0, batch).error_code == Errors.NONE
        answer = _epoch_end(wire, topic, 0)
        # Standalone, the only leader epoch is 0, and it ends at the log end.
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (Errors.NONE, 0, 3)
        # An epoch newer than any in the log: the largest one <= it, the current one.
        later = _epoch_end(wire, topic, 5)
        assert (later.error_code, later.leader_epoch, later.end_offset) == (Errors.NONE, 0, 3)


def test_leader_epoch_checks_and_unknown_partitions(broker: BrokerProcess) -> None:
    topic = unique("epochs")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        # The client believes in a newer leader epoch than this leader has.
        assert _epoch_end(wire, topic, 0, current=1).error_code == Errors.UNKNOWN_LEADER_EPOCH
        assert _epoch_end(wire, topic, 0, current=0).error_code == Errors.NONE
        missing = _epoch_end(wire, unique("no-such-topic"), 0)
        assert missing.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert (missing.leader_epoch, missing.end_offset) == (-1, -1)
