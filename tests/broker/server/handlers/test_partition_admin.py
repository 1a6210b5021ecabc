"""ElectLeaders and the partition reassignment APIs against a standalone broker (nothing to
elect or move: every partition has one replica, this broker)."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


# -- ElectLeaders, reassignments, AlterReplicaLogDirs, broker config sources --------------------


def test_standalone_elections_and_reassignments(broker: BrokerProcess) -> None:
    """A cluster of one: every leader is already the preferred one, and the only possible
    replica set is this broker."""
    topic = unique("standalone-admin")
    create_topic(broker.bootstrap, topic, partitions=2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = client.elect_leaders(0, {topic: [0, 1]})
        (result,) = response.replica_election_results
        assert sorted((p[0], p[1]) for p in result[1]) == [
            (0, Errors.ELECTION_NOT_NEEDED), (1, Errors.ELECTION_NOT_NEEDED),
        ]  # fmt: skip
        tp, other = KTopicPartition(topic, 0), KTopicPartition(topic, 1)
        answers = client.alter_partition_reassignments({tp: [0], other: [0, 7]})
        assert answers[tp] is None
        assert answers[other].errno == Errors.INVALID_REPLICA_ASSIGNMENT
        assert client.alter_partition_reassignments({tp: None})[tp].errno == (
            Errors.NO_REASSIGNMENT_IN_PROGRESS
        )
        assert client.list_partition_reassignments() == {}
    finally:
        client.close()
