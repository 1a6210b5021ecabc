"""Compatibility levels and the check a new schema must pass before it is registered.

The rules themselves belong to each schema type (:meth:`ParsedSchema.incompatibilities`: Avro's
schema resolution, Confluent's JSON Schema and Protobuf diffs); this module only decides
*which pairs* to check, in which direction, as Confluent defines the levels:

====================  ==================================================================
BACKWARD              reader = new, writer = latest  (consumers upgrade first)
BACKWARD_TRANSITIVE   reader = new, writer = every live version
FORWARD               reader = latest, writer = new  (producers upgrade first)
FORWARD_TRANSITIVE    reader = every live version, writer = new
FULL                  both directions against the latest
FULL_TRANSITIVE       both directions against every live version
NONE                  no check
====================  ==================================================================

"Live" means not soft-deleted. The registry passes the existing versions in version order.
A schema of another type than the version it is checked against is incompatible with it, in
Confluent's words ("Incompatible because of different schema type").
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from sluice.schemas.errors import InvalidCompatibilityLevelError
from sluice.schemas.schema_type import ParsedSchema, verdict_trailer


class CompatibilityLevel(enum.StrEnum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @classmethod
    def parse(cls, value: object) -> CompatibilityLevel:
        """The level named by ``value`` (case-insensitive); raise 42203 otherwise."""
        if isinstance(value, str):
            try:
                return cls(value.strip().upper())
            except ValueError:
                pass
        allowed = ", ".join(level.value for level in cls)
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level: expected one of {allowed}, found {value!r}"
        )

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def checks_backward(self) -> bool:
        """New schema must read what older versions wrote."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def checks_forward(self) -> bool:
        """Older versions must read what the new schema writes."""
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = CompatibilityLevel.BACKWARD


@dataclass(frozen=True)
class ExistingSchema:
    """One registered version the candidate is checked against."""

    version: int
    schema: ParsedSchema


def check_compatibility(
    candidate: ParsedSchema,
    existing: Sequence[ExistingSchema],
    level: CompatibilityLevel,
) -> list[str]:
    """Check ``candidate`` against ``existing`` (live versions, oldest first) under ``level``.

    Returns the reasons it is incompatible; an empty list means compatible. Non-transitive
    levels look at the last element only.
    """
    if level is CompatibilityLevel.NONE or not existing:
        return []
    targets = existing if level.transitive else existing[-1:]
    messages: list[str] = []
    for old in targets:
        if level.checks_backward:
            messages += _check_pair(candidate, old, level, new_is_reader=True)
        if level.checks_forward:
            messages += _check_pair(candidate, old, level, new_is_reader=False)
    return messages


def _check_pair(
    new: ParsedSchema,
    old: ExistingSchema,
    level: CompatibilityLevel,
    *,
    new_is_reader: bool,
) -> list[str]:
    if new.schema_type is not old.schema.schema_type:
        return ["Incompatible because of different schema type"] + verdict_trailer(
            old.version, level.value
        )
    reader, writer = (new, old.schema) if new_is_reader else (old.schema, new)
    return reader.incompatibilities(
        writer,
        reader_role="new" if new_is_reader else "old",
        writer_role="old" if new_is_reader else "new",
        old_version=old.version,
        level=level.value,
    )
