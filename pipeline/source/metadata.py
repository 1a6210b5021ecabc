"""Driver side of the ``sluice`` source: which partitions exist and where their logs begin and end.

``KafkaMetadata`` wraps one confluent-kafka ``Consumer`` (never subscribed, never committing)
for the two questions offset planning asks: ``partitions_per_topic()`` (a Metadata request;
internal ``__``-topics are left out, as Kafka's pattern subscription does) and ``bounds()``
(ListOffsets earliest/latest, batched: one request per partition leader and bound, not one
round trip per partition: ``LogBounds(log_start, log_end)``);
``assigned_bounds(strategy)`` asks both for the partitions a consumer strategy assigns;
``offsets_for_times()`` (ListOffsets by timestamp) gives each partition's first offset whose
record timestamp is at least the one asked for, ``None`` when no record is that late.

The log end is where a reader with the config's ``isolation.level``
(``sluice.pipeline.source.isolation``; absent: ``read_committed``) can read to, as Spark's
``KafkaOffsetReaderAdmin`` lists offsets with its consumers' level: under ``read_committed``
the **last stable offset** (LSO: the first offset of the oldest open transaction; the high
watermark when none is open), so "latest" ranges end before any open transaction and the split
reader never waits on one; under ``read_uncommitted`` the high watermark. ListOffsets carries
the isolation level of the client that sends it (librdkafka writes its handle's
``isolation.level`` into every ListOffsets request, v2+), so the consumer is created with the
level set explicitly, never librdkafka's default. (Not an ``AdminClient.list_offsets(...,
isolation_level=...)``: a read's config holds consumer settings, and an admin client — a
producer handle in librdkafka — warns about every one of them.)

Every lookup is tried up to ``attempts`` times, ``retry_interval_s`` apart (Spark's
``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``, ``KafkaOffsetReaderAdmin.
withRetries``): each failed attempt but the last logs a warning ("attempt k of n of <lookup>
failed"); the last raises ``MetadataError``, naming the attempts, their interval and the last
failure when there were several. Spark makes ``numRetries`` attempts in all, not
``1 + numRetries``, and so does this. A refused login is not retried: librdkafka reports it
only to an error callback (the lookup itself fails with a bare "transport failure"), so the
consumer's ``error_cb`` keeps the last authentication error and a failed lookup raises
``SourceAuthenticationError`` with the broker's message at once — as Spark's Java client fails
on a ``SaslAuthenticationException``. Use it as a context manager; it is for one thread.

The handle reconnects after 10 ms, not librdkafka's 100 (``_RECONNECT_BACKOFF``: a fresh
handle's first answer otherwise waits ~50 ms), unless the config sets a reconnect backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.broker_failures import BrokerFailures
from sluice.pipeline.source.isolation import ISOLATION_LEVEL_KEY, isolation_level
from sluice.pipeline.source.options import ConsumerStrategy
from sluice.pipeline.source.ranges import LogBounds

__all__ = ["KafkaMetadata", "MetadataError", "SourceAuthenticationError"]

log = logging.getLogger("sluice.source")

_T = TypeVar("_T")

# ListOffsets' special timestamps.
_EARLIEST = -2
_LATEST = -1

# librdkafka (2.x) retires a new handle's bootstrap connection as soon as the first Metadata
# answer names the brokers; a request still in flight on it fails and is sent again on a new
# connection, which librdkafka holds back for half of ``reconnect.backoff.ms`` ("still
# suppressed for 49ms" in its debug log). So the first ``list_topics()`` of a fresh handle
# took 56-58 ms in most tries (3.7 ms when the topics' answer came first) with the default
# 100 ms, and 16-17 ms with 10. This handle answers a few questions and goes: it uses 10 ms
# unless the config sets either backoff (reconnects to a broker that is down still back off
# exponentially, up to ``reconnect.backoff.max.ms``).
_RECONNECT_BACKOFF = {"reconnect.backoff.ms": 10}
_BACKOFF_KEYS = ("reconnect.backoff.ms", "reconnect.backoff.max.ms")


class MetadataError(RuntimeError):
    """The cluster did not answer a metadata or offsets request usefully."""


class SourceAuthenticationError(MetadataError):
    """The cluster refused the source's login (SASL or TLS); carries the broker's message."""


class KafkaMetadata:
    """Partition counts and log bounds from the cluster at ``config['bootstrap.servers']``.

    ``isolation_level`` is the config's (``read_committed`` unless it says otherwise): the log
    ends ``bounds()`` reports are LSOs under ``read_committed``, high watermarks otherwise.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        timeout_s: float = 30.0,
        *,
        attempts: int = 1,
        retry_interval_s: float = 1.0,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts: expected an integer >= 1, found {attempts}")
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.retry_interval_s = retry_interval_s
        self.isolation_level = isolation_level(config)
        self._auth_error: KafkaError | None = None
        # librdkafka's connection failures counted per broker, not streamed to stderr; a
        # failed lookup names them (``failures.summary()``).
        self.failures = BrokerFailures()
        self.brokers: list[str] = []  # host:port of the brokers the last metadata named
        backoff = {} if any(k in config for k in _BACKOFF_KEYS) else _RECONNECT_BACKOFF
        self._consumer = Consumer(
            {
                **backoff,
                **self.failures.settings(config),
                ISOLATION_LEVEL_KEY: self.isolation_level,
                "error_cb": self._on_error,
            }
        )

    def _on_error(self, error: KafkaError) -> None:
        self.failures.on_error(error)
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self._auth_error = error

    def _refused_login(self) -> SourceAuthenticationError | None:
        """The login refusal behind a failed lookup, if librdkafka reported one."""
        self._consumer.poll(0)  # serves the error callbacks queued meanwhile
        error = self._auth_error
        if error is None:
            return None
        return SourceAuthenticationError(
            f"authentication: expected the cluster to accept the source's login "
            f"(kafka.security.protocol, kafka.sasl.*, kafka.ssl.*), found {error.str()}"
        )

    def _retried(self, what: str, lookup: Callable[[], _T]) -> _T:
        for attempt in range(1, self.attempts + 1):
            try:
                return lookup()
            except MetadataError as exc:
                refused = self._refused_login()
                if refused is not None:
                    raise refused from None
                if attempt == self.attempts == 1:  # no retries (the load's planner): as is
                    raise
                if attempt == self.attempts:
                    raise MetadataError(
                        f"{what}: expected an answer within {self.attempts} attempts "
                        f"{self.retry_interval_s:g} s apart (fetchOffset.numRetries, "
                        f"fetchOffset.retryIntervalMs), found the last failing with: {exc}"
                    ) from None
                log.warning("attempt %d of %d of %s failed: %s", attempt, self.attempts, what, exc)
                time.sleep(self.retry_interval_s)
        raise AssertionError("unreachable")  # pragma: no cover

    def partitions_per_topic(self) -> dict[str, int]:
        """``{topic: partition count}`` for every non-internal topic without an error."""
        return self._retried("a metadata request", self._partitions_per_topic)

    def _partitions_per_topic(self) -> dict[str, int]:
        try:
            metadata = self._consumer.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            self._consumer.poll(0)  # serves the logs and errors queued meanwhile
            failed = self.failures.summary()
            if failed:
                raise MetadataError(
                    f"metadata request: expected an answer, found brokers not answering: {failed}"
                ) from None
            raise MetadataError(f"metadata request: expected an answer, found {exc}") from None
        self.brokers = [f"{b.host}:{b.port}" for b in metadata.brokers.values()]
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if not name.startswith("__") and topic.error is None and topic.partitions
        }

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """``LogBounds`` of each partition (two batched ListOffsets lookups, one request per
        leader each): log start and, under ``read_committed``, the LSO as log end (else the
        high watermark)."""
        wanted = list(partitions)
        return self._retried("a log bounds request", lambda: self._bounds(wanted))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset whose record timestamp is >= its timestamp (ms);
        ``None`` when no record is that late (ListOffsets answers -1)."""
        wanted = dict(timestamps)
        return self._retried("an offsets-by-timestamp request", lambda: self._for_times(wanted))

    def _for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        if not timestamps:
            return {}
        request = [KafkaTopicPartition(tp.topic, tp.partition, ts) for tp, ts in timestamps.items()]
        try:
            answer = self._consumer.offsets_for_times(request, timeout=self.timeout_s)
        except KafkaException as exc:
            raise MetadataError(
                f"offsets by timestamp: expected an offset per partition, found {exc}"
            ) from None
        result: dict[TopicPartition, int | None] = {}
        for found in answer:
            tp = TopicPartition(found.topic, found.partition)
            if found.error is not None:
                raise MetadataError(
                    f"{tp.topic}-{tp.partition}: expected an offset for timestamp "
                    f"{timestamps[tp]}, found {found.error}"
                )
            result[tp] = found.offset if found.offset >= 0 else None
        return result

    def _bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        # Two batched ListOffsets lookups (timestamp -2: earliest, -1: latest), which
        # librdkafka sends as one request per partition leader each, not one round trip per
        # partition and bound (get_watermark_offsets). The handle's isolation level goes into
        # every ListOffsets request, so "latest" is the LSO under read_committed.
        wanted = list(partitions)
        if not wanted:
            return {}
        starts = self._list_offsets(wanted, _EARLIEST, "log start")
        ends = self._list_offsets(wanted, _LATEST, "log end")
        return {tp: LogBounds(starts[tp], ends[tp]) for tp in wanted}

    def _list_offsets(
        self, partitions: list[TopicPartition], which: int, what: str
    ) -> dict[TopicPartition, int]:
        request = [KafkaTopicPartition(tp.topic, tp.partition, which) for tp in partitions]
        try:
            answer = self._consumer.offsets_for_times(request, timeout=self.timeout_s)
        except KafkaException as exc:
            raise MetadataError(
                f"{len(partitions)} partitions: expected their {what} offsets, found {exc}"
            ) from None
        result: dict[TopicPartition, int] = {}
        for found in answer:
            tp = TopicPartition(found.topic, found.partition)
            if found.error is not None or found.offset < 0:
                raise MetadataError(
                    f"{tp.topic}-{tp.partition}: expected its {what} offset, found "
                    f"{found.error or found.offset}"
                )
            result[tp] = found.offset
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
