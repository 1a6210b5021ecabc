"""DeleteGroups and OffsetDelete against a standalone broker, through confluent-kafka's
AdminClient: a group is deleted only while empty, an offset only where no member consumes it."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
)

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NonEmptyGroupError

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, consumer, poll_messages, produce, unique
from tests.broker.server.wire import WireClient, request

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


# -- DeleteGroups and OffsetDelete ---------------------------------------------------------------


def _commit(broker: BrokerProcess, group: str, topic: str) -> None:
    c = consumer(broker.bootstrap, group_id=group)
    try:
        c.commit(offsets=[CTopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()


def test_group_deleted_while_empty_refused_while_active(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = unique("groups")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(None, b"x")], partition=0)
    empty = unique("empty")
    _commit(broker, empty, topic)
    admin.delete_consumer_groups([empty])[empty].result(15)
    with pytest.raises(KafkaException) as info:
        admin.delete_consumer_groups([empty])[empty].result(15)
    assert info.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND

    active = unique("active")
    c = consumer(broker.bootstrap, group_id=active, auto_offset_reset="earliest")
    try:
        c.subscribe([topic])
        poll_messages(c, 1)
        with pytest.raises(KafkaException) as info:
            admin.delete_consumer_groups([active])[active].result(15)
        assert info.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        # Once the member has left, the group is empty and may go.
        _wait_for(lambda: client.delete_groups([active]) == {active: "OK"})
        assert client.delete_groups([active]) == {active: "GroupIdNotFoundError"}
        busy = unique("busy")
        c = consumer(broker.bootstrap, group_id=busy, auto_offset_reset="earliest")
        try:
            c.subscribe([topic])
            poll_messages(c, 1)
            assert client.delete_groups([busy]) == {busy: NonEmptyGroupError.__name__}
        finally:
            c.close()
    finally:
        client.close()


def test_offset_delete(broker: BrokerProcess) -> None:
    topic = unique("offdel")
    create_topic(broker.bootstrap, topic)
    group = unique("g")
    _commit(broker, group, topic)
    with WireClient(broker.port) as client:
        body = request(
            ApiKey.OFFSET_DELETE, 0,
            {"group_id": group,
             "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
        )  # fmt: skip
        response = client.call(body)
        assert response.error_code == Errors.NONE
        assert response.topics[0].partitions[0].error_code == Errors.NONE
    c = consumer(broker.bootstrap, group_id=group)
    try:
        committed = c.committed([CTopicPartition(topic, 0)], timeout=10)
    finally:
        c.close()
    assert committed[0].offset < 0  # nothing committed any more
