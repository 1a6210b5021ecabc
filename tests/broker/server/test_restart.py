"""Restarting the broker between produce and consume, cleanly and by crashing it.

What each kind of stop may lose, and what these tests assert:

* **SIGTERM** — the broker stops accepting, flushes and closes every log, writes the
  checkpoints and the ``.kafka_cleanshutdown`` marker, and exits 0. Nothing is lost, and the
  restart loads the logs without recovery.
* **kill -9 with ``log.flush.interval.messages=1``** — a Produce is answered only after its
  fsync (``handlers/produce.py``), so every acknowledged message is on disk: nothing
  acknowledged can be lost even to a power cut.
* **kill -9 with the defaults** (no flush until shutdown) — the process dies, but the kernel
  does not: every acknowledged message was written to the segment file with ``write`` before
  its response went out, so it sits in the page cache and the restarted broker reads it back
  (its recovery re-validates the unflushed batches and keeps every whole one). So *nothing
  acknowledged is lost to kill -9 either*, and the test asserts that. What the defaults do
  risk is a machine crash or power cut: acknowledged messages not yet fsynced (up to
  ``log.flush.interval.ms``/``messages`` worth — by default, everything since the last
  segment roll or clean shutdown) are gone, and recovery cuts the log at the first torn
  batch. Kafka accepts the same trade and relies on replication instead; a test cannot cut
  the power of its own machine, so that case is left to the storage tests' torn-write
  recovery cases (``tests/broker/log/test_recovery.py``).

In every case an idempotent producer keeps going through the restart: it reconnects, resends
what was in flight with the same producer id and sequence numbers, and the broker — whose
producer state is rebuilt from the log — acknowledges the ones it already had without
appending them again. So the topic ends up with each message exactly once, in order.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from sluice.testing.broker import create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import (
    ContinuousProducer,
    Msg,
    assert_same_messages,
    consume,
    consumer,
    produce,
    sample_messages,
    unique,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _values(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    """The values of partition 0 from offset 0, expecting exactly ``count`` of them."""
    return [m.value() for m in consume(bootstrap, topic, {0: count}, timeout=30)[0]]


def test_sigterm_restart(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, stream = unique("restart"), unique("stream")
    create_topic(broker.bootstrap, topic, partitions=2)
    create_topic(broker.bootstrap, stream)
    msgs = {p: sample_messages(200, tag=f"p{p}") for p in (0, 1)}
    for p in (0, 1):
        produce(broker.bootstrap, topic, msgs[p], partition=p, compression_type="lz4")
    group = unique("group")
    _commit(broker.bootstrap, group, [TopicPartition(topic, 0, 150), TopicPartition(topic, 1, 3)])

    producer = ContinuousProducer(broker.bootstrap, stream).start()
    try:
        producer.wait_acked(300)
        acked_before = len(producer.acked)
        broker.restart()  # SIGTERM: exit code 0 and the clean-shutdown marker, checked there
        assert "(clean shutdown)" in broker.output()
        producer.wait_acked(acked_before + 300)
    finally:
        producer.stop()
    producer.assert_exactly_once(_values(broker.bootstrap, stream, producer.sent))

    got = consume(broker.bootstrap, topic, {0: 200, 1: 200})
    for p in (0, 1):
        assert_same_messages(msgs[p], got[p])
    assert _committed(broker.bootstrap, group, topic, [0, 1]) == [150, 3]
    # New appends continue the offsets where they stopped.
    more = produce(broker.bootstrap, topic, [Msg(b"after", b"restart")], partition=0)
    assert more[0].offset == 200


@pytest.mark.parametrize(
    "overrides",
    [{"log.flush.interval.messages": "1"}, {}],
    ids=["flush-every-message", "defaults"],
)
def test_kill_9(start_broker: StartBroker, overrides: dict[str, str]) -> None:
    broker = start_broker(overrides)
    topic = unique("crash")
    create_topic(broker.bootstrap, topic)
    group = unique("group")
    producer = ContinuousProducer(broker.bootstrap, topic).start()
    try:
        producer.wait_acked(300)
        _commit(broker.bootstrap, group, [TopicPartition(topic, 0, 123)])
        acked_before = len(producer.acked)
        broker.kill()  # mid-stream: requests in flight, their responses lost
        assert not broker.clean_shutdown_marker.exists()
        broker.start()
        assert "unclean shutdown, recovered" in broker.output()
        producer.wait_acked(acked_before + 300)
    finally:
        producer.stop()
    producer.assert_exactly_once(_values(broker.bootstrap, topic, producer.sent))
    assert _committed(broker.bootstrap, group, topic, [0]) == [123]


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    c = consumer(bootstrap, group_id=group)
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> list[int]:
    c = consumer(bootstrap, group_id=group)
    try:
        found = c.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return [tp.offset for tp in found]
    finally:
        c.close()
