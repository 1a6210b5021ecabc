"""``Fetcher``: the thread that fetches the owned partitions and feeds the streams.

It alone uses its confluent-kafka ``Consumer`` handle, and uses it with ``assign()`` only:
group membership and offsets live in ZooKeeper, not in the broker. Its loop:

1. If :class:`~sluice.pipeline.consumer.owned.OwnedPartitions` is in a new generation, apply
   that generation's plan: ``assign()`` exactly the owned partitions at their start offsets
   (``unassign()`` when nothing is owned).
2. Nothing owned: sleep until :meth:`Fetcher.wake` (a rebalance changed the table) or
   ``fetch.wait.max.ms``.
3. Otherwise ``consume()`` a batch and put each message, tagged with the generation it was
   fetched in, on the queue of the stream its partition belongs to. A full queue blocks the
   loop (back-pressure, ``queued.max.messages``); a generation change or shutdown meanwhile
   makes the rest of the batch stale, and it is dropped.

Fetch errors are logged and retried after ``fetch.wait.max.ms``: librdkafka reconnects and
finds new leaders on its own. The loop ends when the connector's ``stopping`` event is set.

Thread-safety: :meth:`Fetcher.run` runs on the fetcher thread only; :meth:`Fetcher.wake` and
:meth:`Fetcher.discard_queued` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.owned import OwnedPartitions
from sluice.pipeline.consumer.stream import KafkaStream, MessageAndMetadata

__all__ = ["Fetcher"]

log = logging.getLogger(__name__)

# Messages per consume() call; a batch is routed before the next fetch.
_BATCH = 500
# How long one put on a full stream queue blocks before the generation is checked again.
_PUT_WAIT_S = 0.1


class Fetcher:
    """Fetches the owned partitions with one confluent-kafka handle (see the module docstring)."""

    def __init__(
        self,
        kafka: Consumer,
        owned: OwnedPartitions,
        streams: Mapping[tuple[str, int], KafkaStream],
        *,
        consumer_id: str,
        wait_ms: int,
        stopping: threading.Event,
    ) -> None:
        self._kafka = kafka
        self._owned = owned
        self._streams = streams  # (topic, stream index) -> stream
        self._consumer_id = consumer_id
        self._wait = wait_ms / 1000
        self._stopping = stopping
        self._wakeup = threading.Event()

    def wake(self) -> None:
        """The owned partitions changed: apply the new generation now."""
        self._wakeup.set()

    def discard_queued(self) -> None:
        """Drop every queued message (they are stale after a release)."""
        for stream in self._streams.values():
            stream.clear()

    def run(self) -> None:
        """The fetcher thread's loop; returns once ``stopping`` is set."""
        applied = -1
        routes: dict[TopicPartition, KafkaStream] = {}
        while not self._stopping.is_set():
            change = self._owned.fetch_plan(applied)
            if change is not None:
                applied, plan = change
                routes = {tp: self._streams[(tp.topic, s)] for tp, (s, _) in plan.items()}
                parts = [
                    KafkaTopicPartition(tp.topic, tp.partition, o) for tp, (_, o) in plan.items()
                ]
                try:
                    if parts:
                        self._kafka.assign(parts)
                    else:
                        self._kafka.unassign()
                except KafkaException as e:  # cannot happen with a live handle; retry anyway
                    log.warning("%s: assign failed: %s", self._consumer_id, e)
                    applied, routes = -1, {}
                    self._stopping.wait(self._wait)
                    continue
            if not routes:
                self._wakeup.wait(self._wait)
                self._wakeup.clear()
                continue
            try:
                batch = self._kafka.consume(num_messages=_BATCH, timeout=self._wait)
            except KafkaException as e:
                log.warning("%s: fetch failed: %s", self._consumer_id, e)
                self._stopping.wait(self._wait)
                continue
            for m in batch:
                error = m.error()
                if error is not None:
                    log.warning("%s: fetch error: %s", self._consumer_id, error)
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                stream = routes.get(TopicPartition(str(topic), int(partition or 0)))
                if stream is None or offset is None:
                    continue
                ts_type, ts = m.timestamp()
                message = MessageAndMetadata(
                    topic=str(topic),
                    partition=int(partition or 0),
                    offset=offset,
                    key=m.key(),
                    value=m.value(),
                    timestamp=None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=tuple(m.headers() or ()),  # type: ignore[arg-type]
                )
                if not self._enqueue(stream, applied, message):
                    break  # a rebalance or shutdown made the rest of the batch stale

    def _enqueue(self, stream: KafkaStream, generation: int, message: MessageAndMetadata) -> bool:
        while not stream.put(generation, message, _PUT_WAIT_S):
            if self._stopping.is_set() or self._owned.generation != generation:
                return False
        return True
