"""Where a broker keeps its ACLs: ZooKeeper in cluster mode, a file beside the standalone
metadata. Both implement ``authorizer.AclStore`` (a versioned entry set per resource pattern,
written conditionally on the version).

``ZkAclStore`` (cluster mode) uses Kafka's own znodes (``acl.AclZnode``), so ACLs made by
``kafka-acls --authorizer-properties zookeeper.connect=...`` work and the other way round::

    /kafka-acl/<Type>/<name>                    LITERAL patterns
    /kafka-acl-extended/prefixed/<Type>/<name>  PREFIXED patterns

A write is ``create`` (version -1 expected), ``set`` or ``delete`` with the znode version
read; a lost race answers ``False`` and the authorizer reads again. After every write the
store creates a sequential change notification (``acl.AclChangeNotification``) under
``/kafka-acl-changes`` (literal) or ``/kafka-acl-extended-changes`` (prefixed), the znodes
Kafka's brokers watch: ``changes_since`` reads the ones after a sequence number, so every
broker of the cluster (Sluice's or Kafka's) re-reads the pattern that changed.
``purge_changes`` deletes notifications older than ``CHANGE_EXPIRATION_S`` (Kafka's 15
minutes). Watching the change folders is the server's job (``broker/server/authorization``).

``FileAclStore`` (standalone) keeps every pattern in one JSON file,
``<first log dir>/sluice-acls.json``, mode 0600, rewritten atomically (temp file, fsync,
rename, directory fsync), each pattern with its version::

    {"version": 1, "patterns": [{"resourceType": "Topic", "name": "orders",
      "patternType": "Literal", "version": 0,
      "acls": [{"principal": "User:alice", "permissionType": "Allow",
                "operation": "Read", "host": "*"}]}]}

Thread-safety: ``ZkAclStore`` is as thread-safe as its kazoo client (its calls block: run
them off the event loop). ``FileAclStore`` is used on the broker's event loop only (one
process owns the file); it keeps the file's contents in memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Protocol

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from sluice.common.atomic_file import write_atomically

from .acl import (
    AccessControlEntry,
    AclChangeNotification,
    AclZnode,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_enum,
    pascal_case,
)
from .authorizer import ABSENT, AclStore, VersionedAcls
from .errors import AclBindingError, AclZnodeError

__all__ = [
    "ACLS_FILE",
    "CHANGE_EXPIRATION_S",
    "FileAclStore",
    "ZkAclStore",
    "ZkClient",
]

ACLS_FILE: Final = "sluice-acls.json"
CHANGE_EXPIRATION_S: Final = 15 * 60  # Kafka's ZkNodeChangeNotificationListener default
_FILE_VERSION: Final = 1


class ZkClient(Protocol):
    """What ``ZkAclStore`` uses of a ``kazoo.client.KazooClient``."""

    def get(self, path: str) -> tuple[bytes, Any]: ...
    def get_children(self, path: str) -> list[str]: ...
    def set(self, path: str, value: bytes, version: int = -1) -> Any: ...
    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str: ...
    def delete(self, path: str, version: int = -1) -> Any: ...
    def ensure_path(self, path: str) -> Any: ...


class ZkAclStore(AclStore):
    """ACL znodes in ZooKeeper; see the module docstring."""

    CHANGE_ROOTS: Final = (AclChangeNotification.LITERAL_ROOT, AclChangeNotification.EXTENDED_ROOT)

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk

    def ensure_paths(self) -> None:
        """The roots Kafka creates at start (the change folders must exist to be watched)."""
        for path in (*AclZnode.type_paths(), *self.CHANGE_ROOTS):
            self._zk.ensure_path(path)

    def patterns(self) -> list[ResourcePattern]:
        found: list[ResourcePattern] = []
        for type_path in AclZnode.type_paths():
            try:
                children = self._zk.get_children(type_path)
            except NoNodeError:
                continue
            found.extend(AclZnode.pattern_of(f"{type_path}/{child}") for child in children)
        return sorted(found)

    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        try:
            data, stat = self._zk.get(AclZnode.path(pattern))
        except NoNodeError:
            return ABSENT
        return VersionedAcls(AclZnode.decode(pattern, data).entries, stat.version)

    def write(
        self,
        pattern: ResourcePattern,
        entries: frozenset[AccessControlEntry],
        expected_version: int,
    ) -> bool:
        path = AclZnode.path(pattern)
        try:
            if not entries:
                if expected_version < 0:
                    return True
                self._zk.delete(path, version=expected_version)
            elif expected_version < 0:
                self._zk.create(path, AclZnode(pattern, entries).encode(), makepath=True)
            else:
                self._zk.set(path, AclZnode(pattern, entries).encode(), version=expected_version)
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            return False  # another writer won: the authorizer reads again
        notification = AclChangeNotification(pattern)
        self._zk.create(notification.path_prefix, notification.encode(), sequence=True,
                        makepath=True)  # fmt: skip
        return True

    def changes_since(self, root: str, after: int) -> tuple[list[ResourcePattern], int]:
        """The patterns named by the notifications under ``root`` with a sequence number above
        ``after`` (oldest first), and the highest sequence number seen. A notification that
        does not parse raises ``AclZnodeError``; one deleted meanwhile is skipped."""
        try:
            children = self._zk.get_children(root)
        except NoNodeError:
            return [], after
        patterns: list[ResourcePattern] = []
        highest = after
        for sequence, child in sorted(_sequenced(children)):
            if sequence <= after:
                continue
            try:
                data, _stat = self._zk.get(f"{root}/{child}")
            except NoNodeError:
                continue
            patterns.append(AclChangeNotification.decode(root, data).pattern)
            highest = sequence
        return patterns, highest

    def last_change(self, root: str) -> int:
        """The highest notification sequence number under ``root`` (-1: none)."""
        try:
            children = self._zk.get_children(root)
        except NoNodeError:
            return -1
        return max((sequence for sequence, _ in _sequenced(children)), default=-1)

    def purge_changes(self, root: str, now_ms: int) -> int:
        """Delete the notifications under ``root`` older than ``CHANGE_EXPIRATION_S``; how many."""
        purged = 0
        try:
            children = self._zk.get_children(root)
        except NoNodeError:
            return 0
        for _sequence, child in _sequenced(children):
            path = f"{root}/{child}"
            try:
                _data, stat = self._zk.get(path)
                if now_ms - stat.ctime > CHANGE_EXPIRATION_S * 1000:
                    self._zk.delete(path)
                    purged += 1
            except NoNodeError:
                continue
        return purged


def _sequenced(children: list[str]) -> list[tuple[int, str]]:
    prefix = AclChangeNotification.SEQUENCE_PREFIX
    found = []
    for child in children:
        if child.startswith(prefix) and child[len(prefix) :].isdigit():
            found.append((int(child[len(prefix) :]), child))
    return found


class FileAclStore(AclStore):
    """``<directory>/sluice-acls.json``; see the module docstring."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / ACLS_FILE
        self._data = self._load()

    def _load(self) -> dict[ResourcePattern, VersionedAcls]:
        try:
            payload: Any = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (UnicodeDecodeError, ValueError):
            raise AclZnodeError(f"{self.path}: expected JSON") from None
        patterns = payload.get("patterns") if isinstance(payload, dict) else None
        if payload.get("version") != _FILE_VERSION or not isinstance(patterns, list):
            raise AclZnodeError(
                f"{self.path}: expected an object with version {_FILE_VERSION} and 'patterns'"
            )
        found: dict[ResourcePattern, VersionedAcls] = {}
        for item in patterns:
            try:
                pattern = ResourcePattern(
                    parse_enum(ResourceType, item["resourceType"]),
                    str(item["name"]),
                    parse_enum(PatternType, item["patternType"]),
                )
                version = int(item["version"])
                blob = json.dumps({"version": AclZnode.VERSION, "acls": item["acls"]}).encode()
            except (KeyError, TypeError, ValueError, AclBindingError):
                raise AclZnodeError(
                    f"{self.path}: expected patterns with resourceType, name, patternType, "
                    f"version and acls, found {item!r}"
                ) from None
            try:
                entries = AclZnode.decode(pattern, blob).entries
            except AclZnodeError as exc:
                raise AclZnodeError(f"{self.path}: {exc}") from None
            found[pattern] = VersionedAcls(entries, version)
        return found

    def patterns(self) -> list[ResourcePattern]:
        return sorted(self._data)

    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        return self._data.get(pattern, ABSENT)

    def write(
        self,
        pattern: ResourcePattern,
        entries: frozenset[AccessControlEntry],
        expected_version: int,
    ) -> bool:
        if self._data.get(pattern, ABSENT).version != expected_version:
            return False
        data = dict(self._data)
        if entries:
            data[pattern] = VersionedAcls(frozenset(entries), expected_version + 1)
        else:
            data.pop(pattern, None)
        self._save(data)
        self._data = data
        return True

    def _save(self, data: dict[ResourcePattern, VersionedAcls]) -> None:
        patterns = []
        for pattern, acls in sorted(data.items()):
            znode = json.loads(AclZnode(pattern, acls.entries).encode())
            patterns.append(
                {
                    "resourceType": pascal_case(pattern.resource_type),
                    "name": pattern.name,
                    "patternType": pascal_case(pattern.pattern_type),
                    "version": acls.version,
                    "acls": znode["acls"],
                }
            )
        text = json.dumps({"version": _FILE_VERSION, "patterns": patterns}, indent=1)
        write_atomically(self.path, text, mode=0o600)  # credentials: owner only
