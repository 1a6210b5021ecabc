"""A real Sluice broker subprocess for the pipeline tests, and helpers to fill it.

``kafka_broker`` (session) starts ``python -m sluice broker start`` on a free port with a
retention check every 200 ms (so the retention test sees segments go within a second);
``topic_name`` (function) gives a fresh topic name per test. ``create_topic`` and ``produce``
go through confluent-kafka, the way users fill a broker; ``produce`` returns every delivered
record with the offset the broker gave it, the model the tests compare Spark's output with.

``tests/pipeline/conftest.py`` imports the fixtures, so every module shares the one session
broker (importing them into a test module would start a second one). Under ``CI=true`` a
broker that will not start fails the tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.net import free_port, wait_for_port

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Produced:
    """One delivered record: where it landed and exactly what was sent."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None
    timestamp_ms: int


class SluiceBroker:
    """A standalone broker on 127.0.0.1 with its data under ``base_dir``."""

    def __init__(self, base_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.base_dir = base_dir
        self.port = free_port()
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SluiceBroker:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "listeners": f"PLAINTEXT://{self.bootstrap}",
            "log.dirs": str(self.base_dir / "data"),
            "offsets.topic.num.partitions": "1",
            "auto.create.topics.enable": "false",
            **self.overrides,
        }
        args = [sys.executable, "-m", "sluice", "broker", "start", "--log-level", "warning"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        with open(self.base_dir / "broker.out", "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while not wait_for_port("127.0.0.1", self.port, 0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the broker did not listen on {self.port}: {self.tail()}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the broker exited with {self.proc.returncode}: {self.tail()}")
            try:
                admin.list_topics(timeout=1)
                return self
            except Exception:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the broker did not answer within {START_TIMEOUT}s: {self.tail()}")

    def tail(self) -> str:
        try:
            return (self.base_dir / "broker.out").read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return "(no output)"

    def stop(self) -> int | None:
        """SIGTERM, wait; SIGKILL after 30 s. The exit status (0 on a clean shutdown)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceBroker]:
    broker = SluiceBroker(
        tmp_path_factory.mktemp("pipeline-broker"),
        {"log.retention.check.interval.ms": "200", "num.partitions": "1"},
    )
    try:
        broker.start()
    except Exception as exc:
        message = f"the Sluice broker could not start: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield broker
    finally:
        code = broker.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM: {broker.tail()}"


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    return f"{base}-{uuid.uuid4().hex[:6]}"


def create_topic(
    bootstrap: str, name: str, partitions: int, config: Mapping[str, str] | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config=dict(config or {}))], operation_timeout=10
    )
    for future in futures.values():
        future.result(timeout=15)
    # Metadata is immediate on a standalone broker; wait until a consumer sees the partitions.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        topic = admin.list_topics(timeout=5).topics.get(name)
        if topic is not None and len(topic.partitions) == partitions:
            return
        time.sleep(0.05)
    raise AssertionError(f"topic {name} did not appear with {partitions} partitions")


def produce(
    bootstrap: str,
    records: Iterable[Mapping[str, Any]],
    *,
    compression: str = "none",
    linger_ms: int = 5,
    batch_size: int | None = None,
) -> list[Produced]:
    """Produce ``records`` (dicts of ``topic`` and optional ``partition``, ``key``,
    ``value``, ``headers``, ``timestamp`` ms) and return what was delivered, in send order."""
    from confluent_kafka import Producer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "linger.ms": linger_ms,
        "enable.idempotence": False,
        "acks": "all",
    }
    if batch_size:
        config["batch.size"] = batch_size
    producer = Producer(config)
    delivered: list[Produced] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any, headers: Any) -> None:
        # librdkafka does not hand headers back in delivery reports: use what was sent.
        if err is not None:
            errors.append(str(err))
            return
        delivered.append(
            Produced(
                msg.topic(),
                msg.partition(),
                msg.offset(),
                msg.key(),
                msg.value(),
                tuple(headers) if headers else None,
                msg.timestamp()[1],
            )
        )

    for record in records:
        kwargs: dict[str, Any] = {"key": record.get("key"), "value": record.get("value")}
        if record.get("partition") is not None:
            kwargs["partition"] = record["partition"]
        if record.get("headers") is not None:
            kwargs["headers"] = list(record["headers"])
        if record.get("timestamp") is not None:
            kwargs["timestamp"] = record["timestamp"]
        sent_headers = record.get("headers")
        callback = functools.partial(on_delivery, headers=sent_headers)
        while True:
            try:
                producer.produce(record["topic"], on_delivery=callback, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"undelivered: {remaining}, errors: {errors[:5]}"
    return delivered


def simple_records(
    topic: str, partitions: int, count: int, *, prefix: str = "m"
) -> list[dict[str, Any]]:
    """``count`` small records spread round-robin over ``partitions``."""
    return [
        {
            "topic": topic,
            "partition": i % partitions,
            "key": f"k{i % 17}".encode(),
            "value": f"{prefix}-{i}".encode(),
        }
        for i in range(count)
    ]
