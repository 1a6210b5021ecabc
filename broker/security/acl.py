"""ACL bindings and filters with Kafka's codes, and their ZooKeeper payloads.

A binding is a resource pattern plus an access control entry::

    ResourcePattern      resource_type  TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID | ...
                         name           a name, or "*" (every resource of the type)
                         pattern_type   LITERAL (the name itself) | PREFIXED (names starting so)
    AccessControlEntry   principal      "User:alice", or "User:*" (everyone)
                         host           a client IP address, or "*"
                         operation      READ, WRITE, ..., or ALL
                         permission     ALLOW | DENY

The int8 codes are Kafka's (``org.apache.kafka.common.{acl,resource}``), the ones on the wire
of CreateAcls / DescribeAcls / DeleteAcls (kio carries them as plain ``i8``)::

    ResourceType       0 UNKNOWN 1 ANY 2 TOPIC 3 GROUP 4 CLUSTER 5 TRANSACTIONAL_ID
                       6 DELEGATION_TOKEN 7 USER
    PatternType        0 UNKNOWN 1 ANY 2 MATCH 3 LITERAL 4 PREFIXED
    AclOperation       0 UNKNOWN 1 ANY 2 ALL 3 READ 4 WRITE 5 CREATE 6 DELETE 7 ALTER
                       8 DESCRIBE 9 CLUSTER_ACTION 10 DESCRIBE_CONFIGS 11 ALTER_CONFIGS
                       12 IDEMPOTENT_WRITE 13 CREATE_TOKENS 14 DESCRIBE_TOKENS
    AclPermissionType  0 UNKNOWN 1 ANY 2 DENY 3 ALLOW

A binding must be concrete (``validate_binding``: no UNKNOWN/ANY/MATCH, a parseable
principal, the cluster named ``kafka-cluster``), the checks of Kafka's ``AclAuthorizer``
before it writes. Filters (``AclBindingFilter``) may hold ANY, MATCH and ``None`` names;
``matches`` follows Kafka's ``ResourcePatternFilter`` / ``AccessControlEntryFilter``.

ZooKeeper layout (``AclZnode``; one znode per resource pattern, Kafka's ``ZkAclStore``)::

    /kafka-acl/<Type>/<name>                   LITERAL patterns
    /kafka-acl-extended/prefixed/<Type>/<name> PREFIXED patterns
    {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
                          "operation":"Read","host":"*"}]}

with ``<Type>`` and the names in the JSON in Kafka's PascalCase (``TransactionalId``,
``DescribeConfigs``). Changes are announced with sequential znodes (``AclChangeNotification``):
``/kafka-acl-changes/acl_changes_<seq>`` holding ``Topic:name`` for a literal pattern,
``/kafka-acl-extended-changes/acl_changes_<seq>`` holding ``{"version":1,"resourceType":
"Topic","name":"x","patternType":"Prefixed"}`` for a prefixed one.

Immutable values and pure functions; thread-safe.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

from .errors import AclBindingError, AclZnodeError

__all__ = [
    "WILDCARD_RESOURCE",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_HOST",
    "CLUSTER_RESOURCE_NAME",
    "ResourceType",
    "PatternType",
    "AclOperation",
    "AclPermissionType",
    "KafkaPrincipal",
    "ResourcePattern",
    "AccessControlEntry",
    "AclBinding",
    "ResourcePatternFilter",
    "AccessControlEntryFilter",
    "AclBindingFilter",
    "validate_binding",
    "parse_enum",
    "pascal_case",
    "AclZnode",
    "AclChangeNotification",
]

WILDCARD_RESOURCE: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
WILDCARD_HOST: Final = "*"
CLUSTER_RESOURCE_NAME: Final = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", bound=enum.IntEnum)


def pascal_case(member: enum.Enum) -> str:
    """Kafka's JSON/CLI spelling: ``DESCRIBE_CONFIGS`` → ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def parse_enum(cls: type[_E], text: str) -> _E:
    """A member from ``DescribeConfigs``, ``describe_configs``, ``DESCRIBE-CONFIGS``... or its
    code (``"10"``), as kafka-acls accepts them; ``AclBindingError`` otherwise."""
    if text.strip().isdigit():
        try:
            return cls(int(text))
        except ValueError:
            pass
    key = re.sub(r"[-_\s]", "", text).upper()
    for member in cls:
        if member.name.replace("_", "") == key:
            return member
    raise AclBindingError(
        f"expected a {cls.__name__} ({', '.join(pascal_case(m) for m in cls)}), found {text!r}"
    )


