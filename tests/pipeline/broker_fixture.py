"""A real Sluice broker subprocess for the pipeline tests, and helpers to fill it.

``kafka_broker`` (session) starts ``python -m sluice broker start`` on a free port with a
retention check every 200 ms (so the retention test sees segments go within a second);
``topic_name`` (function) gives a fresh topic name per test. ``create_topic``
(``sluice.testing.broker``) and ``produce`` go through confluent-kafka, the way users fill a
broker; ``produce`` returns every delivered record with the offset the broker gave it, the
model the tests compare Spark's output with.

``tests/pipeline/conftest.py`` imports the fixtures, so every module shares the one session
broker (importing them into a test module would start a second one). Under ``CI=true`` a
broker that will not start fails the tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluice.testing.broker import BrokerProcess
from sluice.testing.broker import create_topic as create_topic  # the tests import it from here
from sluice.testing.ci import in_ci


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


class SluiceBroker(BrokerProcess):
    """The pipeline tests' standalone broker (a :class:`~sluice.testing.broker.BrokerProcess`):
    topics exist only when created — ``auto.create.topics.enable=false`` unless ``overrides``
    say otherwise — and it logs warnings only."""

    def __init__(self, base_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        settings = {"auto.create.topics.enable": "false", **(overrides or {})}
        super().__init__(base_dir, settings, log_level="warning")

    def tail(self) -> str:
        """The last 3,000 characters of the broker's output, for failure messages."""
        return self.output()[-3000:] or "(no output)"


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
