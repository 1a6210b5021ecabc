"""Executor side of the ``sluice`` source: fetch exactly ``[start, end)`` of one partition.

A split is what the driver's ``partitions()`` hands Spark: an ``OffsetRange``
(``sluice.pipeline.source.ranges``), one topic-partition's ``[start, end)``. ``read_split`` runs
inside a Spark Python worker; it opens its own
confluent-kafka ``Consumer`` (nothing with a socket is ever pickled), ``assign()``s the
partition at ``start`` and consumes until the range is done, yielding ``pyarrow.RecordBatch``es
of at most ``batch_rows`` rows in ``ARROW_SCHEMA`` — the Arrow form of Spark's Kafka source
schema, compared by Spark with ``Schema.equals``, so ``binary`` (not ``large_binary``),
``timestamp[us, tz=UTC]`` and 32-bit ``partition``/``timestampType`` are all load-bearing.

How the range is bounded
========================
The consumer delivers records in offset order from ``start`` (librdkafka drops the records of a
fetched batch below the fetch offset, decompresses gzip/snappy/lz4/zstd batches and swallows
transaction control records). The range is done when the reader's *position* — the next offset
it would read — reaches ``end``, never when it has counted ``end - start`` records: offsets
without a record are normal. Transaction markers (control batches) are never delivered, and
with ``isolation.level=read_committed`` (Sluice's default, ``sluice.pipeline.source.isolation``)
neither are the records of aborted transactions, so a range may yield fewer records than
``end - start`` and its last offsets may be markers (a range planned at the last stable offset
usually ends on a commit marker). The loop keeps ``position`` = one past the last offset seen
and stops as soon as one of these holds:

* a record at offset ``>= end`` arrives — it (and the rest of its fetched batch) is dropped;
* a partition-EOF event (``enable.partition.eof``) reports the end this consumer reads to —
  the high watermark, or the last stable offset (LSO) under ``read_committed`` — at or past
  ``end``: the offsets between the last record and ``end`` had no record for this reader
  (markers, aborted records, compaction);
* ``position >= end`` after a record — the common case, the last offset is ``end - 1``.

An EOF *below* ``end`` under ``read_committed`` whose partition's high watermark (from the same
fetch responses) is at or past ``end`` is an open transaction holding ``[LSO, end)`` — a range
planned with ``read_uncommitted`` or by hand: the reader waits for the transaction to end (a
commit or abort marker moves the LSO and a new EOF or records follow; the broker aborts an
abandoned transaction after ``transaction.timeout.ms``). Only an end below ``end`` that the
high watermark confirms is data loss: the log lost offsets the driver saw (truncation, or the
topic was recreated); an out-of-range error at ``start`` means retention deleted them after the
driver planned the split. With ``failOnDataLoss`` the task raises ``DataLossError``
naming topic, partition and offsets; without it the reader skips to what the log still has
(``SplitResult.lost`` counts the skipped offsets). No progress for ``poll_timeout_s`` raises
``SplitTimeoutError`` (naming the LSO when an open transaction is what it waited on): a split
never hangs a job. Progress is a record or a partition event (EOF, out of range), never a
connection error; librdkafka's connection failures are counted per broker
(``sluice.pipeline.source.broker_failures``) instead of streamed to stderr, and a timeout
while they occur is ``BrokersUnreachableError`` naming the brokers and their counts.

Cost per record
===============
A chunk from ``consume()`` with no error event and every offset inside the range (nearly all
of them) is kept whole; only a chunk with an event or a range bound in it is walked message by
message with the rules above. Columns are made per batch, one list comprehension per
``Message`` accessor, the rest in Arrow compute (``_BatchBuilder``). Measured on 125,000-record
splits of 200-byte values: 1.85 µs → 1.4 µs of CPU per record in the process, of which about
1 µs is librdkafka's own (fetch, parse, one ``Message`` object per record); bigger Arrow
batches than 4,096 rows did not help. Going lower means not making a ``Message`` per record:
speaking Fetch directly (plaintext, ``read_uncommitted``; the consumer stays for the rest) and
decoding record batches into Arrow buffers in bulk, with one Python step per batch, not per
record.

Every function here is reentrant; a ``Consumer`` lives inside one ``read_split`` call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from sluice.pipeline.source.broker_failures import BrokerFailures
from sluice.pipeline.source.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_KEY,
    READ_COMMITTED,
    isolation_level,
)
from sluice.pipeline.source.ranges import OffsetRange

__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_NO_HEADERS",
    "BrokersUnreachableError",
    "SPARK_SCHEMA_DDL",
    "SPARK_SCHEMA_DDL_NO_HEADERS",
    "DataLossError",
    "SplitConsumer",
    "SplitResult",
    "SplitTimeoutError",
    "consumer_config",
    "consumer_settings",
    "read_split",
]

SPARK_SCHEMA_DDL_NO_HEADERS = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
"""Spark's Kafka source columns (``KafkaRecordToRowConverter.kafkaSchema``)."""
SPARK_SCHEMA_DDL = SPARK_SCHEMA_DDL_NO_HEADERS + ", headers array<struct<key:string,value:binary>>"
"""The same with ``headers`` (Spark's ``includeHeaders=true``; Sluice's default)."""