@dataclass(frozen=True, order=True)
class KafkaPrincipal:
    """``<type>:<name>``, split at the first colon (Kafka's ``SecurityUtils``)."""

    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise AclBindingError(
                f"expected a principal of the form principalType:principalName, found {text!r}"
            )
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A concrete resource pattern (LITERAL or PREFIXED; see ``validate_binding``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Matches patterns; ``ANY`` type/pattern and ``None`` name match all, ``MATCH`` matches
    the patterns that would apply to the resource named ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != (
            pattern.resource_type
        ):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Matches entries; ``None`` and ``ANY`` match all. Principal and host compare exactly
    (a filter for ``User:alice`` does not match an entry for ``User:*``), as Kafka's."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (self.permission is AclPermissionType.ANY or self.permission == entry.permission)
        )


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def validate(self) -> None:
        """Kafka refuses filters holding UNKNOWN anywhere (DescribeAcls/DeleteAcls)."""
        unknown = [
            name
            for name, value in (
                ("resource type", self.pattern.resource_type),
                ("pattern type", self.pattern.pattern_type),
                ("operation", self.entry.operation),
                ("permission type", self.entry.permission),
            )
            if value == 0
        ]
        if unknown:
            raise AclBindingError(f"expected no UNKNOWN in an ACL filter, found {unknown}")


def validate_binding(binding: AclBinding) -> None:
    """Raise ``AclBindingError`` unless ``binding`` may be stored (CreateAcls' checks)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclBindingError(
            f"expected a concrete resource type, found {pattern.resource_type.name}"
        )
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclBindingError(
            f"expected pattern type LITERAL or PREFIXED, found {pattern.pattern_type.name}"
        )
    if not pattern.name:
        raise AclBindingError("expected a resource name, found an empty one")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_RESOURCE_NAME:
        raise AclBindingError(
            f"expected the cluster resource to be named {CLUSTER_RESOURCE_NAME!r}, "
            f"found {pattern.name!r}"
        )
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclBindingError(f"expected a concrete operation, found {entry.operation.name}")
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclBindingError(f"expected ALLOW or DENY, found {entry.permission.name}")
    KafkaPrincipal.parse(entry.principal)
    if not entry.host:
        raise AclBindingError("expected a host or '*', found an empty host")


# --------------------------------------------------------------------------------------------
# ZooKeeper payloads
# --------------------------------------------------------------------------------------------


_STORED_TYPES: Final = tuple(
    t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)


@dataclass(frozen=True)
class AclZnode:
    """The ACLs of one resource pattern, as Kafka's ``ResourceZNode`` stores them."""

    pattern: ResourcePattern
    entries: frozenset[AccessControlEntry]

    LITERAL_ROOT: ClassVar[str] = "/kafka-acl"
    PREFIXED_ROOT: ClassVar[str] = "/kafka-acl-extended/prefixed"
    VERSION: ClassVar[int] = 1

    @classmethod
    def root(cls, pattern_type: PatternType) -> str:
        if pattern_type is PatternType.LITERAL:
            return cls.LITERAL_ROOT
        if pattern_type is PatternType.PREFIXED:
            return cls.PREFIXED_ROOT
        raise AclZnodeError(f"expected LITERAL or PREFIXED, found {pattern_type.name}")

    @classmethod
    def type_paths(cls) -> list[str]:
        """Every ``<root>/<Type>`` folder, for a full load."""
        return [
            f"{cls.root(p)}/{pascal_case(t)}"
            for p in (PatternType.LITERAL, PatternType.PREFIXED)
            for t in _STORED_TYPES
        ]

    @classmethod
    def path(cls, pattern: ResourcePattern) -> str:
        return (
            f"{cls.root(pattern.pattern_type)}/{pascal_case(pattern.resource_type)}/{pattern.name}"
        )

    @classmethod
    def pattern_of(cls, path: str) -> ResourcePattern:
        """The resource pattern a znode path stands for."""
        for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
            prefix = cls.root(pattern_type) + "/"
            if path.startswith(prefix):
                type_name, sep, name = path[len(prefix) :].partition("/")
                if sep and name:
                    try:
                        resource_type = parse_enum(ResourceType, type_name)
                    except AclBindingError:
                        break
                    if resource_type in _STORED_TYPES:
                        return ResourcePattern(resource_type, name, pattern_type)
                break
        raise AclZnodeError(f"expected an ACL znode path, found {path!r}")

    def encode(self) -> bytes:
        acls = [
            {
                "principal": e.principal,
                "permissionType": pascal_case(e.permission),
                "operation": pascal_case(e.operation),
                "host": e.host,
            }
            for e in sorted(self.entries)
        ]
        return json.dumps({"version": self.VERSION, "acls": acls}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, pattern: ResourcePattern, data: bytes | None) -> AclZnode:
        """Parse a payload; empty data (a bare znode) holds no ACLs, as Kafka reads it."""
        if not data:
            return cls(pattern, frozenset())
        try:
            payload: Any = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise AclZnodeError(f"expected JSON at {cls.path(pattern)}") from None
        if not isinstance(payload, dict) or payload.get("version") != cls.VERSION:
            raise AclZnodeError(
                f"expected an object with version {cls.VERSION} at {cls.path(pattern)}"
            )
        acls = payload.get("acls", [])
        if not isinstance(acls, list):
            raise AclZnodeError(f"expected an 'acls' list at {cls.path(pattern)}")
        return cls(pattern, frozenset(_entry_from_json(cls.path(pattern), a) for a in acls))


