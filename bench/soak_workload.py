"""The soak's clients: an idempotent ``acks=all`` producer that records every acknowledgement,
and a consumer group member that reads along and commits — both threads, both recording what
the checker (``bench.soak_check``) later holds the log to.

Messages: partition ``p``'s ``n``-th message has the value ``b"p:n"`` (``n`` from 0, produced in
order, one sequence per partition across producer instances), so a value found in the log
names exactly which message it is.

``AckedProducer`` is idempotent with ``acks=all`` by default; with ``acks="1"`` (the soak's
second producer, measuring Kafka's documented ``acks=1`` loss) it is a plain producer —
librdkafka's idempotence requires ``acks=all`` — whose retries may duplicate or reorder, so
only its losses are held against the log. It keeps at most ``max_in_flight`` messages
unacknowledged and at most ``rate`` per second. A delivery report without an error is an
*acknowledgement*: the partition, the sequence number, the offset and the time are recorded.
A fatal error (librdkafka's idempotent producer gives up, e.g. after an
OUT_OF_ORDER_SEQUENCE_NUMBER) is recorded, the producer is replaced by a new one (a new
producer id) and the sequences continue.

``GroupReader`` subscribes as a member of one group, polls, records every message delivered
(partition, offset, value) and commits the next offset of what it delivered every
``commit_interval`` seconds (synchronously; a failed commit is counted, not retried).

Thread-safety: each object runs its own thread (``start``/``stop``); the recorded lists are
appended by that thread and read by others only after ``stop()``, except the counters, read
for progress.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from sluice.testing.cluster import QUIET


@dataclass(frozen=True)
class Ack:
    partition: int
    seq: int
    offset: int
    at: float  # seconds since the workload's start (monotonic)


def value_of(partition: int, seq: int) -> bytes:
    return b"%d:%d" % (partition, seq)


def parse_value(value: bytes) -> tuple[int, int]:
    p, _, n = value.partition(b":")
    return int(p), int(n)


class AckedProducer:
    """See the module docstring."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        start: float,
        rate: int = 1000,
        max_in_flight: int = 2000,
        message_timeout_ms: int = 60_000,
        acks: str = "all",
    ) -> None:
        if acks not in ("all", "1"):
            raise ValueError(f"expected acks 'all' or '1', found {acks!r}")
        self.acks_setting = acks
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.start_time = start
        self.rate = rate
        self.max_in_flight = max_in_flight
        self.message_timeout_ms = message_timeout_ms
        self.acks: list[Ack] = []
        self.failed: Counter[str] = Counter()
        self.fatal_errors: list[str] = []
        self.produced = 0
        self._next_seq = [0] * partitions
        self._fatal = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"soak-producer-acks-{acks}", daemon=True
        )

    def _config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": self.acks_setting == "all",
            "acks": self.acks_setting,
            "linger.ms": 5,
            "message.timeout.ms": self.message_timeout_ms,
            "error_cb": self._on_error,
            **QUIET,
        }

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal_errors.append(f"{self.now():.1f}s {error.name()}: {error.str()}")
            self._fatal.set()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed[error.name()] += 1
            return
        partition, seq = parse_value(message.value() or b"")
        offset = message.offset()
        assert offset is not None
        self.acks.append(Ack(partition, seq, offset, self.now()))

    def now(self) -> float:
        return time.monotonic() - self.start_time

    def in_flight(self) -> int:
        return self.produced - len(self.acks) - sum(self.failed.values())

    def _run(self) -> None:
        producer = Producer(self._config())
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        p = 0
        while not self._done.is_set():
            if self._fatal.is_set():
                producer.flush(10)  # delivers the failures of what was left
                self._fatal.clear()
                producer = Producer(self._config())
            if self.in_flight() >= self.max_in_flight:
                producer.poll(0.05)
                continue
            seq = self._next_seq[p]
            try:
                producer.produce(
                    self.topic, value_of(p, seq), partition=p, on_delivery=self._on_delivery
                )
            except BufferError:
                producer.poll(0.05)
                continue
            self._next_seq[p] += 1
            self.produced += 1
            p = (p + 1) % self.partitions
            producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                producer.poll(delay)
            else:
                next_at = time.monotonic()  # behind: do not burst to catch up
        producer.flush(self.message_timeout_ms / 1000 + 5)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop producing and wait for every outstanding delivery report."""
        self._done.set()
        self._thread.join()


@dataclass
class Commit:
    at: float
    offsets: dict[int, int] = field(default_factory=dict)


class GroupReader:
    """See the module docstring."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        start: float,
        commit_interval: float = 1.0,
    ) -> None:
        self.topic = topic
        self.group = group
        self.start_time = start
        self.commit_interval = commit_interval
        self.delivered: list[tuple[int, int, bytes]] = []
        self.commits: list[Commit] = []
        self.failed_commits: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            **QUIET,
        }
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-reader", daemon=True)

    def _run(self) -> None:
        consumer = Consumer(self._config)
        consumer.subscribe([self.topic])
        next_offsets: dict[int, int] = {}
        uncommitted = False
        last_commit = time.monotonic()
        try:
            while not self._done.is_set():
                msg = consumer.poll(0.2)
                if msg is not None:
                    error = msg.error()
                    if error is not None:
                        self.errors[error.name()] += 1
                    else:
                        partition, offset = msg.partition(), msg.offset()
                        assert partition is not None and offset is not None
                        self.delivered.append((partition, offset, msg.value() or b""))
                        next_offsets[partition] = offset + 1
                        uncommitted = True
                if uncommitted and time.monotonic() - last_commit >= self.commit_interval:
                    last_commit = time.monotonic()
                    self._commit(consumer, dict(next_offsets))
                    uncommitted = False
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, offsets: dict[int, int]) -> None:
        try:
            consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except Exception as exc:  # KafkaException: counted, the next commit covers it
            error = exc.args[0] if exc.args else exc
            name = error.name() if isinstance(error, KafkaError) else type(exc).__name__
            self.failed_commits[name] += 1
            return
        self.commits.append(Commit(time.monotonic() - self.start_time, offsets))

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=60)