HEADERS_TYPE = pa.list_(
    pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())]))
)
ARROW_SCHEMA_NO_HEADERS = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)
ARROW_SCHEMA = ARROW_SCHEMA_NO_HEADERS.append(pa.field("headers", HEADERS_TYPE))

# Messages asked of one consume() call: librdkafka hands over what it has fetched, up to this.
_CONSUME_MAX = 10_000

# Options Spark's Kafka source refuses as kafka.* params because the source owns them.
_OWNED = {"enable.auto.commit", "auto.offset.reset", "enable.partition.eof"}


class DataLossError(RuntimeError):
    """Offsets of a split are no longer in the log and ``failOnDataLoss`` is true."""


class SplitTimeoutError(TimeoutError):
    """A split made no progress for ``poll_timeout_s`` seconds."""


class BrokersUnreachableError(SplitTimeoutError):
    """A split made no progress for ``poll_timeout_s`` seconds while librdkafka could not
    connect to the brokers the message names (with their failure counts)."""


@dataclass(slots=True)
class SplitResult:
    """The figures of one split, from the executor that read it to the driver's report.

    ``read_split`` fills in ``rows`` (records fetched), ``bytes`` (key + value + header bytes),
    ``lost`` (offsets skipped with ``failOnDataLoss=false``) and ``seconds`` as batches go out.
    A typed read adds ``errors`` (of those rows, the undecodable ones, sent to the error table)
    and ``schema_ids`` (the writer schema ids of the decoded ones); the nightly load's task
    (``sluice.pipeline.load.split_writer``) adds ``files`` — ``(path relative to the staging
    directory, bytes, rows)`` of every file it wrote, the error file included — and sets
    ``seconds`` to the whole task's time. The load returns this object through Spark's task
    results and its verify phase and report read it by attribute: a split's figures exist once.
    Picklable; filled by one thread.
    """

    split: OffsetRange
    rows: int = 0
    bytes: int = 0
    lost: int = 0
    seconds: float = 0.0
    errors: int = 0
    schema_ids: list[int] = field(default_factory=list)
    files: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def written(self) -> int:
        """Data rows written (fetched minus undecodable)."""
        return self.rows - self.errors


def consumer_settings(
    settings: Mapping[str, Any], *, group_id: str | None = None
) -> dict[str, Any]:
    """The confluent-kafka consumer settings of a read, from librdkafka ``settings`` (keys
    without the ``kafka.`` prefix, Java-only ones already translated).

    As in Spark, the source owns offset handling: auto commit is off and ``auto.offset.reset``
    is ``error`` (an out-of-range fetch must surface as data loss, not silently jump).
    ``isolation.level`` is always set, lower-case: the given one if any, else
    ``read_committed`` — Sluice's default where Spark's is ``read_uncommitted``; the reasons
    are in ``sluice.pipeline.source.isolation``. The driver's metadata consumer and the
    executors' split readers get it from here, so ranges end where the split reader can read
    to (the last stable offset under ``read_committed``). ``group.id`` is the given one, else
    ``group_id``, else a new ``sluice-source-<random>``: a caller that builds the settings once
    (the load: once per run) has one group id for all its consumers. Raises ``ValueError``
    without ``bootstrap.servers`` and ``InvalidIsolationLevelError`` for an unknown level.
    """
    config: dict[str, Any] = {
        "group.id": group_id or f"sluice-source-{uuid.uuid4().hex[:12]}",
        ISOLATION_LEVEL_KEY: DEFAULT_ISOLATION_LEVEL,
        "client.id": "sluice-source",
        "log.connection.close": False,
        # Once its prefetch queue holds queued.min.messages, librdkafka stops fetching for
        # fetch.queue.backoff.ms — 1,000 ms by default, while a split task drains 100,000
        # records in well under a second and then waits (the finding of the broker's consume
        # benchmark, README "Performance"). A kafka.* option still overrides it.
        "fetch.queue.backoff.ms": 10,
    }
    for key, value in settings.items():
        key = key.lower()
        if key not in _OWNED:
            config[key] = value
    if "bootstrap.servers" not in config:
        raise ValueError("option 'kafka.bootstrap.servers': expected host:port[,...], found none")
    config[ISOLATION_LEVEL_KEY] = isolation_level(config)
    config.update(
        {"enable.auto.commit": False, "auto.offset.reset": "error", "enable.partition.eof": True}
    )
    return config


