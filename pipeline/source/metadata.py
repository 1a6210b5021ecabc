"""Driver side of the ``sluice`` source: which partitions exist and where their logs begin and end.

``KafkaMetadata`` wraps one confluent-kafka ``Consumer`` (never subscribed, never committing)
for the two questions offset planning asks: ``partitions_per_topic()`` (a Metadata request;
internal ``__``-topics are left out, as Kafka's pattern subscription does) and ``bounds()``
(ListOffsets earliest/latest per partition: ``LogBounds(log_start, high watermark)``);
``assigned_bounds(strategy)`` asks both for the partitions a consumer strategy assigns.
Use it as a context manager; it is for one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.options import ConsumerStrategy
from sluice.pipeline.source.ranges import LogBounds

__all__ = ["KafkaMetadata", "MetadataError"]


class MetadataError(RuntimeError):
    """The cluster did not answer a metadata or offsets request usefully."""


class KafkaMetadata:
    """Partition counts and log bounds from the cluster at ``config['bootstrap.servers']``."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._consumer = Consumer(dict(config))

    def partitions_per_topic(self) -> dict[str, int]:
        """``{topic: partition count}`` for every non-internal topic without an error."""
        try:
            metadata = self._consumer.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise MetadataError(f"metadata request: expected an answer, found {exc}") from None
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if not name.startswith("__") and topic.error is None and topic.partitions
        }

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """``LogBounds`` of each partition (one ListOffsets round trip per partition)."""
        result: dict[TopicPartition, LogBounds] = {}
        for tp in partitions:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    KafkaTopicPartition(tp.topic, tp.partition),
                    timeout=self.timeout_s,
                    cached=False,
                )
            except KafkaException as exc:
                raise MetadataError(
                    f"{tp.topic}-{tp.partition}: expected log start and end offsets, found {exc}"
                ) from None
            result[tp] = LogBounds(low, high)
        return result

    def assigned_bounds(
        self, strategy: ConsumerStrategy
    ) -> tuple[list[TopicPartition], dict[TopicPartition, LogBounds]]:
        """The partitions ``strategy`` assigns, and the bounds of those that exist.

        An ``assign`` may name partitions that do not exist; they are assigned without bounds,
        and resolving them raises ``UnknownPartitionError``.
        """
        counts = self.partitions_per_topic()
        assigned = strategy.assigned(counts)
        existing = [tp for tp in assigned if tp.partition < counts.get(tp.topic, 0)]
        return assigned, self.bounds(existing)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> KafkaMetadata:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
