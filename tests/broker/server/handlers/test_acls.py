"""CreateAcls, DescribeAcls and DeleteAcls through confluent-kafka's AdminClient: without an
authorizer every request is SECURITY_DISABLED; with one (a private broker whose anonymous
principal is a super user) the bindings are created, described by filter and deleted."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from sluice.broker.protocol.errors import Errors
from sluice.broker.server.authorization import DESCRIBE_ACLS
from sluice.testing.broker import BrokerProcess
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def _binding(topic: str, principal: str = "User:alice") -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip


def _topic_filter(topic: str | None) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip


def test_without_an_authorizer_every_acl_request_is_security_disabled(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("acls")
    for future in (
        next(iter(admin.create_acls([_binding(topic)]).values())),
        next(iter(admin.delete_acls([_topic_filter(topic)]).values())),
    ):
        with pytest.raises(KafkaException) as refused:
            future.result(15)
        assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # DescribeAcls over the wire: librdkafka's describe_acls hands back an empty list for a
    # top-level error, so only the response itself shows the code.
    with WireClient(broker.port) as wire:
        described = wire.call(
            request(
                DESCRIBE_ACLS,
                1,
                {
                    "resource_type_filter": 2,  # TOPIC
                    "resource_name_filter": topic,
                    "pattern_type_filter": 1,  # ANY
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,  # ANY
                    "permission_type": 1,  # ANY
                },
            )
        )
    assert described.error_code == Errors.SECURITY_DISABLED
    assert list(described.resources) == []


def test_bindings_created_described_and_deleted(start_broker: StartBroker) -> None:
    broker = start_broker({"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic, other = unique("acls"), unique("acls-other")
    created = admin.create_acls([_binding(topic), _binding(topic, "User:bob"), _binding(other)])
    for future in created.values():
        assert future.result(15) is None

    described = admin.describe_acls(_topic_filter(topic)).result(15)
    assert sorted(b.principal for b in described) == ["User:alice", "User:bob"]
    assert {(b.name, b.operation, b.permission_type) for b in described} == {
        (topic, AclOperation.READ, AclPermissionType.ALLOW)
    }

    (deleted,) = admin.delete_acls([_topic_filter(topic)]).values()
    assert sorted(b.principal for b in deleted.result(15)) == ["User:alice", "User:bob"]
    assert admin.describe_acls(_topic_filter(topic)).result(15) == []
    # The other topic's binding was not matched by the filter, and is still there.
    assert [b.name for b in admin.describe_acls(_topic_filter(other)).result(15)] == [other]


# kafka-python reads its bundled data with importlib.resources' legacy API (as in
# test_kafka_python.py).
@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
def test_kafka_python_pinned_to_2_8_uses_the_flexible_v2(start_broker: StartBroker) -> None:
    # Pinned to 2.8.0 below the 3.0 it infers, kafka-python sends 2.8's ACL versions, the
    # flexible v2, without negotiating.
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.protocol.admin import DescribeAclsRequest
    from kafka.protocol.broker_version_data import BrokerVersionData

    assert BrokerVersionData((2, 8, 0)).api_version(DescribeAclsRequest) == 2
    broker = start_broker({"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    topic = unique("acls-kp")
    acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
              ResourcePattern(KpResourceType.TOPIC, topic))  # fmt: skip
    topic_filter = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                             ResourcePatternFilter(KpResourceType.TOPIC, topic,
                                                   ACLResourcePatternType.ANY))  # fmt: skip
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(2, 8, 0))
    try:
        created = admin.create_acls([acl])
        assert (len(created["succeeded"]), created["failed"]) == (1, [])
        described, error = admin.describe_acls(topic_filter)
        assert error.errno == Errors.NONE
        assert [
            (a.principal, a.operation, a.resource_pattern.resource_name) for a in described
        ] == [("User:carol", ACLOperation.WRITE, topic)]
        ((_filter, matched, error),) = admin.delete_acls([topic_filter])
        assert (error.errno, [a.principal for a in matched]) == (Errors.NONE, ["User:carol"])
        assert admin.describe_acls(topic_filter)[0] == []
    finally:
        admin.close()