def consumer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """``consumer_settings`` of a read's ``kafka.*`` options: the prefix cut here, the keys
    matched lower-cased, anything else ignored (the audit's and the tests' way in)."""
    cut = len("kafka.")
    return consumer_settings(
        {k.lower()[cut:]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    )


class _BatchBuilder:
    """The records of the next RecordBatch of one split, as confluent-kafka ``Message``s.

    The read path's cost is Python work per record (profiled: about 1.5 µs of a 200-byte
    record's 2 µs went to one method call and six list appends per message). So a chunk that
    ``consume()`` returns whole — no error event, every offset inside the range — is kept as
    the list it came in (one ``extend``), and ``build`` turns the messages into columns with one
    list comprehension per accessor and Arrow compute for the rest (timestamp units, timestamp
    types, byte counts): no Python frame per record.
    """

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.messages: list[Any] = []

    def __len__(self) -> int:
        return len(self.messages)

    def build(self, rows: int) -> tuple[pa.RecordBatch, int]:
        """The first ``rows`` messages as a RecordBatch, and their key + value + header bytes."""
        messages, self.messages = self.messages[:rows], self.messages[rows:]
        n = len(messages)
        keys = pa.array([m.key() for m in messages], pa.binary())
        values = pa.array([m.value() for m in messages], pa.binary())
        stamps = [m.timestamp() for m in messages]  # (librdkafka type, ms)
        millis = pa.array([t[1] for t in stamps], pa.int64())
        # librdkafka's types 0 (not available), 1 (CreateTime), 2 (LogAppendTime) are Kafka's
        # TimestampType ids -1, 0, 1 plus one. Spark keeps -1 ms for "no timestamp".
        kinds = pc.subtract(pa.array([t[0] for t in stamps], pa.int32()), 1)
        arrays = [
            keys,
            values,
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array([m.offset() for m in messages], pa.int64()),
            pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
            kinds,
        ]
        size = _binary_bytes(keys) + _binary_bytes(values)
        schema = ARROW_SCHEMA_NO_HEADERS
        if self.include_headers:
            raw = [m.headers() for m in messages]
            if any(raw):
                # Spark: null, not an empty array, for a record without headers.
                rows_ = [[{"key": k, "value": v} for k, v in h] if h else None for h in raw]
                arrays.append(pa.array(rows_, HEADERS_TYPE))
                size += sum(len(k.encode()) + len(v or b"") for h in raw if h for k, v in h)
            else:
                arrays.append(pa.nulls(n, HEADERS_TYPE))
            schema = ARROW_SCHEMA
        return pa.RecordBatch.from_arrays(arrays, schema=schema), size


def _binary_bytes(array: pa.Array) -> int:
    """The bytes of a binary array's values (nulls count 0)."""
    total = pc.sum(pc.binary_length(array)).as_py()
    return int(total or 0)


class _Cursor:
    """Where one ``read_split`` call stands in its range: ``position`` (the next offset it would
    read) and ``stable_end`` (an LSO below the range end under ``read_committed``, if the last
    EOF said so), moved by the consumer's events as the module doc says. One thread."""

    def __init__(
        self,
        split: OffsetRange,
        consumer: Consumer,
        committed: bool,
        fail: bool,
        result: SplitResult,
    ) -> None:
        self.split = split
        self.consumer = consumer
        self.committed = committed  # isolation.level=read_committed
        self.fail = fail  # failOnDataLoss
        self.result = result
        self.position = split.start
        self.stable_end: int | None = None
        self.where = f"{split.topic}-{split.partition}"

    def lost(self, found: str, skip_to: int) -> int:
        """Offsets ``[position, skip_to)`` are gone: raise, or count them and skip."""
        if self.fail:
            raise DataLossError(
                f"{self.where}: expected offsets [{self.position}, {self.split.end}) in the "
                f"log, found {found}; some data may have been lost because it is not in the "
                "log any more, either aged out by retention or the topic was deleted and "
                "recreated; set failOnDataLoss=false to skip it"
            )
        self.result.lost += min(skip_to, self.split.end) - self.position
        return skip_to

    def event(self, error: KafkaError, message: Any) -> None:
        """Move the cursor for one error event of the consumer (or raise)."""
        split, code = self.split, error.code()
        if code == KafkaError._PARTITION_EOF:
            # The end this consumer reads to: the high watermark, or the LSO under
            # read_committed.
            high = message.offset() or 0  # set on EOF events
            if high >= split.end:
                self.position = split.end
            elif self.committed:
                log_end = _high_watermark(self.consumer, split)
                if log_end < split.end:
                    # The log ends before the range: offsets the driver saw are gone (Spark
                    # reports data loss here). librdkafka queues the EOF behind the records
                    # below it: [position, high) were markers or aborted records, not lost.
                    self.position = max(self.position, high)
                    self.position = self.lost(f"the log ending at {log_end}", split.end)
                else:
                    # An open transaction holds [LSO, end): its marker moves the LSO and
                    # brings records or a new EOF (the broker aborts an abandoned one after
                    # transaction.timeout.ms).
                    self.stable_end = high
            elif high <= self.position:
                # Everything the log has is read, and it ends before the range: offsets the
                # driver saw are gone (Spark reports data loss here).
                self.position = self.lost(f"the log ending at {high}", split.end)
            # read_uncommitted, position < high < end: records before the log end are still
            # on their way; a new EOF comes once they are read.
        elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(split.topic, split.partition), timeout=10, cached=False
            )
            found = f"the log holding [{low}, {high})"
            self.position = self.lost(found, low if low > self.position else split.end)
            if self.position < split.end:
                self.consumer.assign([TopicPartition(split.topic, split.partition, self.position)])
        elif not (error.retriable() or code == KafkaError._TRANSPORT):
            raise KafkaException(error)

    def timeout(self, seconds: float, failures: BrokerFailures) -> SplitTimeoutError:
        if failures.total:
            return BrokersUnreachableError(
                f"{self.where}: no record for {seconds:.0f}s at offset {self.position}, "
                f"expected offsets up to {self.split.end}; brokers not answering: "
                f"{failures.summary()}"
            )
        waiting = (
            ""
            if self.stable_end is None
            else f"; read_committed reads up to the last stable offset {self.stable_end}, "
            "and a transaction open since then holds the rest of the range"
        )
        return SplitTimeoutError(
            f"{self.where}: no record for {seconds:.0f}s at offset {self.position}, "
            f"expected offsets up to {self.split.end}{waiting}"
        )


