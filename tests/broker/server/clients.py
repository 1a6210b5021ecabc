"""confluent-kafka helpers: create a topic (``sluice.testing.broker.create_topic``), produce a
list of messages and count the acknowledgements, consume a partition range back — each
returning plain values to compare.

Every client made here is closed before the helper returns (the admin client has nothing to
close).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from sluice.testing.broker import create_topic as create_topic  # the tests import it from here
from sluice.testing.cluster import QUIET

Headers = tuple[tuple[str, bytes | None], ...]

# librdkafka's defaults wait up to 1 s between reconnects and 5 min per message; a restart
# test wants both short, and an unacknowledged message to fail rather than hang the test.
FAST_RECONNECT = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}


class Msg(NamedTuple):
    """One message as produced and as consumed: compared field by field, bytes for bytes."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None  # CreateTime in ms; None lets the producer stamp it


class Delivered(NamedTuple):
    partition: int
    offset: int
    msg: Msg


def unique(prefix: str) -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(
    bootstrap: str,
    topic: str,
    messages: Iterable[Msg],
    *,
    partition: int | None = None,
    timeout: float = 30.0,
    **config: Any,
) -> list[Delivered]:
    """Produce ``messages`` (all to ``partition``, or where the partitioner puts them) and
    return the acknowledged deliveries in acknowledgement order. ``config`` keys may use
    ``_`` for ``.``. Any delivery error fails the test."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, **config}
    producer = Producer({k.replace("_", "."): v for k, v in conf.items()})
    delivered: list[Delivered] = []
    errors: list[KafkaError] = []

    def make_callback(msg: Msg) -> Any:
        def on_delivery(err: KafkaError | None, m: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered.append(Delivered(m.partition(), m.offset(), msg))

        return on_delivery

    try:
        for msg in messages:
            kwargs: dict[str, Any] = {"key": msg.key, "value": msg.value}
            if msg.headers:
                kwargs["headers"] = list(msg.headers)
            if msg.timestamp is not None:
                kwargs["timestamp"] = msg.timestamp
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, on_delivery=make_callback(msg), **kwargs)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        remaining = producer.flush(timeout)
    finally:
        producer.close()
    assert remaining == 0, f"{remaining} messages still unacknowledged after {timeout}s"
    assert not errors, f"delivery errors: {errors[:5]}"
    return delivered


def as_msg(m: Message) -> Msg:
    kind, timestamp = m.timestamp()
    return Msg(m.key(), m.value(), tuple(m.headers() or ()), timestamp)


def consumer(bootstrap: str, **config: Any) -> Consumer:
    """A consumer that commits nothing on its own; the caller closes it."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("group"),
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        **config,
    }
    return Consumer({k.replace("_", "."): v for k, v in conf.items()})


