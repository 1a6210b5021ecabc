"""A failed write to ``__consumer_offsets`` → the code a group coordinator answers."""

from __future__ import annotations

import pytest

from sluice.broker.groups.commit_failure import commit_failure_code
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.protocol.errors import Errors


def test_leadership_moved_sends_the_client_to_look_up_the_coordinator() -> None:
    moved = OffsetCommitFailedError(Errors.NOT_LEADER_OR_FOLLOWER, "moved")
    assert commit_failure_code(moved) is Errors.NOT_COORDINATOR


@pytest.mark.parametrize(
    "code",
    [Errors.NOT_ENOUGH_REPLICAS, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR],
)
def test_any_other_failure_leaves_the_same_coordinator_to_retry(code: Errors) -> None:
    failed = OffsetCommitFailedError(code, "not durable")
    assert commit_failure_code(failed) is Errors.COORDINATOR_NOT_AVAILABLE