def read_split(
    split: OffsetRange,
    config: Mapping[str, Any],
    *,
    fail_on_data_loss: bool = True,
    include_headers: bool = True,
    batch_rows: int = 4096,
    poll_timeout_s: float = 120.0,
    result: SplitResult | None = None,
    reader: SplitConsumer | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[split.start, split.end)`` as RecordBatches; see the module doc.

    ``result`` (optional, for ``split``) is updated with rows, bytes, lost offsets and seconds
    as batches go out, and is complete when the iterator is exhausted. ``reader`` (optional)
    is a consumer to reuse, for a task that reads several splits one after another (the
    nightly load's packed tasks): ``read_split`` assigns it ``split`` and leaves it open;
    without it a consumer is made and closed here.
    """
    result = result if result is not None else SplitResult(split)
    if split.start >= split.end:
        return
    began = time.monotonic()
    builder = _BatchBuilder(split.topic, split.partition, include_headers)
    own = reader is None
    reader = SplitConsumer(config) if reader is None else reader
    consumer, failures = reader.consumer, reader.failures
    cursor = _Cursor(
        split, consumer, isolation_level(config) == READ_COMMITTED, fail_on_data_loss, result
    )

    def emit() -> Iterator[pa.RecordBatch]:
        while len(builder) >= batch_rows or (cursor.position >= split.end and len(builder)):
            batch, size = builder.build(batch_rows)
            result.rows += batch.num_rows
            result.bytes += size
            result.seconds = time.monotonic() - began
            yield batch

    try:
        consumer.assign([TopicPartition(split.topic, split.partition, split.start)])
        last_progress = time.monotonic()
        while cursor.position < split.end:
            # consume() returns early only once it has num_messages (records or events), so ask
            # for no more than the range still needs: otherwise every split ends on a timeout.
            wanted = max(1, min(split.end - cursor.position, _CONSUME_MAX))
            messages = consumer.consume(num_messages=wanted, timeout=0.5)
            if failures.fatal is not None:
                raise KafkaException(failures.fatal)
            # Progress is a record or an answer about the partition (EOF, out of range); an
            # error event about a connection is not: a dead broker must not reset the clock.
            if not any(_answered(m) for m in messages):
                if time.monotonic() - last_progress > poll_timeout_s:
                    raise cursor.timeout(poll_timeout_s, failures)
                if not messages:
                    continue
            else:
                last_progress = time.monotonic()
            cursor.stable_end = None
            # The common case, with no Python frame per record: only records, all in range
            # (librdkafka delivers a partition's records in offset order).
            if not any([m.error() for m in messages]):
                first: int = messages[0].offset() or 0  # set on records
                last: int = messages[-1].offset() or 0
                if first >= cursor.position and last < split.end and reader.only(messages, split):
                    builder.messages.extend(messages)
                    cursor.position = last + 1
                    yield from emit()
                    continue
            for message in messages:
                if not reader.ours(message, split):
                    continue  # a reused consumer's previous split, fetched before reassign
                error = message.error()
                if error is not None:
                    cursor.event(error, message)
                    if cursor.position >= split.end:
                        break
                    continue
                offset: int = message.offset() or 0  # set on records
                if offset < cursor.position:
                    continue  # already delivered (never expected: librdkafka filters these)
                if offset >= split.end:
                    cursor.position = split.end  # past the range: drop it and the rest
                    break
                builder.messages.append(message)
                cursor.position = offset + 1
                if cursor.position >= split.end:
                    break
            yield from emit()
        yield from emit()
    finally:
        if own:
            reader.close()
        result.seconds = time.monotonic() - began


class SplitConsumer:
    """One confluent-kafka ``Consumer`` and its ``BrokerFailures``, for one or more splits read
    one after another in one task (one thread). librdkafka's connection failures are counted,
    not streamed to the worker's stderr (thousands of lines while a broker is down); a split's
    timeout names the brokers. ``assign`` of the next split replaces the previous one; records
    of the previous partition already fetched are dropped by ``ours``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.failures = BrokerFailures()
        self._config = config
        self._consumer: Consumer | None = None

    @property
    def consumer(self) -> Consumer:
        """The consumer, made on first use (a task with nothing to read makes none)."""
        if self._consumer is None:
            self._consumer = Consumer(self.failures.settings(self._config))
        return self._consumer

    @staticmethod
    def ours(message: Any, split: OffsetRange) -> bool:
        return bool(message.partition() == split.partition and message.topic() == split.topic)

    @staticmethod
    def only(messages: list[Any], split: OffsetRange) -> bool:
        """Whether a chunk is all ``split``'s: its first and last are (a partition's records
        come in order and a chunk of one fetch does not interleave a reassignment)."""
        return SplitConsumer.ours(messages[0], split) and SplitConsumer.ours(messages[-1], split)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()


def _answered(message: Any) -> bool:
    """True for a record or a partition event from a broker; False for a transport error."""
    error = message.error()
    return error is None or not (error.code() == KafkaError._TRANSPORT or error.retriable())


def _high_watermark(consumer: Consumer, split: OffsetRange) -> int:
    """The partition's high watermark from the consumer's last fetch responses.

    librdkafka keeps it beside the LSO (``rktp_hi_offset``); the cached answer is the high
    watermark whatever the isolation level, whereas asking the broker again (``cached=False``:
    ListOffsets with the consumer's isolation level) would answer the LSO under
    ``read_committed``. -1001 (unknown) before any fetch response.
    """
    _, high = consumer.get_watermark_offsets(
        TopicPartition(split.topic, split.partition), cached=True
    )
    return int(high)
