"""FindCoordinator against a standalone broker, by hand over the wire: a group's coordinator
and a transactional id's are this broker, at the address the client connected to; any other
key type is COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _find(wire: WireClient, key: str, key_type: int) -> Any:
    return wire.call(request(ApiKey.FIND_COORDINATOR, 2, {"key": key, "key_type": key_type}))


def test_a_groups_coordinator_is_the_standalone_broker(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        answer = _find(wire, unique("group"), 0)
    assert answer.error_code == Errors.NONE
    assert (answer.node_id, answer.host, answer.port) == (0, "127.0.0.1", broker.port)


def test_a_transactional_ids_coordinator_is_the_standalone_broker(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        answer = _find(wire, unique("txn"), 1)
        assert answer.error_code == Errors.NONE
        assert (answer.node_id, answer.host, answer.port) == (0, "127.0.0.1", broker.port)
        # Asking built the transaction coordinator, which created its state topic.
        metadata = wire.call(
            request(ApiKey.METADATA, 4, {"topics": [{"name": "__transaction_state"}]})
        )
    (state,) = metadata.topics
    assert state.error_code == Errors.NONE
    assert state.is_internal
    assert len(state.partitions) > 0


def test_an_unknown_key_type_is_not_available(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        answer = _find(wire, "anything", 2)
        assert answer.error_code == Errors.COORDINATOR_NOT_AVAILABLE
        assert answer.node_id == -1
        assert answer.error_message == "expected key type 0 or 1, found 2"
        assert wire.api_versions_ok()  # the connection serves on
