"""Kafka's ACL authorizer: the decision, the ACL cache, and the store it is kept in.

The decision (``AclAuthorizer.authorize``; Kafka's ``AclAuthorizer.authorize``), for a
principal connecting from ``host`` asking for ``operation`` on the resource ``(type, name)``:

1. a principal listed in ``super.users`` is allowed everything;
2. the ACLs that apply to the resource are those of the patterns
   ``(type, name, LITERAL)``, ``(type, "*", LITERAL)`` and every ``(type, p, PREFIXED)`` with
   ``name.startswith(p)``;
3. if no ACL applies at all (for any principal or operation), the answer is
   ``allow.everyone.if.no.acl.found`` (default false);
4. an applicable DENY entry whose principal is the principal or ``User:*``, whose host is the
   host or ``*``, and whose operation is the operation or ALL, denies: DENY beats ALLOW;
5. otherwise an ALLOW entry matching the same way allows, where the operation may also be
   one that implies it: DESCRIBE is implied by READ, WRITE, DELETE and ALTER,
   DESCRIBE_CONFIGS by ALTER_CONFIGS (the implication works for ALLOW only: denying READ does
   not deny DESCRIBE);
6. otherwise deny.

Storage: ``AclStore`` is the small interface the broker implements twice (ZooKeeper in
cluster mode, the standalone metadata store otherwise): a versioned set of entries per
resource pattern, written conditionally on the version, like a znode (``AclZnode`` is the
ZooKeeper payload). ``InMemoryAclStore`` is the reference implementation. The authorizer
keeps a cache of the whole store (Kafka's ``aclCache``): ``load()`` at start, ``refresh(p)``
when a change notification for ``p`` arrives, and its own writes update it at once.

Thread-safety: ``AclAuthorizer`` is thread-safe. ``authorize`` reads an immutable snapshot
(no lock on the request path); writers serialize on a lock, retry a conditional write up to
``MAX_UPDATE_RETRIES`` times on a version conflict (another broker wrote in between), and
publish a new snapshot. ``InMemoryAclStore`` is thread-safe.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sluice.common.options import boolean, text

from .acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    KafkaPrincipal,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from .errors import AclBindingError, AclUpdateConflictError, AuthorizerConfigError

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "MAX_UPDATE_RETRIES",
    "VersionedAcls",
    "AclStore",
    "InMemoryAclStore",
    "AclAuthorizer",
    "implied_by",
    "parse_super_users",
    "authorizer_configured",
]

# authorizer.class.name values that select this authorizer: Kafka's ZooKeeper-era names and
# KRaft's StandardAuthorizer, so a copied server.properties works unchanged.
AUTHORIZER_CLASS_NAMES: Final = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)
MAX_UPDATE_RETRIES: Final = 10  # Kafka's AclAuthorizer.maxUpdateRetries

_IMPLIED: Final[Mapping[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


def implied_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW allows ``operation`` (itself included; ALL aside)."""
    return _IMPLIED.get(operation, frozenset({operation}))


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:broker``)."""
    if value is None:
        return frozenset()
    users = [u.strip() for u in value.split(";") if u.strip()]
    for user in users:
        try:
            KafkaPrincipal.parse(user)
        except AclBindingError as exc:
            raise AuthorizerConfigError(f"super.users: {exc}") from None
    return frozenset(users)


def authorizer_configured(properties: Mapping[str, str]) -> bool:
    """Whether ``authorizer.class.name`` asks for this authorizer; unset or empty: no
    authorizer (everything allowed, as Kafka). Another class is an ``AuthorizerConfigError``:
    a broker must not serve unprotected what its config says is protected."""
    name = (text(properties, "authorizer.class.name") or "").strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASS_NAMES:
        raise AuthorizerConfigError(
            f"authorizer.class.name: expected one of {', '.join(sorted(AUTHORIZER_CLASS_NAMES))} "
            f"or nothing, found {name!r}"
        )
    return True


@dataclass(frozen=True)
class VersionedAcls:
    """The entries of one pattern and the version to write against (-1: no such pattern)."""

    entries: frozenset[AccessControlEntry]
    version: int


ABSENT: Final = VersionedAcls(frozenset(), -1)

# A change to one pattern's entries: old entries in, new entries out.
_Change = Callable[[frozenset[AccessControlEntry]], Iterable[AccessControlEntry]]


class AclStore(ABC):
    """Where ACLs live: a versioned entry set per resource pattern, like a znode each.

    ``write(pattern, entries, expected_version)`` succeeds only if the stored version is still
    ``expected_version`` (-1: the pattern must not exist yet); an empty ``entries`` deletes the
    pattern. A ZooKeeper implementation maps this to ``set``/``create``/``delete`` with the
    znode version and then creates the change notification (``AclChangeNotification``) so
    other brokers call ``refresh``; the standalone store does the same in its metadata file.
    """

    @abstractmethod
    def patterns(self) -> list[ResourcePattern]:
        """Every pattern that has entries."""

    @abstractmethod
    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        """The pattern's entries and version; ``ABSENT``-like (version -1) if none."""

    @abstractmethod
    def write(
        self,
        pattern: ResourcePattern,
        entries: frozenset[AccessControlEntry],
        expected_version: int,
    ) -> bool:
        """Conditional write; ``False`` (nothing written) on a version mismatch."""