def poll_messages(c: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Poll until ``count`` messages arrived; any error event fails the test."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            raise KafkaException(m.error())
        out.append(m)
    assert len(out) == count, f"expected {count} messages within {timeout}s, got {len(out)}"
    return out


def consume(
    bootstrap: str,
    topic: str,
    counts: Mapping[int, int],
    *,
    start: int = 0,
    timeout: float = 20.0,
    **config: Any,
) -> dict[int, list[Message]]:
    """Read ``counts[p]`` messages of each partition ``p`` from offset ``start`` with
    ``assign()``; then wait a moment to be sure nothing more follows. Returns them per
    partition, in the order received."""
    c = consumer(bootstrap, **config)
    try:
        c.assign([TopicPartition(topic, p, start) for p in counts])
        got = poll_messages(c, sum(counts.values()), timeout)
        extra = c.poll(0.3)
        assert extra is None, f"expected no more messages, got one at offset {extra.offset()}"
    finally:
        c.close()
    by_partition: dict[int, list[Message]] = {p: [] for p in counts}
    for m in got:
        by_partition[m.partition()].append(m)
    for p, n in counts.items():
        assert len(by_partition[p]) == n, f"partition {p}: expected {n}, got {len(by_partition[p])}"
    return by_partition


def sample_messages(n: int, *, tag: str = "", base_timestamp: int = 1_700_000_000_000) -> list[Msg]:
    """``n`` varied messages: null keys, null values, empty values, binary bytes, headers
    (one with a null value, repeated names), fixed CreateTime timestamps."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{tag}-{i}".encode()
        if i % 5 == 2:
            value: bytes | None = None
        elif i % 11 == 4:
            value = b""
        else:
            value = bytes((i * 31 + j) % 256 for j in range(i % 300)) + f"|{tag}|{i}".encode()
        headers: Headers = ()
        if i % 3 == 0:
            headers = (("trace", f"t{i}".encode()), ("none", None), ("trace", b"\x00\xff"))
        out.append(Msg(key, value, headers, base_timestamp + i * 1000))
    return out


def assert_same_messages(expected: Sequence[Msg], got: Sequence[Message]) -> None:
    """Byte-identical, in order: key, value, headers and timestamp of every message."""
    assert len(got) == len(expected)
    for i, (want, m) in enumerate(zip(expected, got, strict=True)):
        assert as_msg(m) == want, f"message {i} (offset {m.offset()}) differs"
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets), "messages out of partition order"


class ContinuousProducer:
    """An idempotent producer sending ``value-<n>`` to partition 0 from a thread until
    stopped, one message every ``interval`` seconds (0: as fast as it can), recording which
    were acknowledged (delivery callbacks) and every delivery error."""

    def __init__(self, bootstrap: str, topic: str, *, interval: float = 0.0, **config: Any) -> None:
        self.topic = topic
        self.interval = interval
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                **FAST_RECONNECT,
                **config,
            }
        )
        self.sent = 0
        self.acked: list[tuple[int, bytes]] = []  # (offset, value) in acknowledgement order
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="continuous-producer")

    def _on_delivery(self, err: KafkaError | None, m: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((m.offset(), m.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    self.topic, b"value-%d" % self.sent, partition=0, on_delivery=self._on_delivery
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(max(self.interval, 0.001))

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def wait_acked(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.acked) >= count, f"only {len(self.acked)} acknowledged in {timeout}s"

    def stop(self, timeout: float = 60.0) -> None:
        """Stop sending and wait until everything sent is acknowledged (or failed)."""
        self._stop.set()
        self._thread.join()
        try:
            remaining = self.producer.flush(timeout)
        finally:
            self.producer.close()
        assert remaining == 0, f"{remaining} messages never acknowledged"

    def assert_exactly_once(self, values: Sequence[bytes | None]) -> None:
        """``values`` (the partition as read back from offset 0) holds every message sent,
        exactly once, in the order sent, and each at the offset its acknowledgement gave."""
        assert not self.errors, self.errors[:5]
        assert len(self.acked) == self.sent
        expected = [b"value-%d" % i for i in range(self.sent)]
        assert len(values) == len(expected), f"expected {len(expected)}, read {len(values)}"
        assert list(values) == expected
        assert sorted(self.acked) == list(enumerate(expected))


# --- transactions: shared by the standalone and the cluster transaction tests ----------------


def txn_producer(
    bootstrap: str, txn_id: str, *, init_timeout: float = 30.0, **config: Any
) -> Producer:
    """A transactional producer with ``init_transactions`` done (``config`` added as given)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **config}
    )
    producer.init_transactions(init_timeout)
    return producer


def read_values(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    isolation: str,
    expected: int,
    *,
    timeout: float = 20.0,
    **config: Any,
) -> list[bytes]:
    """Values of ``partitions`` from the start with ``isolation.level=isolation``, polled
    until ``expected`` arrived and one more second passed quietly (or ``timeout``): a reader
    that stopped at exactly ``expected`` would miss what should not be there."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("reader"),
         "isolation.level": isolation, "enable.auto.commit": False, **QUIET, **config}
    )  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
                quiet_until = None
            if len(got) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        c.close()
    return got


def committed_offset(
    bootstrap: str,
    group: str,
    topic: str,
    *,
    partition: int = 0,
    timeout: float = 10.0,
    **config: Any,
) -> int:
    """The offset ``group`` has committed for ``topic``'s ``partition`` (negative: none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    try:
        (tp,) = c.committed([TopicPartition(topic, partition)], timeout=timeout)
        return int(tp.offset)
    finally:
        c.close()


def read_partition(
    bootstrap: str, topic: str, partition: int, timeout: float = 30.0, **config: Any
) -> list[bytes | None]:
    """Every committed message of the partition, from offset 0 to its high watermark; the
    offsets read must be exactly ``0 .. high watermark - 1``. ``config``: more client
    settings (a secured cluster's)."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("reader"),
         "enable.auto.commit": False, **QUIET, **config}
    )  # fmt: skip
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        c.assign([TopicPartition(topic, partition, 0)])
        read: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(read) < high and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                read.append(m)
    finally:
        c.close()
    offsets = [m.offset() for m in read]
    assert offsets == list(range(high)), f"expected offsets 0..{high - 1}, read {offsets[:10]}…"
    return [m.value() for m in read]
