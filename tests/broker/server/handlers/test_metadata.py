"""ApiVersions and Metadata against a standalone broker, by hand over the wire: the APIs
advertised are exactly those the broker handles; Metadata lists this broker as the leader of
every partition, and creates a requested topic only when the client allows it."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import APIS, ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.handlers import HANDLERS
from sluice.broker.server.sasl_session import SASL_API_KEYS
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _metadata(wire: WireClient, topic: str, *, auto_create: bool) -> Any:
    body = request(
        ApiKey.METADATA,
        4,
        {"topics": [{"name": topic}], "allow_auto_topic_creation": auto_create},
    )
    return wire.call(body)


def test_api_versions_advertises_exactly_the_handled_apis(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        response = wire.call(request(ApiKey.API_VERSIONS, 0, {}))
    assert response.error_code == Errors.NONE
    advertised = {int(k.api_key): (k.min_version, k.max_version) for k in response.api_keys}
    handled = set(HANDLERS) | SASL_API_KEYS
    assert set(advertised) == {int(key) for key in APIS if key in handled}
    for key, (low, high) in advertised.items():
        assert (low, high) == (APIS[key].advertised_min, APIS[key].advertised_max), key


def test_metadata_of_a_topic_led_by_the_standalone_broker(broker: BrokerProcess) -> None:
    topic = unique("metadata")
    create_topic(broker.bootstrap, topic, partitions=3)
    with WireClient(broker.port) as wire:
        response = _metadata(wire, topic, auto_create=False)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, "127.0.0.1", broker.port)
    ]
    assert response.controller_id == 0
    (described,) = response.topics
    assert (described.error_code, described.name, described.is_internal) == (
        Errors.NONE,
        topic,
        False,
    )
    partitions = sorted(described.partitions, key=lambda p: p.partition_index)
    assert [p.partition_index for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert p.error_code == Errors.NONE
        assert (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (0, [0], [0])


def test_a_topic_is_auto_created_only_when_the_client_allows_it(broker: BrokerProcess) -> None:
    topic = unique("metadata-auto")
    with WireClient(broker.port) as wire:
        refused = _metadata(wire, topic, auto_create=False)
        assert refused.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert _metadata(wire, topic, auto_create=False).topics[0].error_code == (
            Errors.UNKNOWN_TOPIC_OR_PARTITION
        )  # nothing was created by the first request
        created = _metadata(wire, topic, auto_create=True).topics[0]
        # Created now (num.partitions=1); its leader may take a moment to be reported.
        assert created.error_code in (Errors.NONE, Errors.LEADER_NOT_AVAILABLE)
        again = _metadata(wire, topic, auto_create=False).topics[0]
    assert again.error_code == Errors.NONE
    assert [p.partition_index for p in again.partitions] == [0]
