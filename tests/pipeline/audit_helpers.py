"""Helpers for the audit tests: a schema registry process and an audited producer on a fake
clock (topics are read back with ``tests.pipeline.topic_reader.read_all``).

``registry_url`` (session) runs a :class:`~sluice.testing.registry.RegistryProcess` on a free
port, as ``tests/schemas/conftest.py`` does; ``tests/pipeline/conftest.py`` imports it, so one
registry serves the session. ``produce_audited`` sends messages whose timestamps fall in
chosen windows through :class:`~sluice.pipeline.audit.producer.AuditingProducer`, then closes it
(so every count is reported).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pytest

from sluice.pipeline.audit.producer import AuditingProducer
from sluice.testing.ci import in_ci
from sluice.testing.mirror import write_properties as write_properties  # the tests import it
from sluice.testing.registry import RegistryProcess


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("audit-registry")
    process = RegistryProcess(
        base / "data", base / "registry.log", overrides={"log.level": "warning"}
    )
    try:
        process.start()
    except RuntimeError as exc:
        message = f"the registry did not start: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield process.url
    finally:
        status = process.stop()
        assert status == 0, f"registry exited with {status}: {process.log()[-2000:]}"


class FakeClock:
    """A settable clock in ms for ``AuditingProducer(clock_ms=...)``."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def produce_audited(
    bootstrap: str,
    registry: str,
    topic: str,
    per_window: Mapping[int, int],
    *,
    audit_topic: str,
    window_ms: int,
    server: str = "fe-test",
    partitions: int = 1,
) -> None:
    """For each ``window_start_ms: n`` send ``n`` messages stamped inside that window (spread
    over ``partitions``), then close the producer: every count is reported."""
    first = min(per_window)
    clock = FakeClock(first)
    producer = AuditingProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False},
        registry_url=registry,
        server=server,
        audit_topic=audit_topic,
        window_ms=window_ms,
        clock_ms=clock,
    )
    i = 0
    for start in sorted(per_window):
        for j in range(per_window[start]):
            clock.now_ms = start + (j * 7) % window_ms
            producer.produce(
                topic, value=f"m-{i}".encode(), key=f"k{i}".encode(), partition=i % partitions
            )
            i += 1
        producer.poll(0)
    clock.now_ms = max(per_window) + window_ms  # every window finished
    producer.close(30)


def aligned_base(window_ms: int, windows_ago: int) -> int:
    """The start of the window ``windows_ago`` windows before the current one."""
    now = time.time_ns() // 1_000_000
    return (now // window_ms - windows_ago) * window_ms
