"""``LazyTransactionCoordinator``: the broker's one transaction coordinator, built on first
use — once however many requests ask at the same time, again after a build that failed,
never by a reader where transactions were never used — and stopped by ``close``.

The coordinators built are real ones, over the host of the coordinator's own tests (real
logs, no network)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.broker.cluster.topic_metadata import MetadataUnavailableError
from sluice.broker.server.lazy_transaction_coordinator import LazyTransactionCoordinator
from sluice.broker.transactions.coordinator import TransactionCoordinator
from sluice.broker.transactions.transaction_config import TransactionConfig
from tests.broker.transactions.test_coordinator import FakeHost


class Builds:
    """A build function counting its calls; the first ``failures`` raise as an unavailable
    ZooKeeper would."""

    def __init__(self, host: FakeHost, failures: int = 0) -> None:
        self.host = host
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> TransactionCoordinator:
        self.calls += 1
        await asyncio.sleep(0.01)  # concurrent callers arrive while it runs
        if self.calls <= self.failures:
            raise MetadataUnavailableError("ZooKeeper is unavailable")
        coordinator = TransactionCoordinator(self.host, TransactionConfig(), 1)
        await coordinator.start()
        return coordinator


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.state_log.close()
    h.data.close()


def test_concurrent_callers_share_one_build(host: FakeHost) -> None:
    builds = Builds(host)

    async def scenario() -> None:
        lazy = LazyTransactionCoordinator(builds, lambda: True)
        first, second, third = await asyncio.gather(lazy.get(), lazy.get(), lazy.get())
        assert first is second is third
        assert await lazy.get() is first
        lazy.close()

    asyncio.run(scenario())
    assert builds.calls == 1


def test_a_failed_build_is_retried_by_the_next_call(host: FakeHost) -> None:
    builds = Builds(host, failures=1)

    async def scenario() -> None:
        lazy = LazyTransactionCoordinator(builds, lambda: True)
        with pytest.raises(MetadataUnavailableError):
            await lazy.get()
        coordinator = await lazy.get()
        assert isinstance(coordinator, TransactionCoordinator)
        lazy.close()

    asyncio.run(scenario())
    assert builds.calls == 2


def test_a_reader_builds_nothing_where_transactions_were_never_used(host: FakeHost) -> None:
    builds = Builds(host)
    used = False

    async def scenario() -> None:
        lazy = LazyTransactionCoordinator(builds, lambda: used)
        assert await lazy.get_if_used() is None
        assert builds.calls == 0
        nonlocal used
        used = True  # __transaction_state exists now
        coordinator = await lazy.get_if_used()
        assert coordinator is not None
        assert await lazy.get() is coordinator
        lazy.close()

    asyncio.run(scenario())
    assert builds.calls == 1


def test_close_stops_the_coordinators_background_task(host: FakeHost) -> None:
    async def scenario() -> None:
        lazy = LazyTransactionCoordinator(Builds(host), lambda: True)
        coordinator = await lazy.get()
        background = coordinator._task
        assert background is not None and not background.done()
        lazy.close()
        await asyncio.sleep(0)
        assert background.cancelled()
        lazy.close()  # closing again, or a holder that never built, does nothing
        LazyTransactionCoordinator(Builds(host), lambda: True).close()

    asyncio.run(scenario())
