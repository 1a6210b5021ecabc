"""The authorized-operations bitfield (KIP-430) against the real ACL authorizer: Kafka's
supported operations per resource type, implied operations, DENY over ALLOW, and every
supported operation without an authorizer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sluice.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from sluice.broker.security.authorizer import AclAuthorizer, InMemoryAclStore
from sluice.broker.server.authorized_operations import (
    NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    authorized_operations,
)
from sluice.broker.server.context import CURRENT_PRINCIPAL


@dataclass
class Context:
    """What ``authorized_operations`` reads of the broker: its (real) authorizer."""

    authorizer: AclAuthorizer | None


def bits(*operations: AclOperation) -> int:
    return sum(1 << int(op) for op in set(operations))


def ops(field: int) -> set[AclOperation]:
    return {op for op in AclOperation if field & (1 << int(op))}


@pytest.fixture
def as_alice() -> Iterator[None]:
    token = CURRENT_PRINCIPAL.set("User:alice")
    yield
    CURRENT_PRINCIPAL.reset(token)


def grant(
    authorizer: AclAuthorizer,
    resource: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> None:
    authorizer.create_acls([AclBinding(
        ResourcePattern(resource, name),
        AccessControlEntry("User:alice", "*", operation, permission),
    )])  # fmt: skip


def test_kafkas_supported_operations() -> None:
    # Kafka's AclEntry.supportedOperations, as librdkafka's test 0081 expects them back.
    assert ops(bits(*SUPPORTED_OPERATIONS[ResourceType.TOPIC])) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }  # fmt: skip
    assert ops(bits(*SUPPORTED_OPERATIONS[ResourceType.GROUP])) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
    }  # fmt: skip
    assert NOT_REQUESTED == -2147483648


def test_without_an_authorizer_every_supported_operation() -> None:
    for resource, supported in SUPPORTED_OPERATIONS.items():
        assert authorized_operations(Context(None), resource, "x") == bits(*supported), resource


@pytest.mark.usefixtures("as_alice")
def test_grants_implications_and_denials() -> None:
    authorizer = AclAuthorizer(InMemoryAclStore())  # no ACL: nothing allowed
    context = Context(authorizer)
    assert authorized_operations(context, ResourceType.TOPIC, "t") == 0
    grant(authorizer, ResourceType.TOPIC, "t", AclOperation.READ)
    # READ implies DESCRIBE (Kafka's AclAuthorizer), nothing else.
    assert ops(authorized_operations(context, ResourceType.TOPIC, "t")) == {
        AclOperation.READ, AclOperation.DESCRIBE,
    }  # fmt: skip
    grant(authorizer, ResourceType.TOPIC, "t", AclOperation.ALTER_CONFIGS)
    assert ops(authorized_operations(context, ResourceType.TOPIC, "t")) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }  # fmt: skip
    # ALL grants every supported operation; a DENY takes its own one away.
    grant(authorizer, ResourceType.GROUP, "g", AclOperation.ALL)
    grant(authorizer, ResourceType.GROUP, "g", AclOperation.DELETE, AclPermissionType.DENY)
    assert ops(authorized_operations(context, ResourceType.GROUP, "g")) == {
        AclOperation.READ, AclOperation.DESCRIBE,
    }  # fmt: skip
    # Other resources are untouched by these grants.
    assert authorized_operations(context, ResourceType.TOPIC, "other") == 0
    assert authorized_operations(context, ResourceType.CLUSTER, "kafka-cluster") == 0
