"""Compatibility levels × schema changes, through the running registry.

Each case registers ``old`` under a fresh subject with the level set, then registers ``new``:
compatible → a new id, incompatible → 409 with the reason. Expected outcomes are Avro's
resolution rules as Confluent applies them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.schemas.avro_schema import parse_schema
from sluice.schemas.client import RegistryClient
from sluice.schemas.compatibility import CompatibilityLevel, ExistingSchema, check_compatibility
from sluice.schemas.errors import IncompatibleSchemaError


def record(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "R", "namespace": "t", "fields": list(fields)})


A_INT = {"name": "a", "type": "int"}
B = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
C = {"name": "c", "type": "string"}
C_DEFAULT = {"name": "c", "type": "string", "default": "x"}

CHANGES: dict[str, tuple[str, str]] = {
    "add_with_default": (record(A_INT, B), record(A_INT, B, C_DEFAULT)),
    "add_without_default": (record(A_INT, B), record(A_INT, B, C)),
    "remove_field": (record(A_INT, B), record(A_INT)),
    "remove_field_with_default": (record(A_INT, B_DEFAULT), record(A_INT)),
    "promote_int_to_long": (record(A_INT, B), record({"name": "a", "type": "long"}, B)),
    "rename_via_alias": (
        record(A_INT, B),
        record(A_INT, {"name": "b2", "type": "string", "aliases": ["b"]}),
    ),
}

# Which changes each direction accepts (reader = new for backward, reader = old for forward).
BACKWARD_OK = {
    "add_with_default",
    "remove_field",
    "remove_field_with_default",
    "promote_int_to_long",
    "rename_via_alias",
}
FORWARD_OK = {"add_with_default", "add_without_default", "remove_field_with_default"}


def expected(level: CompatibilityLevel, change: str) -> bool:
    ok = True
    if level.checks_backward:
        ok &= change in BACKWARD_OK
    if level.checks_forward:
        ok &= change in FORWARD_OK
    return ok


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("level", list(CompatibilityLevel), ids=lambda lv: lv.value)
def test_matrix(
    client: RegistryClient, subject: str, level: CompatibilityLevel, change: str
) -> None:
    old, new = CHANGES[change]
    client.set_compatibility(level.value, subject)
    old_id = client.register(subject, old)
    ok, messages = client.test_compatibility(subject, new)
    assert ok == expected(level, change), messages
    if ok:
        assert client.register(subject, new) != old_id
        assert client.versions(subject) == [1, 2]
    else:
        assert messages
        with pytest.raises(IncompatibleSchemaError, match="incompatible with an earlier"):
            client.register(subject, new)
        assert client.versions(subject) == [1]


def test_reason_names_the_field(client: RegistryClient, subject: str) -> None:
    old, new = CHANGES["add_without_default"]
    client.register(subject, old)
    ok, messages = client.test_compatibility(subject, new)
    assert not ok
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in messages[0]
    assert "'c'" in messages[0] or ": c" in messages[0]
    with pytest.raises(IncompatibleSchemaError) as err:
        client.register(subject, new)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in str(err.value)
    assert "oldSchemaVersion: 1" in str(err.value)


# Histories where the newest schema passes against its predecessor but not against v1.
TRANSITIVE_CASES = {
    "BACKWARD": [record(A_INT), record(A_INT, C_DEFAULT), record(A_INT, C)],
    "FORWARD": [record(A_INT, B), record(A_INT, B_DEFAULT), record(A_INT)],
    "FULL": [record(A_INT, B), record(A_INT, B_DEFAULT), record(A_INT)],
}


@pytest.mark.parametrize("base", sorted(TRANSITIVE_CASES))
def test_transitive_checks_every_live_version(
    client: RegistryClient, subject: str, base: str
) -> None:
    v1, v2, v3 = TRANSITIVE_CASES[base]
    plain, transitive = subject + "-plain", subject + "-transitive"
    client.set_compatibility(base, plain)
    client.set_compatibility(base + "_TRANSITIVE", transitive)
    for s in (plain, transitive):
        client.register(s, v1)
        client.register(s, v2)
    client.register(plain, v3)
    with pytest.raises(IncompatibleSchemaError, match="oldSchemaVersion: 1"):
        client.register(transitive, v3)
    # Once v1 is soft-deleted it no longer constrains the subject.
    client.delete_version(transitive, 1)
    client.register(transitive, v3)


def test_compatibility_against_a_given_version(client: RegistryClient, subject: str) -> None:
    v1, v2, v3 = TRANSITIVE_CASES["BACKWARD"]
    client.register(subject, v1)
    client.register(subject, v2)
    assert client.test_compatibility(subject, v3, version=2)[0]
    assert not client.test_compatibility(subject, v3, version=1)[0]
    assert client.test_compatibility(subject, v3, version="latest")[0]


def test_unknown_subject_is_compatible(client: RegistryClient, subject: str) -> None:
    # Confluent >= 6.1: nothing registered, nothing to break.
    assert client.test_compatibility(subject, record(A_INT)) == (True, [])


def test_checker_directly() -> None:
    old = parse_schema(record(A_INT, B))
    new = parse_schema(record(A_INT, B, C))
    existing = [ExistingSchema(1, old)]
    assert check_compatibility(new, existing, CompatibilityLevel.NONE) == []
    assert check_compatibility(new, existing, CompatibilityLevel.FORWARD) == []
    (message,) = check_compatibility(new, existing, CompatibilityLevel.BACKWARD)
    assert "new schema (reader)" in message and "BACKWARD" in message
