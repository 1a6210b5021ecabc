"""authorizer.py: Kafka's decision rules, one by one and against a brute-force model."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.broker.security.authorizer import (
    AclAuthorizer,
    AclStore,
    InMemoryAclStore,
    VersionedAcls,
    parse_super_users,
)
from sluice.broker.security.errors import (
    AclBindingError,
    AclUpdateConflictError,
    AuthorizerConfigError,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def binding(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
    resource: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern), AccessControlEntry(principal, host, op, perm)
    )


def authorizer(
    *bindings: AclBinding,
    super_users: set[str] | None = None,
    allow_everyone_if_no_acl_found: bool = False,
) -> AclAuthorizer:
    result = AclAuthorizer(
        InMemoryAclStore(),
        super_users=super_users or set(),
        allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
    )
    assert result.create_acls(bindings) == [None] * len(bindings)
    return result


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not authorizer().authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(
        "User:alice", "1.2.3.4", Op.READ, TOPIC, "t"
    )


def test_allow_everyone_only_where_no_acl_applies() -> None:
    auth = authorizer(
        binding("t", Op.READ, principal="User:bob"), allow_everyone_if_no_acl_found=True
    )
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "other")


def test_super_users() -> None:
    auth = authorizer(binding("t", Op.ALL, DENY, principal="User:*"), super_users={"User:root"})
    assert auth.authorize("User:root", "h", Op.DELETE, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}
    with pytest.raises(AuthorizerConfigError, match="super.users"):
        parse_super_users("alice")


def test_deny_beats_allow() -> None:
    auth = authorizer(binding("t", Op.READ), binding("t", Op.READ, DENY, host="10.0.0.9"))
    assert auth.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not auth.authorize("User:alice", "10.0.0.9", Op.READ, TOPIC, "t")


def test_implied_operations_for_allow_only() -> None:
    auth = authorizer(binding("t", Op.WRITE), binding("c", Op.ALTER_CONFIGS))
    assert auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert auth.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "c")
    assert not auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "c")
    deny_read = authorizer(binding("t", Op.ALL), binding("t", Op.READ, DENY))
    assert deny_read.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    assert not deny_read.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_all_wildcards_and_prefixes() -> None:
    auth = authorizer(
        binding("*", Op.READ, principal="User:*"),
        binding("logs-", Op.ALL, pattern=PatternType.PREFIXED, principal="User:bob"),
        binding("logs-secret", Op.ALL, DENY, pattern=PatternType.PREFIXED, principal="User:*"),
    )
    assert auth.authorize("User:anyone", "h", Op.READ, TOPIC, "x")
    assert not auth.authorize("User:anyone", "h", Op.WRITE, TOPIC, "x")
    assert auth.authorize("User:bob", "h", Op.DELETE, TOPIC, "logs-app")
    assert not auth.authorize("User:bob", "h", Op.DELETE, TOPIC, "log")
    assert not auth.authorize("User:bob", "h", Op.READ, TOPIC, "logs-secret-1")
    assert not auth.authorize("User:bob", "h", Op.READ, GROUP, "logs-app")


def test_create_describe_delete() -> None:
    auth = authorizer()
    good, bad = binding("t", Op.READ), binding("t", Op.ANY)
    results = auth.create_acls([good, bad, good])
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], AclBindingError)
    assert auth.acls() == [good]
    extra = binding("t2", Op.WRITE)
    auth.create_acls([extra])
    only_t = AclBindingFilter(ResourcePatternFilter(TOPIC, "t"))
    assert auth.acls(only_t) == [good]
    assert auth.delete_acls([only_t, AclBindingFilter()]) == [[good], [good, extra]]
    assert auth.acls() == [] and auth.store.patterns() == []


def test_refresh_and_load_see_other_writers() -> None:
    store = InMemoryAclStore()
    auth = AclAuthorizer(store)
    pattern = ResourcePattern(TOPIC, "t")
    entry = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
    assert store.write(pattern, frozenset({entry}), -1)  # another broker
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    auth.refresh(pattern)
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    assert store.write(pattern, frozenset(), 0)
    auth.load()
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")


class _BusyStore(InMemoryAclStore):
    """Another writer always gets in between a read and the conditional write."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def write(
        self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], expected: int
    ) -> bool:
        self.attempts += 1
        return False


def test_conditional_writes_retry_then_give_up() -> None:
    store = _BusyStore()
    auth = AclAuthorizer(store)
    with pytest.raises(AclUpdateConflictError, match="10 conditional writes"):
        auth.create_acls([binding("t", Op.READ)])
    assert store.attempts == 10 and auth.acls() == []


