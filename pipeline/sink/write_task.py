"""``KafkaWriteTask``: one Spark task's rows sent to Kafka, every delivery report checked.

Spark's ``KafkaWriteTask`` with confluent-kafka's ``Producer`` (librdkafka) in its place. One
task, on the executor:

1. open a producer from the sink's settings (``SinkOptions.producer``: idempotent, acks=all
   unless overridden), with a delivery callback on every record;
2. for each Arrow batch, turn the sink columns (``SinkColumns``) into records — string keys and
   values UTF-8 encoded, struct values Confluent-framed in the write's format
   (``value_encoders.value_encoder``), the ``topic`` option or each row's ``topic``,
   ``partition`` (null: the producer's partitioner), ``headers``, ``timestamp`` (ms) — and
   hand them to ``produce``; a full local queue is waited out (``poll``), never dropped;
   sending stops at the first failed delivery, as Spark's does;
3. ``flush``: wait until every record has its delivery report (bounded by
   ``SinkOptions.flush_timeout_s``);
4. only when every record sent was acknowledged, return a ``SinkCommitMessage`` (records and the
   first/last offset written per partition). Otherwise raise, which fails the task:

   * ``DeliveryFailedError`` — a delivery report carried an error (the broker refused the
     record, or librdkafka gave up after ``message.timeout.ms``: a broker down too long);
   * ``UndeliveredRecordsError`` — the flush ended with records still without a report;
   * ``ProducerFatalError`` — librdkafka reported a fatal error (the idempotent producer's
     guarantees are broken, e.g. its producer id was fenced);
   * ``NullTopicError`` / ``NullHeaderKeyError`` — a row Kafka cannot represent.

   Before raising, the producer's queue is purged, so nothing of a failed task is sent later.

Delivery is **at-least-once**, as Spark's own Kafka sink (``KafkaDataWriter``: ``commit``
flushes and checks the callbacks' errors, ``abort`` does nothing; no transactions): a failed
task may have written part of its rows, and Spark's retry of the task (or of the micro-batch)
writes them again. The idempotent producer only removes duplicates from librdkafka's own
retries inside one producer session; a new task is a new session.

Why not exactly-once, although the broker has transactions: a transaction that the task
commits itself (at the end of ``run``) makes its rows visible before Spark knows whether the
job or micro-batch succeeds, so a later failure of another task, or a micro-batch re-run after
a restart, still writes them twice. Exactly-once needs each task's transaction committed only
when Spark commits the job, i.e. opened by a producer in the executor's Python worker and
committed by the driver (``commit`` of the batch or stream writer), another process. Kafka's
producer API cannot take over another instance's transaction: ``init_transactions`` with the
same ``transactional.id`` *aborts* the open one (fencing), and resuming it needs the producer
id and epoch, which no librdkafka (confluent-kafka) call accepts — Flink's exactly-once Kafka
sink sets them in Java's producer internals by reflection. Spark's Python Data Source API has
no task-side hook after the job's commit either. So the guarantee is Spark's; a reader that
must see each row once deduplicates (by key, or by a row id carried in a header).

Not thread-safe: one task thread drives a ``KafkaWriteTask``; librdkafka runs the callbacks
on that thread, inside ``poll`` / ``flush``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from sluice.pipeline.sink.columns import SinkColumns
from sluice.pipeline.sink.options import SinkOptions
from sluice.pipeline.sink.value_encoders import ValueEncoder, value_encoder
from sluice.pipeline.sink.writer_schema import WriterSchema

__all__ = [
    "DeliveryFailedError",
    "KafkaWriteTask",
    "NullHeaderKeyError",
    "NullTopicError",
    "ProducerFatalError",
    "SinkCommitMessage",
    "SinkWriteError",
    "UndeliveredRecordsError",
]

log = logging.getLogger("sluice.sink")

POLL_EVERY = 1000  # records between two poll(0) calls: serve delivery reports as we go
QUEUE_FULL_WAIT_S = 0.1


class SinkWriteError(RuntimeError):
    """A task could not write all of its rows; the task fails and Spark retries it."""


class DeliveryFailedError(SinkWriteError):
    """A delivery report carried an error: the record is not known to be in Kafka."""


class UndeliveredRecordsError(SinkWriteError):
    """The final flush ended with records that have no delivery report yet."""


class ProducerFatalError(SinkWriteError):
    """librdkafka reported a fatal producer error (the idempotence guarantees are void)."""


class NullTopicError(SinkWriteError):
    """A row's ``topic`` is null and there is no ``topic`` option."""


class NullHeaderKeyError(SinkWriteError):
    """A header's key is null; Kafka headers need a string key."""


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: its record count and, per ``topic-partition``, the first and last
    offset the broker gave (every record of the task in between, others' too)."""

    records: int = 0
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)


def _bytes(column: pa.Array, kind: str | None) -> list[bytes | None]:
    values: list[Any] = column.to_pylist()
    if kind == "string":
        return [None if v is None else v.encode("utf-8") for v in values]
    return values


_MS_PER_UNIT = {"s": 1000.0, "ms": 1.0, "us": 0.001, "ns": 0.000001}


def _timestamps_ms(column: pa.Array, kind: str | None) -> list[int | None]:
    if kind == "double":  # seconds, as Spark's cast of a double to a timestamp
        return [None if v is None else math.floor(v * 1000) for v in column.to_pylist()]
    scale = _MS_PER_UNIT[column.type.unit]
    raw = column.cast(pa.int64()).to_pylist()
    return [None if v is None else math.floor(v * scale) for v in raw]


