"""The Kafka-protocol systems (Sluice and Tansu) driven by confluent-kafka, as users run them.

What "batch" means here (librdkafka producer, ``acks=1``, one partition):

* ``batch 1``  — ``batch.num.messages=1, linger.ms=0``: one record batch, so one Produce
  request, per message. librdkafka still pipelines up to 1,000,000 messages in flight
  (``max.in.flight``), so the producer does not wait for each acknowledgement — like the
  paper's producer, which did not wait at all.
* ``batch 50`` — ``batch.num.messages=50, linger.ms=5``: record batches of up to 50 messages.
* ``default batching`` — librdkafka's defaults (``linger.ms=5``, batches up to 1 MB / 10,000
  messages), written out so the results say what they were.

Every client setting is in ``PRODUCER``/``SETTINGS`` and ``CONSUMER`` and is the same for both
brokers; ``client_settings()`` is what the results record. Produce timing is
``bench.bench_broker.produce``'s loop (it returns once every message is acknowledged) with the
delivery reports also counted for the throughput-over-time samples.

Reads use ``fetch.max.bytes = max.partition.fetch.bytes = 200 KB`` (about 1,000 messages of
200 bytes per Fetch) and ``assign()`` at offset 0, bounded by a deadline — Tansu is reported
to slow to a crawl on topics written one message per batch, and a read must not hang. A read
given ``min_seconds`` starts again at offset 0 (``seek``) each time it reaches the end, until
that long has passed: a topic that takes 0.1 s to read is read 30 times for a 3 s phase.

``fetch.queue.backoff.ms = 10`` (librdkafka's default is 1,000): once its prefetch queue holds
``queued.min.messages`` (100,000) messages, librdkafka stops fetching the partition and does not
look again for that long. The application drains 100,000 queued messages in about 0.2 s, so
with the default the consumer then sat idle on the client's own timer for the rest of the
second, with the broker idle too. The broker that answers fastest fills the queue most often,
so the default penalised the quicker broker: reading a default-batched topic, Sluice's
consumer hit it 5 times in two 3 s reads and Tansu's 3 times (each up to a second lost),
and the ratio read 0.58-0.70x for a broker busy 4-7% of the time. At 10 ms the stall is gone
for both systems alike (``tests/bench/peers/test_kafka.py`` checks what librdkafka logs).

``SluiceServer(loop="uvloop")`` runs the same broker under uvloop's event loop through
``bench.uvloop_broker`` (no broker code changes): the system ``sluice-uvloop``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.bench_broker import start_broker
from bench.peers import MESSAGE, Read, Sampler
from sluice.testing.broker import BrokerProcess

MODES = {
    "batch 1": "librdkafka batch.num.messages=1, linger.ms=0 (one record batch per message, "
    "pipelined, acks=1)",
    "batch 50": "librdkafka batch.num.messages=50, linger.ms=5 (record batches of 50, acks=1)",
    "default batching": "librdkafka defaults (linger.ms=5, batches up to 1 MB, acks=1)",
}
# Every producer: acks=1, and librdkafka's defaults for what the modes do not set, written out.
PRODUCER: dict[str, Any] = {
    "acks": 1, "compression.type": "none", "batch.size": 1_000_000,
    "queue.buffering.max.messages": 100_000, "queue.buffering.max.kbytes": 1_048_576,
    "max.in.flight.requests.per.connection": 1_000_000, "enable.idempotence": False,
}  # fmt: skip
SETTINGS: dict[str, dict[str, Any]] = {
    "batch 1": {"batch.num.messages": 1, "linger.ms": 0},
    "batch 50": {"batch.num.messages": 50, "linger.ms": 5},
    "default batching": {"batch.num.messages": 10_000, "linger.ms": 5},  # librdkafka's defaults
}
FETCH = 200 * 1024  # bytes per Fetch, about 1,000 messages of 200 bytes
# How long librdkafka waits before fetching again once its prefetch queue is full (its default
# is 1,000 ms, several times what the application takes to drain the queue; see above).
QUEUE_BACKOFF_MS = 10
# Every consumer (the same for both brokers). queued.* are librdkafka's defaults, written out:
# the prefetch queue the client fills ahead of the application.
CONSUMER: dict[str, Any] = {
    "fetch.max.bytes": FETCH, "max.partition.fetch.bytes": FETCH, "message.max.bytes": FETCH,
    "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "queued.max.messages.kbytes": 65_536,
    "queued.min.messages": 100_000, "fetch.queue.backoff.ms": QUEUE_BACKOFF_MS,
    "enable.auto.commit": False, "check.crcs": False,
}  # fmt: skip


def client_settings() -> dict[str, Any]:
    """The client and every setting it is given, as the results record them."""
    return {
        "client": f"confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}",
        "producer": PRODUCER,
        "producer_modes": SETTINGS,
        "consumer": CONSUMER,
    }


class SluiceServer:
    """``bench.bench_broker.start_broker`` (``python -m sluice broker start`` with
    ``num.partitions=1``, default asynchronous flushing) behind the peers' start/stop."""

    name = "sluice"

    def __init__(self, loop: str = "asyncio") -> None:
        self.loop = loop
        self.work = Path(tempfile.mkdtemp(prefix="sluice-sluice-"))
        self.broker: BrokerProcess | None = None

    @property
    def pid(self) -> int | None:
        return None if self.broker is None else self.broker.pid

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    @property
    def data_dir(self) -> Path:
        return self.work / "broker"

    def start(self) -> None:
        self.broker = start_broker(self.work, loop=self.loop)

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()  # SIGTERM; SIGKILL after 30 s
            self.broker = None
        shutil.rmtree(self.work, ignore_errors=True)