def test_concurrent_creates_lose_nothing() -> None:
    auth = AclAuthorizer(InMemoryAclStore())
    names = [f"User:u{i}" for i in range(40)]
    threads = [
        threading.Thread(target=auth.create_acls, args=([binding("t", Op.READ, principal=n)],))
        for n in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {b.entry.principal for b in auth.acls()} == set(names)


def test_from_properties() -> None:
    auth = AclAuthorizer.from_properties(
        {"super.users": "User:admin", "allow.everyone.if.no.acl.found": "TRUE"}, InMemoryAclStore()
    )
    assert auth.super_users == {"User:admin"} and auth.allow_everyone_if_no_acl_found
    with pytest.raises(AuthorizerConfigError):
        AclAuthorizer.from_properties({"allow.everyone.if.no.acl.found": "yes"}, InMemoryAclStore())


def test_store_interface_is_small() -> None:
    assert AclStore.__abstractmethods__ == {"patterns", "read", "write"}
    assert InMemoryAclStore().read(ResourcePattern(TOPIC, "t")) == VersionedAcls(frozenset(), -1)


# --------------------------------------------------------------------------------------------
# The decision against a brute-force model of Kafka's rules
# --------------------------------------------------------------------------------------------

PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]
NAMES = ["a", "ab", "abc", "b", "*"]
OPS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]

bindings_strategy = st.lists(
    st.builds(
        binding,
        name=st.sampled_from(NAMES),
        op=st.sampled_from(OPS),
        perm=st.sampled_from([ALLOW, DENY]),
        principal=st.sampled_from(PRINCIPALS),
        host=st.sampled_from(HOSTS),
        pattern=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
        resource=st.sampled_from([TOPIC, GROUP]),
    ),
    max_size=8,
)


def model(
    acls: list[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    resource: ResourceType,
    name: str,
    super_users: set[str],
    allow_everyone: bool,
) -> bool:
    """Kafka's AclAuthorizer.authorize, written the slow, literal way."""
    if principal in super_users:
        return True

    def applies(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type != resource:
            return False
        if p.pattern_type == PatternType.LITERAL:
            return p.name in (name, "*")
        return name[: len(p.name)] == p.name

    relevant = [b.entry for b in acls if applies(b)]
    if not relevant:
        return allow_everyone

    def grants(e: AccessControlEntry, wanted: AclOperation) -> bool:
        return (
            e.principal in (principal, "User:*")
            and e.host in (host, "*")
            and e.operation in (wanted, Op.ALL)
        )

    if any(e.permission == DENY and grants(e, op) for e in relevant):
        return False
    implied = {op}
    if op == Op.DESCRIBE:
        implied |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        implied |= {Op.ALTER_CONFIGS}
    return any(e.permission == ALLOW and grants(e, w) for e in relevant for w in implied)


@settings(max_examples=300, deadline=None)
@given(
    acls=bindings_strategy,
    principal=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(OPS),
    resource=st.sampled_from([TOPIC, GROUP]),
    name=st.sampled_from(["a", "ab", "abc", "abcd", "b", "c"]),
    super_users=st.sets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    allow_everyone=st.booleans(),
)
def test_decision_matches_the_model(
    acls: list[AclBinding],
    principal: str,
    host: str,
    op: AclOperation,
    resource: ResourceType,
    name: str,
    super_users: set[str],
    allow_everyone: bool,
) -> None:
    auth = AclAuthorizer(
        InMemoryAclStore(), super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone
    )
    auth.create_acls(acls)
    expected = model(acls, principal, host, op, resource, name, super_users, allow_everyone)
    assert auth.authorize(principal, host, op, resource, name) is expected


# -- authorize_any (Kafka's authorizeByResourceType) ---------------------------------------


def test_authorize_any_needs_an_allow_on_some_resource_of_the_type() -> None:
    assert not authorizer().authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(binding("t", Op.WRITE)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(binding("t", Op.ALL)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    # another principal's, another operation's, another type's ALLOW does not count
    assert not authorizer(binding("t", Op.WRITE, principal="User:bob")).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    assert not authorizer(binding("t", Op.READ)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not authorizer(binding("g", Op.WRITE, resource=GROUP)).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC
    )


def test_authorize_any_denies_what_a_deny_covers() -> None:
    # a literal DENY on the very name, or a DENY prefix covering the ALLOW
    assert not authorizer(binding("t", Op.WRITE), binding("t", Op.WRITE, DENY)).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    covered = authorizer(
        binding("pay-eu", Op.WRITE),
        binding("pay-", Op.WRITE, DENY, pattern=PatternType.PREFIXED),
    )
    assert not covered.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    # a DENY on one name leaves an ALLOW on another
    assert authorizer(binding("a", Op.WRITE), binding("b", Op.WRITE, DENY)).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    # a DENY for everyone on "*" denies, even with allow.everyone.if.no.acl.found
    everyone = authorizer(
        binding("*", Op.WRITE, DENY, principal="User:*"), allow_everyone_if_no_acl_found=True
    )
    assert not everyone.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    assert authorizer(super_users={"User:root"}).authorize_any("User:root", "h", Op.WRITE, TOPIC)