class KafkaWriteTask:
    """One task's writes; see the module doc. ``writer`` is the writer schema for struct values
    (a typed ``valueFormat``), ``None`` for string/binary ones."""

    def __init__(
        self, options: SinkOptions, columns: SinkColumns, writer: WriterSchema | None = None
    ) -> None:
        self.options = options
        self.columns = columns
        self.writer = writer
        self.sent = 0
        self.delivered = 0
        self.offsets: dict[tuple[str, int], tuple[int, int]] = {}
        self._failure: SinkWriteError | None = None
        self._encoder: ValueEncoder | None = None

    # -- callbacks (on this thread, from poll/flush) -------------------------------------------

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            if self._failure is None:
                partition = msg.partition()
                where = "unassigned" if partition is None or partition < 0 else partition
                self._failure = DeliveryFailedError(
                    f"{msg.topic()} partition {where}: expected the broker to "
                    f"acknowledge the record, found {err.name()}: {err.str()}; the task fails "
                    "so that Spark retries it (at-least-once: rows may be written twice)"
                )
            return
        self.delivered += 1
        tp = (msg.topic(), msg.partition())
        offset = msg.offset()
        first, last = self.offsets.get(tp, (offset, offset))
        self.offsets[tp] = (min(first, offset), max(last, offset))

    def _on_error(self, err: Any) -> None:
        if err.fatal() and self._failure is None:
            self._failure = ProducerFatalError(
                f"expected a working idempotent producer, found a fatal error {err.name()}: "
                f"{err.str()}"
            )
        else:  # transport errors and the like: librdkafka retries until message.timeout.ms
            log.debug("producer: %s", err)

    # -- the task ------------------------------------------------------------------------------

    def run(self, batches: Iterable[pa.RecordBatch]) -> SinkCommitMessage:
        """Send every row of ``batches``; return only once every one was acknowledged."""
        from confluent_kafka import Producer

        producer = Producer({**self.options.producer, "error_cb": self._on_error})
        try:
            for batch in batches:
                self._send(producer, batch)
                if self._failure is not None:
                    raise self._failure
            remaining = producer.flush(self.options.flush_timeout_s)
            if self._failure is not None:
                raise self._failure
            if remaining or self.delivered != self.sent:
                raise UndeliveredRecordsError(
                    f"expected a delivery report for each of the {self.sent} records sent "
                    f"within {self.options.flush_timeout_s:g} s, found {self.delivered} "
                    f"acknowledged and {remaining} still queued"
                )
        except BaseException:
            # Nothing of a failed task goes out later: the retry writes the rows again.
            producer.purge()
            producer.flush(0)
            raise
        return SinkCommitMessage(
            self.delivered,
            {f"{t}-{p}": span for (t, p), span in sorted(self.offsets.items())},
        )

    def _send(self, producer: Any, batch: pa.RecordBatch) -> None:
        columns, n = self.columns, batch.num_rows
        if columns.topic_column:
            topics: list[str | None] = batch.column("topic").to_pylist()
        else:
            topics = [self.options.topic] * n
        keys = _bytes(batch.column("key"), columns.key) if columns.key else [None] * n
        values = self._values(batch.column("value"))
        partitions = batch.column("partition").to_pylist() if columns.partition else [None] * n
        headers: list[Any] = batch.column("headers").to_pylist() if columns.headers else [None] * n
        if columns.timestamp:
            stamps = _timestamps_ms(batch.column("timestamp"), columns.timestamp)
        else:
            stamps = [None] * n
        for i in range(n):
            if self._failure is not None:
                return
            topic = topics[i]
            if topic is None:
                raise NullTopicError(
                    "null topic present in the data: expected a topic in every row's topic "
                    "column, found null; set the topic option for a default topic"
                )
            extra: dict[str, Any] = {}
            if partitions[i] is not None:
                extra["partition"] = partitions[i]
            if headers[i]:
                extra["headers"] = self._headers(headers[i], topic)
            if stamps[i] is not None:
                extra["timestamp"] = stamps[i]
            self._produce(producer, topic, keys[i], values[i], extra)
            if self.sent % POLL_EVERY == 0:
                producer.poll(0)

    def _values(self, column: pa.Array) -> list[bytes | None]:
        if self.columns.value != "struct":
            return _bytes(column, self.columns.value)
        if self._encoder is None:
            assert self.writer is not None  # the sink checked a typed valueFormat has a schema
            self._encoder = value_encoder(self.writer, column.type)
        return self._encoder.encode_column(column)

    @staticmethod
    def _headers(found: list[dict[str, Any]], topic: str) -> list[tuple[str, bytes | None]]:
        pairs = []
        for header in found:
            if header["key"] is None:
                raise NullHeaderKeyError(
                    f"a row for {topic}: expected every header to have a string key, found null"
                )
            pairs.append((header["key"], header["value"]))
        return pairs

    def _produce(
        self, producer: Any, topic: str, key: Any, value: Any, extra: dict[str, Any]
    ) -> None:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=self._on_delivery, **extra)
                break
            except BufferError:  # librdkafka's queue is full: serve reports, then retry
                producer.poll(QUEUE_FULL_WAIT_S)
        self.sent += 1
