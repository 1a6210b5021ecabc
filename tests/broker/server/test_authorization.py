"""The central check of the cluster-level APIs: every API of ``CLUSTER_OPERATIONS`` at every
version Sluice implements, refused, answers its own response shape with
CLUSTER_AUTHORIZATION_FAILED in every error field (as Kafka's ``getErrorResponse``), and the
authorizer's configuration is checked before a broker starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from sluice.broker.config import BrokerConfig, ConfigError
from sluice.broker.protocol import decode_request, decode_response, encode_request
from sluice.broker.protocol.apis import APIS, request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from sluice.broker.security.authorizer import AclAuthorizer, InMemoryAclStore
from sluice.broker.server.authorization import (
    CLUSTER_OPERATIONS,
    authorizer_wanted,
    cluster_denied,
)
from sluice.broker.server.context import CURRENT_PRINCIPAL

# One request body per API, with something in every list an error response mirrors.
BODIES: dict[int, dict[str, Any]] = {
    35: {"topics": [{"topic": "t", "partitions": [0]}]},  # DescribeLogDirs
    34: {"dirs": [{"path": "/d", "topics": [{"name": "t", "partitions": [0, 1]}]}]},
    43: {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}],
         "timeout": 1000},  # fmt: skip
    45: {"timeout": 1000, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [1]}]}]},  # fmt: skip
    46: {"timeout": 1000, "topics": None},
    50: {"users": [{"name": "alice"}]},
    51: {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": []},
    27: {"markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": True,
                      "topics": [{"name": "t", "partition_indexes": [0]}],
                      "coordinator_epoch": 0}]},  # fmt: skip
    29: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
    30: {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                        "principal": "User:a", "host": "*", "operation": 3,
                        "permission_type": 3}]},
    31: {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                      "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                      "operation": 1, "permission_type": 1}]},
}  # fmt: skip


@dataclass
class Context:
    """What ``cluster_denied`` reads of the broker: its (real) authorizer."""

    authorizer: AclAuthorizer | None


def error_codes(value: Any) -> list[int]:
    """Every ``error_code`` in a decoded response, nested lists included."""
    found: list[int] = []
    if isinstance(value, tuple | list):
        for item in value:
            found += error_codes(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            field = getattr(value, name)
            if name.endswith("error_code"):
                found.append(int(field))
            else:
                found += error_codes(field)
    return found


CASES = [
    (key, version)
    for key in sorted(CLUSTER_OPERATIONS)
    for version in APIS[key].versions
    if key in BODIES
]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_refused_cluster_apis_answer_their_own_error_response(api_key: int, version: int) -> None:
    body = build(request_type(api_key, version), BODIES[api_key])
    frame = encode_request(3, "test", body)[4:]
    request = decode_request(frame)
    denied = cluster_denied(Context(AclAuthorizer(InMemoryAclStore())), request)
    assert denied is not None
    _header, response = decode_response(denied[4:], api_key, version)
    if api_key == 35 and version < 3:  # DescribeLogDirs before v3: no code, an empty answer
        assert response.results == ()
        return
    codes = error_codes(response)
    assert set(codes) == {int(Errors.CLUSTER_AUTHORIZATION_FAILED)}, response


def test_allowed_principals_and_no_authorizer_pass_through() -> None:
    body = build(request_type(50, 0), BODIES[50])
    request = decode_request(encode_request(3, "test", body)[4:])
    assert cluster_denied(Context(None), request) is None
    granted = AclAuthorizer(InMemoryAclStore())
    granted.create_acls([AclBinding(
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"),
        AccessControlEntry("User:ops", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    )])  # fmt: skip
    token = CURRENT_PRINCIPAL.set("User:ops")
    try:
        assert cluster_denied(Context(granted), request) is None
    finally:
        CURRENT_PRINCIPAL.reset(token)
    assert cluster_denied(Context(granted), request) is not None  # User:ANONYMOUS


def test_authorizer_keys_are_checked_before_start() -> None:
    def config(**security: str) -> BrokerConfig:
        return BrokerConfig(security_properties=security)

    assert not authorizer_wanted(config())
    assert authorizer_wanted(config(**{"authorizer.class.name": "kafka.security.authorizer."
                                       "AclAuthorizer"}))  # fmt: skip
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        authorizer_wanted(config(**{"authorizer.class.name": "com.example.MyAuthorizer"}))
    with pytest.raises(ConfigError, match="super.users"):
        authorizer_wanted(config(**{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "admin",
        }))  # fmt: skip