class InMemoryAclStore(AclStore):
    """A dict behind a lock; versions count writes from 0, as znode versions do."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[ResourcePattern, VersionedAcls] = {}

    def patterns(self) -> list[ResourcePattern]:
        with self._lock:
            return sorted(self._data)

    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        with self._lock:
            return self._data.get(pattern, ABSENT)

    def write(
        self,
        pattern: ResourcePattern,
        entries: frozenset[AccessControlEntry],
        expected_version: int,
    ) -> bool:
        with self._lock:
            if self._data.get(pattern, ABSENT).version != expected_version:
                return False
            if entries:
                self._data[pattern] = VersionedAcls(frozenset(entries), expected_version + 1)
            else:
                self._data.pop(pattern, None)
            return True


@dataclass(frozen=True)
class _Snapshot:
    literal: Mapping[tuple[ResourceType, str], frozenset[AccessControlEntry]]
    prefixed: Mapping[ResourceType, Mapping[str, frozenset[AccessControlEntry]]]
    all: Mapping[ResourcePattern, frozenset[AccessControlEntry]]


def _snapshot(acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> _Snapshot:
    literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
    prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
    for pattern, entries in acls.items():
        if pattern.pattern_type is PatternType.LITERAL:
            literal[(pattern.resource_type, pattern.name)] = entries
        else:
            prefixed.setdefault(pattern.resource_type, {})[pattern.name] = entries
    return _Snapshot(literal, prefixed, dict(acls))


class AclAuthorizer:
    """Kafka's ACL authorizer over an ``AclStore``; see the module docstring."""

    def __init__(
        self,
        store: AclStore,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._write_lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._snapshot = _snapshot({})
        self.load()

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], store: AclStore) -> AclAuthorizer:
        """From ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        return cls(
            store,
            super_users=parse_super_users(text(properties, "super.users")),
            allow_everyone_if_no_acl_found=boolean(
                properties, "allow.everyone.if.no.acl.found", False, error=AuthorizerConfigError
            ),
        )

    # -- cache -----------------------------------------------------------------------------

    def load(self) -> None:
        """Read the whole store into the cache (at start, or after losing notifications)."""
        with self._write_lock:
            self._acls = {}
            for pattern in self.store.patterns():
                entries = self.store.read(pattern).entries
                if entries:
                    self._acls[pattern] = entries
            self._snapshot = _snapshot(self._acls)

    def refresh(self, pattern: ResourcePattern) -> None:
        """Re-read one pattern (a change notification named it)."""
        with self._write_lock:
            self._set(pattern, self.store.read(pattern).entries)

    def _set(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        self._snapshot = _snapshot(self._acls)

    # -- the decision ----------------------------------------------------------------------

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to the resource (step 2)."""
        snapshot = self._snapshot
        found: list[AccessControlEntry] = []
        for key in ((resource_type, name), (resource_type, WILDCARD_RESOURCE)):
            found.extend(snapshot.literal.get(key, ()))
        prefixes = snapshot.prefixed.get(resource_type)
        if prefixes:
            # a name has len(name) prefixes; look each up instead of scanning every pattern
            for end in range(1, len(name) + 1):
                found.extend(prefixes.get(name[:end], ()))
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` at ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        entries = self.applicable(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found

        def matching(permission: AclPermissionType, operations: frozenset[AclOperation]) -> bool:
            return any(
                e.permission is permission
                and e.principal in (principal, WILDCARD_PRINCIPAL)
                and e.host in (host, WILDCARD_HOST)
                and (e.operation in operations or e.operation is AclOperation.ALL)
                for e in entries
            )

        if matching(AclPermissionType.DENY, frozenset({operation})):
            return False
        return matching(AclPermissionType.ALLOW, implied_by(operation))

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on some resource of the type (Kafka's
        ``authorizeByResourceType``; InitProducerId without a transactional id asks for WRITE
        on any topic): a DENY on ``*`` denies; ``allow.everyone.if.no.acl.found`` allows;
        else some ALLOW pattern not covered by a DENY of the same principal allows."""
        if principal in self.super_users:
            return True

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {
                pattern.name
                for pattern, entries in self._snapshot.all.items()
                if pattern.resource_type is resource_type and pattern.pattern_type is pattern_type
                and any(
                    e.permission is permission
                    and e.principal in (principal, WILDCARD_PRINCIPAL)
                    and e.host in (host, WILDCARD_HOST)
                    and e.operation in (operation, AclOperation.ALL)
                    for e in entries
                )
            }  # fmt: skip

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)

        def dominated(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny_prefixes)

        return any(not dominated(p) for p in allow_prefixes) or any(
            not dominated(n) and n not in deny_literals for n in allow_literals
        )

    # -- CreateAcls / DescribeAcls / DeleteAcls ----------------------------------------------

    def acls(self, binding_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """DescribeAcls: the cached bindings the filter matches (all without one), sorted."""
        binding_filter = binding_filter or AclBindingFilter()
        return sorted(
            AclBinding(pattern, entry)
            for pattern, entries in self._snapshot.all.items()
            for entry in entries
            if binding_filter.matches(AclBinding(pattern, entry))
        )

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[AclBindingError | None]:
        """CreateAcls: one result per binding, ``None`` when stored (or already there), the
        validation error otherwise. Raises ``AclUpdateConflictError`` if the store stays busy."""
        bindings = list(bindings)
        results: list[AclBindingError | None] = []
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            try:
                validate_binding(binding)
            except AclBindingError as exc:
                results.append(exc)
                continue
            results.append(None)
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        with self._write_lock:
            for pattern, added in by_pattern.items():
                self._update(pattern, added.union)
        return results

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: for each filter, the bindings it deleted."""
        filters = list(filters)
        for binding_filter in filters:
            binding_filter.validate()
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        with self._write_lock:
            patterns = sorted({p for p in self._acls if any(f.pattern.matches(p) for f in filters)})
            for pattern in patterns:

                def without(
                    old: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern
                ) -> frozenset[AccessControlEntry]:
                    return frozenset(
                        e
                        for e in old
                        if not any(f.matches(AclBinding(pattern, e)) for f in filters)
                    )

                removed = self._update(pattern, without)
                for i, binding_filter in enumerate(filters):
                    deleted[i].extend(
                        AclBinding(pattern, e)
                        for e in sorted(removed)
                        if binding_filter.matches(AclBinding(pattern, e))
                    )
        return deleted

    def _update(self, pattern: ResourcePattern, change: _Change) -> frozenset[AccessControlEntry]:
        """Apply ``change`` with conditional writes; return the entries it removed."""
        for _ in range(MAX_UPDATE_RETRIES):
            current = self.store.read(pattern)
            new = frozenset(change(current.entries))
            if new == current.entries or self.store.write(pattern, new, current.version):
                self._set(pattern, new)
                return current.entries - new
        raise AclUpdateConflictError(
            f"could not update the ACLs of {pattern.resource_type.name} {pattern.name!r} "
            f"({pattern.pattern_type.name}): {MAX_UPDATE_RETRIES} conditional writes conflicted"
        )
