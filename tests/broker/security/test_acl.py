"""acl.py: Kafka's codes, filters, binding validation and the /kafka-acl payloads."""

from __future__ import annotations

import json

import pytest

from sluice.broker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclChangeNotification,
    AclOperation,
    AclPermissionType,
    AclZnode,
    KafkaPrincipal,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_enum,
    pascal_case,
    validate_binding,
)
from sluice.broker.security.errors import AclBindingError, AclZnodeError

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC = ResourceType.TOPIC


def test_codes_are_kafkas() -> None:
    assert [(t.name, int(t)) for t in ResourceType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert [int(p) for p in PatternType] == [0, 1, 2, 3, 4]
    assert PatternType.LITERAL == 3 and PatternType.PREFIXED == 4
    assert AclOperation.ALL == 2 and AclOperation.DESCRIBE_CONFIGS == 10
    assert AclOperation.DESCRIBE_TOKENS == 14
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)


def test_names_as_kafka_spells_them() -> None:
    assert pascal_case(AclOperation.DESCRIBE_CONFIGS) == "DescribeConfigs"
    assert pascal_case(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    for text in ("DescribeConfigs", "describe_configs", "DESCRIBE-CONFIGS", "10"):
        assert parse_enum(AclOperation, text) is AclOperation.DESCRIBE_CONFIGS
    with pytest.raises(AclBindingError, match="expected a AclOperation"):
        parse_enum(AclOperation, "Fly")


def test_principal() -> None:
    assert KafkaPrincipal.parse("User:CN=a,O=b") == KafkaPrincipal("User", "CN=a,O=b")
    assert str(KafkaPrincipal.parse("User:*")) == "User:*"
    for bad in ("alice", "User:", ":alice"):
        with pytest.raises(AclBindingError, match="principalType:principalName"):
            KafkaPrincipal.parse(bad)


def entry(
    op: AclOperation = AclOperation.READ, perm: AclPermissionType = ALLOW
) -> AccessControlEntry:
    return AccessControlEntry("User:alice", "*", op, perm)


@pytest.mark.parametrize(
    ("pattern", "acl", "message"),
    [
        (ResourcePattern(ResourceType.ANY, "t"), entry(), "concrete resource type"),
        (ResourcePattern(TOPIC, "t", PatternType.MATCH), entry(), "LITERAL or PREFIXED"),
        (ResourcePattern(TOPIC, ""), entry(), "resource name"),
        (ResourcePattern(ResourceType.CLUSTER, "c"), entry(), "kafka-cluster"),
        (ResourcePattern(TOPIC, "t"), entry(AclOperation.ANY), "concrete operation"),
        (ResourcePattern(TOPIC, "t"), entry(perm=AclPermissionType.ANY), "ALLOW or DENY"),
        (
            ResourcePattern(TOPIC, "t"),
            AccessControlEntry("alice", "*", AclOperation.READ, ALLOW),
            "principalType",
        ),
        (
            ResourcePattern(TOPIC, "t"),
            AccessControlEntry("User:a", "", AclOperation.READ, ALLOW),
            "host",
        ),
    ],
)
def test_invalid_bindings(pattern: ResourcePattern, acl: AccessControlEntry, message: str) -> None:
    with pytest.raises(AclBindingError, match=message):
        validate_binding(AclBinding(pattern, acl))


def test_valid_binding() -> None:
    validate_binding(AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"), entry()))
    validate_binding(AclBinding(ResourcePattern(TOPIC, "logs-", PatternType.PREFIXED), entry()))


LITERAL_T = ResourcePattern(TOPIC, "orders")
WILDCARD = ResourcePattern(TOPIC, "*")
PREFIX = ResourcePattern(TOPIC, "ord", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "orders")


@pytest.mark.parametrize(
    ("pattern_filter", "matched"),
    [
        (ResourcePatternFilter(), {LITERAL_T, WILDCARD, PREFIX, GROUP}),
        (ResourcePatternFilter(TOPIC), {LITERAL_T, WILDCARD, PREFIX}),
        (ResourcePatternFilter(TOPIC, "orders"), {LITERAL_T}),
        (ResourcePatternFilter(TOPIC, "ord", PatternType.ANY), {PREFIX}),
        (ResourcePatternFilter(TOPIC, None, PatternType.PREFIXED), {PREFIX}),
        (ResourcePatternFilter(TOPIC, "orders", PatternType.LITERAL), {LITERAL_T}),
        (ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), {LITERAL_T, WILDCARD, PREFIX}),
        (ResourcePatternFilter(TOPIC, "other", PatternType.MATCH), {WILDCARD}),
        (
            ResourcePatternFilter(ResourceType.ANY, "orders", PatternType.MATCH),
            {
                LITERAL_T,
                WILDCARD,
                PREFIX,
                GROUP,
            },
        ),
    ],
)
def test_pattern_filters(
    pattern_filter: ResourcePatternFilter, matched: set[ResourcePattern]
) -> None:
    assert {p for p in (LITERAL_T, WILDCARD, PREFIX, GROUP) if pattern_filter.matches(p)} == matched


def test_entry_filters_compare_exactly() -> None:
    wildcard = AccessControlEntry("User:*", "*", AclOperation.ALL, DENY)
    assert AccessControlEntryFilter().matches(wildcard)
    assert not AccessControlEntryFilter(principal="User:alice").matches(wildcard)
    assert not AccessControlEntryFilter(operation=AclOperation.READ).matches(wildcard)
    assert AccessControlEntryFilter(permission=DENY, host="*").matches(wildcard)
    with pytest.raises(AclBindingError, match="UNKNOWN"):
        AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)).validate()


