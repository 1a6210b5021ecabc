"""OffsetCommit and OffsetFetch against a standalone broker, by hand over the wire, as an
``assign()`` consumer commits (generation -1, no member id): what is committed is fetched
back; a partition that does not exist is refused and nothing of it is stored."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _commit(wire: WireClient, group: str, topic: str, offsets: dict[int, int]) -> Any:
    body = request(
        ApiKey.OFFSET_COMMIT,
        2,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_metadata": "m"}
                        for p, o in offsets.items()
                    ],
                }
            ],
        },
    )
    return wire.call(body)


def _fetch(wire: WireClient, group: str, topic: str, partitions: list[int]) -> dict[int, Any]:
    body = request(
        ApiKey.OFFSET_FETCH,
        1,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]},
    )
    (answered,) = wire.call(body).topics
    return {p.partition_index: p for p in answered.partitions}


def test_committed_offsets_are_fetched_back(broker: BrokerProcess) -> None:
    topic, group = unique("offsets"), unique("offsets-group")
    create_topic(broker.bootstrap, topic, partitions=2)
    with WireClient(broker.port) as wire:
        before = _fetch(wire, group, topic, [0, 1])
        assert [(p.error_code, p.committed_offset) for p in before.values()] == [
            (Errors.NONE, -1),
            (Errors.NONE, -1),
        ]
        response = _commit(wire, group, topic, {0: 7, 1: 3})
        assert [p.error_code for p in response.topics[0].partitions] == [Errors.NONE] * 2
        after = _fetch(wire, group, topic, [0, 1])
    assert {p: (a.error_code, a.committed_offset, a.metadata) for p, a in after.items()} == {
        0: (Errors.NONE, 7, "m"),
        1: (Errors.NONE, 3, "m"),
    }


def test_a_partition_that_does_not_exist_is_refused(broker: BrokerProcess) -> None:
    topic, group = unique("offsets"), unique("offsets-group")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        response = _commit(wire, group, topic, {0: 5, 4: 5})
        codes = {p.partition_index: p.error_code for p in response.topics[0].partitions}
        assert codes == {0: Errors.NONE, 4: Errors.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = _fetch(wire, group, topic, [0, 4])
    assert fetched[0].committed_offset == 5
    assert fetched[4].committed_offset == -1