class KafkaDriver:
    MODES = MODES
    REREADABLE = True

    def __init__(self, system: str, bootstrap: str) -> None:
        self.system = system
        self.bootstrap = bootstrap
        self.subscribe_works: bool | None = None

    def create(self, topic: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            try:
                future.result(30)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise

    def produce(self, queue: str, count: int, mode: str, sampler: Sampler) -> float:
        """``bench.bench_broker.produce`` with the acknowledged count fed to ``sampler``
        (delivery reports, served by ``poll``); seconds until every message is acknowledged."""
        self.create(queue)
        producer = Producer({"bootstrap.servers": self.bootstrap, **PRODUCER, **SETTINGS[mode]})
        payload = os.urandom(MESSAGE)
        acked = [0]
        failed: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)
            acked[0] += 1

        sampler.restart()
        start = time.perf_counter()
        for _ in range(count):
            while True:
                try:
                    producer.produce(queue, payload, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
                    sampler.observe(acked[0])
            producer.poll(0)
            sampler.observe(acked[0])
        deadline = start + max(600.0, count / 100)
        while acked[0] < count and time.perf_counter() < deadline:
            producer.poll(0.05)
            sampler.observe(acked[0])
        elapsed = time.perf_counter() - start
        sampler.finish()
        if failed or acked[0] < count:
            raise RuntimeError(
                f"{self.system} {queue}: {len(failed)} failed, {acked[0]} of {count} reported"
                + (f"; first error {failed[0]}" if failed else "")
            )
        return elapsed

    def delete(self, topic: str) -> None:
        """Delete ``topic`` (Tansu keeps topics in memory: free it between repetitions)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(30)

    def _consumer(self, group: str, **extra: Any) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, **CONSUMER,
                         **extra})  # fmt: skip

    def consume(self, queue: str, count: int, timeout: float, min_seconds: float = 0.0) -> Read:
        """Read the ``count`` messages of ``queue`` from offset 0, again and again (a ``seek``
        to 0 at the end) until ``min_seconds`` have passed; ``timeout`` bounds the whole read.
        ``Read.seen`` counts every message delivered, over all passes."""
        consumer = self._consumer(f"bench-read-{queue}-{time.monotonic_ns()}")
        try:
            start = time.perf_counter()
            consumer.assign([TopicPartition(queue, 0, 0)])
            deadline = start + max(timeout, min_seconds * 2)
            first: float | None = None
            seen, in_pass, passes = 0, 0, 1
            while True:
                if in_pass >= count:
                    if time.perf_counter() - start >= min_seconds:
                        break
                    consumer.seek(TopicPartition(queue, 0, 0))
                    in_pass, passes = 0, passes + 1
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                batch = consumer.consume(1000, timeout=min(left, 1.0))
                got = 0
                for m in batch:
                    # After a seek, messages fetched before it may still arrive: count a pass
                    # by the offsets it covers, not by what was delivered.
                    if m.error() is None and m.offset() == in_pass:
                        in_pass += 1
                        got += 1
                if got and first is None:
                    first = time.perf_counter() - start
                seen += got
            return Read(count * passes, seen, time.perf_counter() - start, first, passes)
        finally:
            consumer.close()

    def first_message(self, queue: str, timeout: float) -> tuple[str, float | None]:
        """``subscribe()`` with a group through the broker's group coordinator; when that
        delivers nothing within ``timeout`` (no coordinator yet), ``assign()`` instead."""
        consumer = self._consumer(
            f"bench-first-{queue}-{time.monotonic_ns()}", **{"auto.offset.reset": "earliest"}
        )
        try:
            start = time.perf_counter()
            consumer.subscribe([queue])
            while time.perf_counter() - start < timeout:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    self.subscribe_works = True
                    return "subscribe", time.perf_counter() - start
        finally:
            consumer.close()
        self.subscribe_works = False
        read = self.consume(queue, 1, timeout)
        return "assign (subscribe delivered nothing)", read.first
