"""ListOffsets against a standalone broker: v0 (kafka-python's old clients), answered as Kafka
answers it; v6-8's MAX_TIMESTAMP (KIP-734) and EARLIEST_LOCAL over the wire and through
confluent-kafka's AdminClient, as librdkafka's test 0081 asks them."""

from __future__ import annotations

import datetime
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient, request


def _ms(value: Any) -> int:
    """A decoded timestamp field in epoch milliseconds (kio gives a datetime, -1 as None)."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


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


BASE = 10_000_000


def _list(client: WireClient, version: int, topic: str, timestamp: int, level: int = 0) -> Any:
    body = request(
        ApiKey.LIST_OFFSETS, version,
        {"replica_id": -1, "isolation_level": level,
         "topics": [{"name": topic, "partitions": [
             {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]},
    )  # fmt: skip
    return client.call(body).topics[0].partitions[0]


def test_max_timestamp_and_earliest_local_over_the_wire(broker: BrokerProcess) -> None:
    # librdkafka's test 0081 sends these: three records stamped +100, +400, +250, then a
    # fourth batch tying the largest (+400): MAX_TIMESTAMP is the first record carrying it.
    topic = unique("maxts")
    create_topic(broker.bootstrap, topic)
    stamps = [BASE + 100, BASE + 400, BASE + 250]
    produce(broker.bootstrap, topic, [Msg(None, b"m", (), t) for t in stamps], partition=0)
    produce(broker.bootstrap, topic, [Msg(None, b"tie", (), BASE + 400)], partition=0)
    with WireClient(broker.port) as client:
        for version in (7, 8):
            for level in (0, 1):  # read_uncommitted, read_committed: no transactions here
                got = _list(client, version, topic, -3, level)
                assert got.error_code == Errors.NONE
                assert (got.offset, _ms(got.timestamp)) == (1, BASE + 400), (version, level)
        earliest_local = _list(client, 8, topic, -4)
        assert (earliest_local.error_code, earliest_local.offset) == (Errors.NONE, 0)
        # v6 is v5 in the flexible encoding: latest, earliest, by timestamp.
        assert _list(client, 6, topic, -1).offset == 4
        assert _list(client, 6, topic, -2).offset == 0
        by_time = _list(client, 6, topic, BASE + 300)
        assert (by_time.offset, _ms(by_time.timestamp)) == (1, BASE + 400)
        assert _list(client, 8, topic, -5).error_code == Errors.INVALID_REQUEST  # v9's spec


def test_max_timestamp_of_an_empty_partition_is_none(broker: BrokerProcess) -> None:
    topic = unique("maxts-empty")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as client:
        got = _list(client, 7, topic, -3)
    assert (got.error_code, got.offset, _ms(got.timestamp)) == (Errors.NONE, -1, -1)


def test_admin_list_offsets_with_max_timestamp(broker: BrokerProcess) -> None:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = unique("maxts-admin")
    create_topic(broker.bootstrap, topic)
    stamps = [BASE + 100, BASE + 400, BASE + 250]
    produce(broker.bootstrap, topic, [Msg(None, b"m", (), t) for t in stamps], partition=0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    cases = [
        (OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 3), (OffsetSpec.max_timestamp(), 1),
        (OffsetSpec.for_timestamp(BASE + 50), 0), (OffsetSpec.for_timestamp(BASE + 300), 1),
        (OffsetSpec.for_timestamp(BASE + 150), 1),
    ]  # fmt: skip
    for spec, expected in cases:
        futures = admin.list_offsets(
            {tp: spec}, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15
        )
        info = futures[tp].result(15)
        assert info.offset == expected, (spec, info.offset, expected)
