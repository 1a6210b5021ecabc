"""A confluent-kafka round trip through a secured listener: produce ``count`` messages, read
them back with a fresh group. Shared by the TLS and SASL listener tests."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, Producer


def roundtrip(config: Mapping[str, Any], topic: str, count: int = 20) -> list[bytes]:
    """The values read back (in order) after producing ``m0 .. m<count-1>`` to ``topic``."""
    producer = Producer(dict(config))
    for i in range(count):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == count:
                break
    finally:
        consumer.close()
    return got
