"""The code a group coordinator answers when a write to ``__consumer_offsets`` failed.

Committed offsets and a group's metadata (Kafka's ``storeGroup``) are made durable by a
replicated append to the group's ``__consumer_offsets`` partition; one that did not commit
surfaces as :class:`~sluice.broker.groups.offset_store.OffsetCommitFailedError`, carrying the
replica manager's code. The coordinator does not pass that code on (after Kafka's
``GroupMetadataManager``): it answers

* NOT_COORDINATOR if the partition's leadership moved away (NOT_LEADER_OR_FOLLOWER): the
  client looks the coordinator up again;
* COORDINATOR_NOT_AVAILABLE otherwise (the ISR is too small, replication timed out): the same
  coordinator may take the retry.

Why this rule sits here and not in ``sluice.broker.server.error_mapping``, where every other
exception becomes a code: the group coordinator applies it to its own metadata writes, and
``sluice.broker.groups`` sits below ``sluice.broker.server`` (it must not import it). So the
rule is written once, here, and ``error_mapping.coordinator_code_for`` calls it for the
coordinator APIs. Pure; thread-safe.
"""

from __future__ import annotations

from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.protocol.errors import Errors

__all__ = ["commit_failure_code"]


def commit_failure_code(exc: OffsetCommitFailedError) -> Errors:
    """The code a coordinator answers for a write to ``__consumer_offsets`` that failed."""
    if exc.error_code == Errors.NOT_LEADER_OR_FOLLOWER:
        return Errors.NOT_COORDINATOR
    return Errors.COORDINATOR_NOT_AVAILABLE
