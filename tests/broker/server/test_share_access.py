"""``share_access.share_partition``: a state that cannot be read is read again, a few times with
backoff, before the request answers LEADER_NOT_AVAILABLE (librdkafka's share consumer hands
that code to the application); a heartbeat tries once.

The broker context here is the handful of fields ``share_partition`` reads; the state store
raises ``ShareStateUnavailableError`` as the real one does while the state topic's partition
is not served yet."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.broker.protocol.errors import Errors
from sluice.broker.server import share_access
from sluice.broker.share.share_state_log import ShareStateUnavailableError


class _Store:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.reads = 0
        self.leader_epochs: dict[tuple[str, str, int], int] = {}

    async def refresh(self, group: str, topic: str, partition: int, epoch: int) -> None:
        self.reads += 1
        self.leader_epochs[group, topic, partition] = epoch
        if self.reads <= self.failures:
            raise ShareStateUnavailableError("no leader for __share_group_state-3")


class _Share:
    def __init__(self, store: _Store) -> None:
        self.store = store
        self.partitions: dict[tuple[str, str, int], Any] = {}

    def partition(self, group: str, topic: str, partition: int, bounds: Any) -> Any:
        sp = self.partitions.setdefault((group, topic, partition), SimpleNamespace())
        sp.start_offset = bounds()[0]
        return sp

    def persist(self, group: str, partitions: Any) -> None:
        pass

    async def flush(self) -> None:
        pass


def _context(failures: int) -> Any:
    leading = SimpleNamespace(
        leader_epoch=4, log=SimpleNamespace(log_start_offset=0, high_watermark=10)
    )
    replicas = SimpleNamespace(leader_or_error=lambda _t, _p: (leading, Errors.NONE))
    return SimpleNamespace(authorizer=None, replicas=replicas, share=_Share(_Store(failures)))


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(share_access, "STATE_READ_BACKOFF_S", 0.0)


def test_a_state_unreadable_for_a_moment_is_read_again() -> None:
    ctx = _context(failures=share_access.STATE_READ_ATTEMPTS - 1)
    found = asyncio.run(share_access.share_partition(ctx, "g", "t", 0))
    assert not isinstance(found, int)
    assert ctx.share.store.reads == share_access.STATE_READ_ATTEMPTS
    assert ctx.share.partitions[("g", "t", 0)] is found


def test_a_state_that_stays_unreadable_is_leader_not_available() -> None:
    ctx = _context(failures=share_access.STATE_READ_ATTEMPTS)
    found = asyncio.run(share_access.share_partition(ctx, "g", "t", 0))
    assert found == Errors.LEADER_NOT_AVAILABLE
    assert ctx.share.store.reads == share_access.STATE_READ_ATTEMPTS
    assert ("g", "t", 0) not in ctx.share.partitions


def test_a_heartbeat_tries_once() -> None:
    ctx = _context(failures=1)
    found = asyncio.run(share_access.share_partition(ctx, "g", "t", 0, attempts=1))
    assert found == Errors.LEADER_NOT_AVAILABLE
    assert ctx.share.store.reads == 1
