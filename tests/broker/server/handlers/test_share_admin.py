"""Describe/Alter/DeleteShareGroupOffsets over the wire against the shared standalone broker:
the start offset and lag of a group's share-partitions, alter and delete refused while the
group has members, and a start moved back delivering its records again."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.share.share_partition import AcknowledgeType
from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import unique
from tests.broker.server.handlers.test_share_fetch import ShareMember, drain, join_group, produce
from tests.broker.server.wire import WireClient, request

pytestmark = [pytest.mark.broker]


def describe(wire: WireClient, group: str) -> list[tuple[str, int, int, int]]:
    response = wire.call(request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {
        "groups": [{"group_id": group, "topics": None}]}))  # fmt: skip
    (g,) = response.groups
    assert g.error_code == Errors.NONE
    return [(t.topic_name, p.partition_index, p.start_offset, p.lag)
            for t in g.topics for p in t.partitions]  # fmt: skip


def alter(wire: WireClient, group: str, topic: str, offset: int) -> Any:
    partitions = [{"partition_index": 0, "start_offset": offset}]
    topics = [{"topic_name": topic, "partitions": partitions}]
    return wire.call(
        request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": topics})
    )


def delete(wire: WireClient, group: str, topic: str) -> Any:
    return wire.call(request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": group, "topics": [{"topic_name": topic}]}))  # fmt: skip


def test_describe_alter_delete(broker: BrokerProcess) -> None:
    topic, group = unique("share"), unique("sg")
    broker.create_topic(topic, 1)
    (a,) = join_group(broker, group, topic, 1)
    with WireClient(broker.port) as wire:
        produce(broker, topic, 1, 10)
        assert describe(wire, group) == [(topic, 0, 0, 10)]
        got = drain([a], {a: {(0, o): AcknowledgeType.ACCEPT for o in range(10)}})[a]
        assert len(got) == 10
        assert describe(wire, group) == [(topic, 0, 10, 0)]
        # A group with members cannot be altered or deleted.
        assert alter(wire, group, topic, 4).error_code == Errors.NON_EMPTY_GROUP
        assert delete(wire, group, topic).error_code == Errors.NON_EMPTY_GROUP
        a.heartbeat(leave=True)
        a.close()
        response = alter(wire, group, topic, 4)
        assert response.error_code == Errors.NONE
        assert [p.error_code for p in response.responses[0].partitions] == [Errors.NONE]
        assert describe(wire, group) == [(topic, 0, 4, 6)]
        b = ShareMember(broker, group, topic)
        b.heartbeat()
        assert set(drain([b])[b]) == {(0, o) for o in range(4, 10)}
        b.heartbeat(leave=True)
        b.close()
        response = delete(wire, group, topic)
        assert response.error_code == Errors.NONE
        assert response.responses[0].error_code == Errors.NONE
        assert describe(wire, group) == []
