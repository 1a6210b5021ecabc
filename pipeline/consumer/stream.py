"""``KafkaStream``: a blocking iterator over one consumer thread's partitions (Kafka 0.8's).

A consumer that reads a topic with n streams is n assignor members; the partitions dealt to
member ``<consumer id>-<i>`` are delivered by stream i, as :class:`MessageAndMetadata`. Each
stream has a bounded queue (``queued.max.messages``) of ``(generation, message)`` pairs that
the fetcher thread fills; ``None`` in the queue marks the end (the connector has shut down).

``next()`` blocks until a message arrives that :meth:`OwnedPartitions.accept
<sluice.pipeline.consumer.owned.OwnedPartitions.accept>` lets through — which is the moment
the message counts as consumed, so that the next commit covers it — raises
:class:`ConsumerTimeoutError` after ``consumer.timeout.ms`` without one (when set), and ends
(``StopIteration``, on this and every later call) once :meth:`KafkaStream.end` was called.

Thread-safety: one thread reads a stream at a time (Kafka 0.8's rule); the fetcher thread
puts into it and the rebalance thread clears it concurrently with that reader.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.owned import OwnedPartitions

__all__ = [
    "ConsumerTimeoutError",
    "ConsumerTimeoutException",
    "KafkaStream",
    "MessageAndMetadata",
]


class ConsumerTimeoutError(Exception):
    """No message arrived on a stream within ``consumer.timeout.ms`` (Kafka 0.8's
    ``ConsumerTimeoutException``). The stream stays usable: call ``next()`` again."""


ConsumerTimeoutException = ConsumerTimeoutError


@dataclass(frozen=True, slots=True)
class MessageAndMetadata:
    """One consumed message (Kafka 0.8's ``MessageAndMetadata``). ``timestamp`` is in ms."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: tuple[tuple[str, bytes | None], ...]


# A queue holds (generation, message) pairs, and None once the stream has ended.
_Item = tuple[int, MessageAndMetadata] | None

# How long a blocked next() sleeps between checks that the stream has ended.
_POLL_S = 0.5


class KafkaStream:
    """The messages of the partitions dealt to one consumer thread (see the module docstring).

    Made by the connector's ``create_message_streams``, not by users.
    """

    def __init__(
        self,
        topic: str,
        index: int,
        owned: OwnedPartitions,
        *,
        consumer_id: str,
        capacity: int,
        timeout_ms: int,
    ) -> None:
        self.topic = topic
        self.index = index
        self._owned = owned
        self._consumer_id = consumer_id
        self._timeout_ms = timeout_ms
        self._queue: queue.Queue[_Item] = queue.Queue(capacity)
        self._ended = threading.Event()

    def __repr__(self) -> str:
        return f"KafkaStream({self.topic!r}, {self.index}, {self._consumer_id!r})"

    def __iter__(self) -> KafkaStream:
        return self

    def __next__(self) -> MessageAndMetadata:
        timeout_ms = self._timeout_ms
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while True:
            if self._ended.is_set():
                raise StopIteration
            wait = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=max(wait, 0.0))
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise ConsumerTimeoutError(
                        f"no message on {self!r} within {timeout_ms} ms"
                    ) from None
                continue
            if item is None:
                self._queue.put_nowait(None)  # keep ending on later calls
                raise StopIteration
            generation, message = item
            tp = TopicPartition(message.topic, message.partition)
            if self._owned.accept(generation, tp, message.offset):
                return message

    # ---------------------------------------------------------------- for the connector

    def put(self, generation: int, message: MessageAndMetadata, timeout: float) -> bool:
        """Queue a message fetched in ``generation``; False if the queue stayed full."""
        try:
            self._queue.put((generation, message), timeout=timeout)
            return True
        except queue.Full:
            return False

    def clear(self) -> None:
        """Drop everything queued (it is stale: the generation changed)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def end(self) -> None:
        """End the stream: ``next()`` raises ``StopIteration`` from now on. Idempotent."""
        self._ended.set()
        self.clear()
        self._queue.put_nowait(None)
