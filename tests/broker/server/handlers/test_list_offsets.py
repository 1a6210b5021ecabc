"""ListOffsets against a standalone broker: v0 (kafka-python's old clients), answered as Kafka
answers it."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def test_list_offsets_v0_is_answered(broker: BrokerProcess) -> None:
    topic = unique("v0")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x") for _ in range(3)], partition=0)
    with WireClient(broker.port) as client:
        for timestamp, expected in ((-1, [3, 0]), (-2, [0])):
            body = request(
                ApiKey.LIST_OFFSETS, 0,
                {"replica_id": -1,
                 "topics": [{"name": topic, "partitions": [
                     {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": 5}]}]},
            )  # fmt: skip
            answer = client.call(body).topics[0].partitions[0]
            assert answer.error_code == Errors.NONE
            assert list(answer.old_style_offsets) == expected
