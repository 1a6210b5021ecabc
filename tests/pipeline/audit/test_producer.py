"""AuditingProducer against a real broker and a real registry: the stamps on every message,
counts per window on delivery only, and additive Avro reports any registry client decodes."""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from sluice.pipeline.audit.producer import (
    SERVER_HEADER,
    AuditingProducer,
    AuditReportError,
    audit_subject,
)
from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroDeserializer, decode_header
from sluice.testing.broker import create_topic
from tests.pipeline.audit_helpers import FakeClock
from tests.pipeline.topic_reader import read_all

pytestmark = pytest.mark.broker

W = 1000  # window.ms in these tests


def _producer(
    bootstrap: str, registry: str, audit_topic: str, clock: FakeClock, **config: Any
) -> AuditingProducer:
    return AuditingProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, **config},
        registry_url=registry,
        server="fe-7",
        audit_topic=audit_topic,
        window_ms=W,
        clock_ms=clock,
    )


def test_every_message_carries_its_timestamp_and_one_server_header(
    kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    create_topic(kafka_broker.bootstrap, f"{topic_name}-audit", 1)
    clock = FakeClock(1_700_000_000_123)
    producer = _producer(kafka_broker.bootstrap, registry_url, f"{topic_name}-audit", clock)
    producer.produce(topic_name, b"plain")
    clock.now_ms += 5
    producer.produce(topic_name, b"own headers", headers=[("trace", b"t-1"), ("seq", b"2")])
    clock.now_ms += 5
    producer.produce(topic_name, b"dict", headers={SERVER_HEADER: b"forged", "x": b"y"})
    producer.close()

    records = read_all(kafka_broker.bootstrap, topic_name)
    assert [r.value for r in records] == [b"plain", b"own headers", b"dict"]
    assert [(r.timestamp_type, r.timestamp) for r in records] == [
        (TIMESTAMP_CREATE_TIME, 1_700_000_000_123),
        (TIMESTAMP_CREATE_TIME, 1_700_000_000_128),
        (TIMESTAMP_CREATE_TIME, 1_700_000_000_133),
    ]
    assert [r.headers for r in records] == [
        ((SERVER_HEADER, b"fe-7"),),
        (("trace", b"t-1"), ("seq", b"2"), (SERVER_HEADER, b"fe-7")),
        (("x", b"y"), (SERVER_HEADER, b"fe-7")),  # a caller's server header is replaced
    ]
    default = AuditingProducer(
        {"bootstrap.servers": kafka_broker.bootstrap}, registry_url=registry_url
    )
    assert default.server == socket.gethostname() and default.window_ms == 60_000
    assert default.audit_topic == "sluice-audit"


def test_counts_per_window_only_what_was_delivered(
    kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    audit_topic = f"{topic_name}-audit"
    create_topic(kafka_broker.bootstrap, audit_topic, 1)
    base = 1_700_000_000_000
    clock = FakeClock(base + 10)
    # A missing topic fails its messages after message.timeout.ms (no auto-creation).
    producer = _producer(
        kafka_broker.bootstrap, registry_url, audit_topic, clock, **{"message.timeout.ms": 1500}
    )
    seen: list[tuple[bool, str]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        seen.append((err is None, msg.topic()))

    for i in range(4):
        producer.produce(topic_name, b"a", partition=i % 2, on_delivery=on_delivery)
    producer.produce(f"{topic_name}-missing", b"lost", on_delivery=on_delivery)
    clock.now_ms = base + W + 999  # the last ms of the next window
    for _ in range(2):
        producer.produce(topic_name, b"b", on_delivery=on_delivery)
    producer.producer.flush(10)  # deliver without reporting: the counts stay pending

    assert producer.pending() == {(topic_name, base // W): 4, (topic_name, base // W + 1): 2}
    assert producer.failed == 1
    assert Counter(seen) == Counter({(True, topic_name): 6, (False, f"{topic_name}-missing"): 1})
    with pytest.raises(ValueError, match="audit topic"):
        producer.produce(audit_topic, b"x")
    producer.close()
    assert producer.pending() == {}
    assert producer.reported() == {(topic_name, base // W): 4, (topic_name, base // W + 1): 2}
    with pytest.raises(RuntimeError, match="closed"):
        producer.produce(topic_name, b"late")


def _audit_events(bootstrap: str, registry: str, audit_topic: str) -> list[dict[str, Any]]:
    """The audit topic decoded two ways: our deserializer and Confluent's must agree."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ours = AvroDeserializer(RegistryClient(registry), schema_path("audit_count").read_text())
    subject_id = RegistryClient(registry).get_version(audit_subject(audit_topic))["id"]
    events = []
    with SchemaRegistryClient({"url": registry}) as confluent:
        theirs = ConfluentDeserializer(confluent)
        for record in read_all(bootstrap, audit_topic):
            assert record.value is not None
            schema_id, _ = decode_header(record.value)
            assert schema_id == subject_id
            assert record.key == b"fe-7" and record.headers == ((SERVER_HEADER, b"fe-7"),)
            event = ours(record.value)
            context = SerializationContext(audit_topic, MessageField.VALUE)
            assert event == theirs(record.value, context)
            events.append(event)
    return events


def test_reports_are_additive_avro_under_the_audit_subject(
    kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    audit_topic = f"{topic_name}-audit"
    create_topic(kafka_broker.bootstrap, audit_topic, 1)
    w0 = 1_700_000_000_000 // W
    clock = FakeClock(w0 * W)
    first = _producer(kafka_broker.bootstrap, registry_url, audit_topic, clock)
    for _ in range(3):
        first.produce(topic_name, b"x")
    first.producer.flush(10)  # delivered, counted, not reported: the window is not over
    assert first.pending() == {(topic_name, w0): 3}
    first.poll(0)
    assert first.pending() == {(topic_name, w0): 3}, "reported before its window finished"
    clock.now_ms = (w0 + 1) * W  # the first window is over: the next poll reports it
    first.poll(0)
    assert first.pending() == {}
    for _ in range(2):
        first.produce(topic_name, b"y")
    first.close()  # reports the unfinished window (w0 + 1) too: 2 so far

    second = _producer(kafka_broker.bootstrap, registry_url, audit_topic, clock)
    for _ in range(4):  # the same server, later in the same window
        second.produce(topic_name, b"z")
    second.close()

    events = _audit_events(kafka_broker.bootstrap, registry_url, audit_topic)
    got = [
        (e["producer"], e["topic"], int(e["window_start"].timestamp() * 1000), e["count"])
        for e in events
    ]
    assert got == [
        ("fe-7", topic_name, w0 * W, 3),
        ("fe-7", topic_name, (w0 + 1) * W, 2),
        ("fe-7", topic_name, (w0 + 1) * W, 4),
    ]
    ends = {int(e["window_end"].timestamp() * 1000) - int(e["window_start"].timestamp() * 1000)
            for e in events}  # fmt: skip
    assert ends == {W}
    totals: Counter[int] = Counter()
    for _, _, start, count in got:
        totals[start] += count
    assert totals == {w0 * W: 3, (w0 + 1) * W: 6}  # the audit sums the additive reports


def test_an_undelivered_report_keeps_its_counts_and_close_says_so(
    kafka_broker: Any, registry_url: str, topic_name: str
) -> None:
    """The audit topic does not exist: the report fails, its count goes back to pending, and
    close() raises rather than lose it silently."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    clock = FakeClock(1_700_000_000_000)
    producer = _producer(
        kafka_broker.bootstrap,
        registry_url,
        f"{topic_name}-no-such-audit",
        clock,
        **{"message.timeout.ms": 1000},
    )
    producer.produce(topic_name, b"x")
    with pytest.raises(AuditReportError, match=rf"1 unreported counts \({topic_name}@"):
        producer.close(timeout=10)
    assert producer.pending() == {(topic_name, 1_700_000_000): 1}
    assert producer.reported() == {}
