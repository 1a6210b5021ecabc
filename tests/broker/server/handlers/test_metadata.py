"""ApiVersions and Metadata against a standalone broker, by hand over the wire: the APIs
advertised are exactly those the broker handles; Metadata lists this broker as the leader of
every partition, and creates a requested topic only when the client allows it; the authorized
operations on topics, the cluster and groups (KIP-430) follow the ACLs, through
confluent-kafka's AdminClient and over the wire."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.broker.protocol import APIS, ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.handlers import HANDLERS
from sluice.broker.server.sasl_session import SASL_API_KEYS
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
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


# -- authorized operations (KIP-430) ------------------------------------------------------------

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
NOT_ASKED = -(1 << 31)


def _acl(kind: Any, name: str, operation: Any) -> Any:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    return AclBinding(kind, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      operation, AclPermissionType.ALLOW)  # fmt: skip


def _codes(field: int) -> set[int]:
    return {code for code in range(32) if field & (1 << code)}


def test_authorized_operations_follow_the_acls(start_broker: StartBroker) -> None:
    # No super user; a resource without ACLs allows everything (allow.everyone.if.no.acl.found),
    # one with ACLs only what they grant — as librdkafka's test 0081 and Kafka answer.
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    broker = start_broker({"authorizer.class.name": AUTHORIZER,
                           "allow.everyone.if.no.acl.found": "true"})  # fmt: skip
    granted, open_topic, group = unique("ops-read"), unique("ops-open"), unique("ops-group")
    create_topic(broker.bootstrap, granted)
    create_topic(broker.bootstrap, open_topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_acls([
        _acl(ResourceType.TOPIC, granted, AclOperation.READ),
        _acl(ResourceType.GROUP, group, AclOperation.DESCRIBE),
        _acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
    ]).values():  # fmt: skip
        assert future.result(15) is None
    every_topic_op = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                      AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}  # fmt: skip
    described = admin.describe_topics(
        TopicCollection([granted, open_topic]), include_authorized_operations=True,
        request_timeout=15,
    )  # fmt: skip
    assert set(described[granted].result(15).authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE,  # READ implies DESCRIBE
    }  # fmt: skip
    assert set(described[open_topic].result(15).authorized_operations) == every_topic_op
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=15)
    assert set(cluster.result(15).authorized_operations) == {
        AclOperation.ALTER, AclOperation.DESCRIBE,  # ALTER implies DESCRIBE
    }  # fmt: skip
    assert not admin.describe_cluster(request_timeout=15).result(15).authorized_operations
    with WireClient(broker.port) as wire:
        asked = wire.call(request(ApiKey.METADATA, 8, {
            "topics": [{"name": granted}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        }))  # fmt: skip
        assert _codes(asked.cluster_authorized_operations) == {7, 8}  # ALTER, DESCRIBE
        assert _codes(asked.topics[0].topic_authorized_operations) == {3, 8}  # READ, DESCRIBE
        plain = wire.call(request(ApiKey.METADATA, 12, {
            "topics": [{"name": granted, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }))  # fmt: skip
        assert plain.topics[0].topic_authorized_operations == NOT_ASKED
        groups = wire.call(request(ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": [group], "include_authorized_operations": True,
        }))  # fmt: skip
        assert _codes(groups.groups[0].authorized_operations) == {8}  # DESCRIBE only
