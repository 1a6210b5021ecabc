"""Helpers for the audit tests: a schema registry process and an audited producer on a fake
clock (topics are read back with ``tests.pipeline.topic_reader.read_all``).

``registry_url`` (session) runs ``python -m sluice registry start`` on a free port, as
``tests/schemas/conftest.py`` does; ``tests/pipeline/conftest.py`` imports it, so one registry
serves the session. ``produce_audited`` sends messages whose timestamps fall in
chosen windows through :class:`~sluice.pipeline.audit.producer.AuditingProducer`, then closes it (so
every count is reported).
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from sluice.pipeline.audit.producer import AuditingProducer
from tests.net import free_port, signal_and_wait
from tests.pipeline.broker_fixture import in_ci

START_TIMEOUT = 20.0


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("audit-registry")
    url = f"http://127.0.0.1:{free_port()}"
    args = [sys.executable, "-m", "sluice", "registry", "start"]
    for key, value in {
        "listeners": url,
        "schema.registry.data.dir": str(base / "data"),
        "log.level": "warning",
    }.items():
        args += ["--override", f"{key}={value}"]
    log_path = base / "registry.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    ready = False
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                ready = True
                break
        except urllib.error.HTTPError as e:
            e.close()
            ready = True
            break
        except OSError:
            time.sleep(0.05)
    if not ready:
        signal_and_wait(proc, 15, 15)
        message = f"the registry did not start: {log_path.read_text(errors='replace')[-2000:]}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield url
    finally:
        status = signal_and_wait(proc, 15, 15)
        assert status == 0, f"registry exited with {status}: {log_path.read_text()[-2000:]}"


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


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path
