"""Fixtures for the broker-process tests: real brokers on free ports of 127.0.0.1.

* ``broker`` (session): one shared standalone broker, with its Prometheus endpoint on; tests
  share it by using topics of their own (``clients.unique``). At session end it is stopped
  with SIGTERM, and must exit 0 and leave the clean-shutdown marker in its log dir.
* ``start_broker`` (function): a factory for private brokers with extra ``--override``
  settings, for restart, retention and fuzz tests. Brokers still running at the end of the
  test are stopped with SIGTERM and checked the same way; killed ones are left as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.broker import BrokerProcess
from sluice.testing.net import free_port
from tests.broker.server.broker_process import StartBroker


def assert_clean_stop(broker: BrokerProcess) -> None:
    """SIGTERM must end the broker with exit code 0 and the clean-shutdown marker."""
    code = broker.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.output_tail()}"
    assert broker.clean_shutdown_marker.exists(), (
        f"no {broker.clean_shutdown_marker.name} after SIGTERM:\n{broker.output_tail()}"
    )


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), metrics_port=free_port())
    process.start()
    try:
        yield process
    finally:
        assert_clean_stop(process)


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None, **options: Any) -> BrokerProcess:
        process = BrokerProcess(tmp_path / f"broker-{len(started)}", overrides=overrides, **options)
        started.append(process)
        return process.start()

    yield start
    for process in started:
        if process.running:
            assert_clean_stop(process)