def _entry_from_json(path: str, item: Any) -> AccessControlEntry:
    keys = ("principal", "permissionType", "operation", "host")
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in keys):
        raise AclZnodeError(f"expected ACL objects with string fields {keys} at {path}")
    try:
        KafkaPrincipal.parse(item["principal"])
        return AccessControlEntry(
            principal=item["principal"],
            host=item["host"],
            operation=parse_enum(AclOperation, item["operation"]),
            permission=parse_enum(AclPermissionType, item["permissionType"]),
        )
    except AclBindingError as exc:
        raise AclZnodeError(f"bad ACL at {path}: {exc}") from None


@dataclass(frozen=True)
class AclChangeNotification:
    """The payload of an ACL change notification: which pattern to reload."""

    pattern: ResourcePattern

    LITERAL_ROOT: ClassVar[str] = "/kafka-acl-changes"
    EXTENDED_ROOT: ClassVar[str] = "/kafka-acl-extended-changes"
    SEQUENCE_PREFIX: ClassVar[str] = "acl_changes_"
    VERSION: ClassVar[int] = 1

    @property
    def path_prefix(self) -> str:
        """Create a sequential znode with this prefix."""
        root = (
            self.LITERAL_ROOT
            if self.pattern.pattern_type is PatternType.LITERAL
            else self.EXTENDED_ROOT
        )
        return f"{root}/{self.SEQUENCE_PREFIX}"

    def encode(self) -> bytes:
        if self.pattern.pattern_type is PatternType.LITERAL:
            return f"{pascal_case(self.pattern.resource_type)}:{self.pattern.name}".encode()
        return json.dumps(
            {
                "version": self.VERSION,
                "resourceType": pascal_case(self.pattern.resource_type),
                "name": self.pattern.name,
                "patternType": pascal_case(self.pattern.pattern_type),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, root: str, data: bytes) -> AclChangeNotification:
        try:
            text = data.decode()
            if root == cls.LITERAL_ROOT:
                type_name, sep, name = text.partition(":")
                if not sep or not name:
                    raise AclZnodeError(f"expected Type:name under {root}")
                return cls(ResourcePattern(parse_enum(ResourceType, type_name), name))
            payload = json.loads(text)
            return cls(
                ResourcePattern(
                    parse_enum(ResourceType, payload["resourceType"]),
                    str(payload["name"]),
                    parse_enum(PatternType, payload["patternType"]),
                )
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AclBindingError):
            raise AclZnodeError(f"expected an ACL change notification under {root}") from None


def bindings_of(znodes: Iterable[AclZnode]) -> list[AclBinding]:
    """The bindings the znodes hold, sorted."""
    return sorted(AclBinding(z.pattern, e) for z in znodes for e in z.entries)
