"""DeleteRecords against a standalone broker, through confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient: the log start moves, and a fetch below it is out of range."""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
)

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


# -- DeleteRecords -------------------------------------------------------------------------------


def test_delete_records_then_fetch_below_is_out_of_range(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("delrec")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"%d" % i) for i in range(10)], partition=0)
    result = admin.delete_records([CTopicPartition(topic, 0, 4)])
    for future in result.values():
        assert future.result(15).low_watermark == 4
    with WireClient(broker.port) as client:
        assert client.list_offset(topic, 0, -2) == 4
        assert client.fetch(topic, 0, 2).error_code == Errors.OFFSET_OUT_OF_RANGE
        assert client.fetch(topic, 0, 4).error_code == Errors.NONE
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    beyond = admin.delete_records([CTopicPartition(topic, 0, 99)])
    with pytest.raises(KafkaException):
        for future in beyond.values():
            future.result(15)


def test_kafka_python_delete_records(broker: BrokerProcess) -> None:
    topic = unique("kp-delrec")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x") for _ in range(5)], partition=0)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.delete_records({KTopicPartition(topic, 0): 3})
    finally:
        client.close()
    assert result[KTopicPartition(topic, 0)]["low_watermark"] == 3
