"""The ACL stores: the standalone file (versions, atomic 0600 rewrite, survives a reopen,
damage reported) and ZooKeeper (Kafka's znodes, conditional writes, change notifications
read in order and purged), each under the real ``AclAuthorizer``."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from sluice.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclChangeNotification,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.broker.security.acl_store import ACLS_FILE, FileAclStore, ZkAclStore
from sluice.broker.security.authorizer import AclAuthorizer
from sluice.broker.security.errors import AclZnodeError

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
PAY = ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED)
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)


def test_file_store_keeps_versions_and_survives_a_reopen(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path)
    assert store.read(ORDERS).version == -1
    assert store.write(ORDERS, frozenset({READ}), -1)
    assert not store.write(ORDERS, frozenset({READ, DENY}), -1)  # stale version
    assert store.write(ORDERS, frozenset({READ, DENY}), 0)
    assert store.write(PAY, frozenset({READ}), -1)
    path = tmp_path / ACLS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.with_name(ACLS_FILE + ".tmp").exists()
    reopened = FileAclStore(tmp_path)
    assert reopened.patterns() == sorted([ORDERS, PAY])
    assert reopened.read(ORDERS).entries == {READ, DENY}
    assert reopened.read(ORDERS).version == 1
    assert reopened.write(ORDERS, frozenset(), 1)  # empty: the pattern is deleted
    assert FileAclStore(tmp_path).patterns() == [PAY]


def test_file_store_under_the_authorizer(tmp_path: Path) -> None:
    authorizer = AclAuthorizer(FileAclStore(tmp_path))
    assert authorizer.create_acls([AclBinding(PAY, READ)]) == [None]
    again = AclAuthorizer(FileAclStore(tmp_path))
    assert again.authorize("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "pay-x")
    assert not again.authorize("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "x")
    deleted = again.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC))])
    assert deleted == [[AclBinding(PAY, READ)]]
    assert AclAuthorizer(FileAclStore(tmp_path)).acls() == []


@pytest.mark.parametrize(
    "text",
    ["not json", '{"version": 2, "patterns": []}', '{"version": 1, "patterns": [{"name": 1}]}',
     '{"version": 1, "patterns": [{"resourceType": "Topic", "name": "t", "patternType": '
     '"Literal", "version": 0, "acls": [{"principal": "nocolon", "permissionType": "Allow", '
     '"operation": "Read", "host": "*"}]}]}'],
)  # fmt: skip
def test_a_damaged_file_is_reported_with_its_path(tmp_path: Path, text: str) -> None:
    (tmp_path / ACLS_FILE).write_text(text)
    with pytest.raises(AclZnodeError, match=ACLS_FILE):
        FileAclStore(tmp_path)


def test_zookeeper_store_writes_kafkas_znodes_and_notifications(zk_client: KazooClient) -> None:
    store = ZkAclStore(zk_client)
    store.ensure_paths()
    assert store.last_change(AclChangeNotification.LITERAL_ROOT) == -1
    assert store.write(ORDERS, frozenset({READ}), -1)
    assert not store.write(ORDERS, frozenset({READ}), -1)  # exists: the caller reads again
    data, stat_ = zk_client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                  "host": "*"}],
    }  # fmt: skip
    assert store.read(ORDERS).version == stat_.version == 0
    assert store.write(PAY, frozenset({DENY}), -1)
    assert zk_client.exists("/kafka-acl-extended/prefixed/Topic/pay-")
    assert store.patterns() == sorted([ORDERS, PAY])
    literal, last = store.changes_since(AclChangeNotification.LITERAL_ROOT, -1)
    assert literal == [ORDERS] and last == 0
    (child,) = zk_client.get_children(AclChangeNotification.LITERAL_ROOT)
    assert zk_client.get(f"{AclChangeNotification.LITERAL_ROOT}/{child}")[0] == b"Topic:orders"
    prefixed, _ = store.changes_since(AclChangeNotification.EXTENDED_ROOT, -1)
    assert prefixed == [PAY]
    assert store.changes_since(AclChangeNotification.LITERAL_ROOT, last) == ([], last)
    assert store.write(ORDERS, frozenset(), 0)  # deleted with its version
    assert not zk_client.exists("/kafka-acl/Topic/orders")
    assert store.changes_since(AclChangeNotification.LITERAL_ROOT, last)[0] == [ORDERS]
    # nothing is 15 minutes old yet; at a later clock, everything is
    ctime = zk_client.get(f"{AclChangeNotification.LITERAL_ROOT}/{child}")[1].ctime
    assert store.purge_changes(AclChangeNotification.LITERAL_ROOT, ctime) == 0
    assert store.purge_changes(AclChangeNotification.LITERAL_ROOT, ctime + 16 * 60_000) == 2
    assert zk_client.get_children(AclChangeNotification.LITERAL_ROOT) == []


def test_two_authorizers_over_one_zookeeper_agree_after_refresh(zk_client: KazooClient) -> None:
    writer = AclAuthorizer(ZkAclStore(zk_client))
    reader_store = ZkAclStore(zk_client)
    reader = AclAuthorizer(reader_store)
    writer.create_acls([AclBinding(ORDERS, READ)])
    # a second writer, unaware of the first one's entry, adds without losing it
    AclAuthorizer(ZkAclStore(zk_client)).create_acls([AclBinding(ORDERS, DENY)])
    assert not reader.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "orders")
    patterns, _ = reader_store.changes_since(AclChangeNotification.LITERAL_ROOT, -1)
    for pattern in patterns:
        reader.refresh(pattern)
    assert reader.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "orders")
    assert {b.entry for b in reader.acls()} == {READ, DENY}