def test_znode_paths() -> None:
    assert AclZnode.path(LITERAL_T) == "/kafka-acl/Topic/orders"
    assert AclZnode.path(PREFIX) == "/kafka-acl-extended/prefixed/Topic/ord"
    tx = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1")
    assert AclZnode.path(tx) == "/kafka-acl/TransactionalId/tx-1"
    for pattern in (LITERAL_T, PREFIX, tx, GROUP):
        assert AclZnode.pattern_of(AclZnode.path(pattern)) == pattern
    assert "/kafka-acl/DelegationToken" in AclZnode.type_paths()
    for bad in ("/kafka-acl/Nope/x", "/kafka-acl/Topic", "/other/Topic/x", "/kafka-acl/Any/x"):
        with pytest.raises(AclZnodeError):
            AclZnode.pattern_of(bad)


def test_znode_payload_matches_kafka() -> None:
    kafka_bytes = (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"},{"principal":"User:*","permissionType":"Deny",'
        b'"operation":"DescribeConfigs","host":"10.0.0.1"}]}'
    )
    znode = AclZnode.decode(LITERAL_T, kafka_bytes)
    assert znode.entries == {
        AccessControlEntry("User:alice", "*", AclOperation.READ, ALLOW),
        AccessControlEntry("User:*", "10.0.0.1", AclOperation.DESCRIBE_CONFIGS, DENY),
    }
    ours, theirs = json.loads(znode.encode()), json.loads(kafka_bytes)
    assert ours["version"] == theirs["version"] == 1
    assert sorted(map(json.dumps, ours["acls"])) == sorted(map(json.dumps, theirs["acls"]))
    assert AclZnode.decode(LITERAL_T, AclZnode(LITERAL_T, znode.entries).encode()) == znode
    assert AclZnode.decode(LITERAL_T, b"").entries == frozenset()


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b'{"version":2,"acls":[]}',
        b'{"version":1,"acls":{}}',
        b'{"version":1,"acls":[{"principal":"User:a"}]}',
        b'{"version":1,"acls":[{"principal":"a","permissionType":"Allow","operation":"Read",'
        b'"host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe",'
        b'"operation":"Read","host":"*"}]}',
    ],
)
def test_bad_znode_payloads(data: bytes) -> None:
    with pytest.raises(AclZnodeError, match="/kafka-acl/Topic/orders"):
        AclZnode.decode(LITERAL_T, data)


def test_change_notifications() -> None:
    literal = AclChangeNotification(LITERAL_T)
    assert literal.path_prefix == "/kafka-acl-changes/acl_changes_"
    assert literal.encode() == b"Topic:orders"
    assert AclChangeNotification.decode("/kafka-acl-changes", b"Topic:orders") == literal
    prefixed = AclChangeNotification(PREFIX)
    assert prefixed.path_prefix == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(prefixed.encode()) == {
        "version": 1,
        "resourceType": "Topic",
        "name": "ord",
        "patternType": "Prefixed",
    }
    assert AclChangeNotification.decode("/kafka-acl-extended-changes", prefixed.encode()) == (
        prefixed
    )
    with pytest.raises(AclZnodeError):
        AclChangeNotification.decode("/kafka-acl-changes", b"nocolon")
    with pytest.raises(AclZnodeError):
        AclChangeNotification.decode("/kafka-acl-extended-changes", b"{}")
