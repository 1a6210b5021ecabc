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
never hangs a job.

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

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

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
    "SPARK_SCHEMA_DDL",
    "SPARK_SCHEMA_DDL_NO_HEADERS",
    "DataLossError",
    "SplitResult",
    "SplitTimeoutError",
    "consumer_config",
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


@dataclass(slots=True)
class SplitResult:
    """What one ``read_split`` call did, filled in as it runs (for metrics and reports).

    ``rows`` counts the records fetched; with ``valueFormat=avro`` the source fills in
    ``errors`` (of those rows, the undecodable ones, sent to the error table) and
    ``schema_ids`` (the writer schema ids of the decoded ones).
    """

    rows: int = 0
    bytes: int = 0
    lost: int = 0
    seconds: float = 0.0
    errors: int = 0
    schema_ids: list[int] = field(default_factory=list)

    def to_json(self, split: OffsetRange) -> dict[str, Any]:
        return {
            "topic": split.topic,
            "partition": split.partition,
            "start": split.start,
            "end": split.end,
            "rows": self.rows,
            "bytes": self.bytes,
            "lost": self.lost,
            "seconds": round(self.seconds, 6),
            "errors": self.errors,
            "schema_ids": sorted(self.schema_ids),
        }


def consumer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """The confluent-kafka consumer settings of a read: every ``kafka.*`` option, prefix cut.

    As in Spark, the source owns offset handling: auto commit is off and ``auto.offset.reset``
    is ``error`` (an out-of-range fetch must surface as data loss, not silently jump).
    ``isolation.level`` is always set, lower-case: ``kafka.isolation.level`` if given, else
    ``read_committed`` — Sluice's default where Spark's is ``read_uncommitted``; the reasons
    are in ``sluice.pipeline.source.isolation``. The driver's metadata consumer and the
    executors' split readers get it from here, so ranges end where the split reader can read
    to (the last stable offset under ``read_committed``). Raises ``ValueError`` without
    ``kafka.bootstrap.servers`` and ``InvalidIsolationLevelError`` for an unknown level.
    """
    config: dict[str, Any] = {
        "group.id": f"sluice-source-{uuid.uuid4().hex[:12]}",
        ISOLATION_LEVEL_KEY: DEFAULT_ISOLATION_LEVEL,
        "client.id": "sluice-source",
        "log.connection.close": False,
        # Once its prefetch queue holds queued.min.messages, librdkafka stops fetching for
        # fetch.queue.backoff.ms — 1,000 ms by default, while a split task drains 100,000
        # records in well under a second and then waits (the finding of the broker's consume
        # benchmark, README "Performance"). A kafka.* option still overrides it.
        "fetch.queue.backoff.ms": 10,
    }
    for key, value in options.items():
        key = key.lower()
        if key.startswith("kafka.") and key[len("kafka.") :] not in _OWNED:
            config[key[len("kafka.") :]] = value
    if "bootstrap.servers" not in config:
        raise ValueError("option 'kafka.bootstrap.servers': expected host:port[,...], found none")
    config[ISOLATION_LEVEL_KEY] = isolation_level(config)
    config.update(
        {"enable.auto.commit": False, "auto.offset.reset": "error", "enable.partition.eof": True}
    )
    return config


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


def read_split(
    split: OffsetRange,
    config: Mapping[str, Any],
    *,
    fail_on_data_loss: bool = True,
    include_headers: bool = True,
    batch_rows: int = 4096,
    poll_timeout_s: float = 120.0,
    result: SplitResult | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[split.start, split.end)`` as RecordBatches; see the module doc.

    ``result`` (optional) is updated with rows, bytes, lost offsets and seconds as batches go
    out, and is complete when the iterator is exhausted.
    """
    result = result if result is not None else SplitResult()
    if split.start >= split.end:
        return
    began = time.monotonic()
    builder = _BatchBuilder(split.topic, split.partition, include_headers)
    consumer = Consumer(dict(config))
    committed = isolation_level(config) == READ_COMMITTED
    where = f"{split.topic}-{split.partition}"

    def lost(found: str, skip_to: int) -> int:
        if fail_on_data_loss:
            raise DataLossError(
                f"{where}: expected offsets [{position}, {split.end}) in the log, found {found}; "
                "some data may have been lost because it is not in the log any more, either "
                "aged out by retention or the topic was deleted and recreated; set "
                "failOnDataLoss=false to skip it"
            )
        result.lost += min(skip_to, split.end) - position
        return skip_to

    def emit() -> Iterator[pa.RecordBatch]:
        while len(builder) >= batch_rows or (position >= split.end and len(builder)):
            batch, size = builder.build(batch_rows)
            result.rows += batch.num_rows
            result.bytes += size
            result.seconds = time.monotonic() - began
            yield batch

    try:
        consumer.assign([TopicPartition(split.topic, split.partition, split.start)])
        position = split.start
        stable_end: int | None = None  # an LSO below the range end (read_committed), if seen
        last_progress = time.monotonic()
        while position < split.end:
            # consume() returns early only once it has num_messages (records or events), so ask
            # for no more than the range still needs: otherwise every split ends on a timeout.
            wanted = max(1, min(split.end - position, _CONSUME_MAX))
            messages = consumer.consume(num_messages=wanted, timeout=0.5)
            if not messages:
                if time.monotonic() - last_progress > poll_timeout_s:
                    waiting = (
                        ""
                        if stable_end is None
                        else f"; read_committed reads up to the last stable offset {stable_end}, "
                        "and a transaction open since then holds the rest of the range"
                    )
                    raise SplitTimeoutError(
                        f"{where}: no record for {poll_timeout_s:.0f}s at offset {position}, "
                        f"expected offsets up to {split.end}{waiting}"
                    )
                continue
            last_progress = time.monotonic()
            stable_end = None
            # The common case, with no Python frame per record: only records, all in range
            # (librdkafka delivers a partition's records in offset order).
            if not any([m.error() for m in messages]):
                first: int = messages[0].offset() or 0  # set on records
                last: int = messages[-1].offset() or 0
                if first >= position and last < split.end:
                    builder.messages.extend(messages)
                    position = last + 1
                    yield from emit()
                    continue
            for message in messages:
                error = message.error()
                if error is not None:
                    code = error.code()
                    if code == KafkaError._PARTITION_EOF:
                        # The end this consumer reads to: the high watermark, or the LSO under
                        # read_committed.
                        high = message.offset() or 0  # set on EOF events
                        if high >= split.end:
                            position = split.end
                        elif committed:
                            log_end = _high_watermark(consumer, split)
                            if log_end < split.end:
                                # The log ends before the range: offsets the driver saw are
                                # gone (Spark reports data loss here). librdkafka queues the
                                # EOF behind the records below it: [position, high) were
                                # markers or aborted records, not lost.
                                position = max(position, high)
                                position = lost(f"the log ending at {log_end}", split.end)
                            else:
                                # An open transaction holds [LSO, end): its marker moves the
                                # LSO and brings records or a new EOF (the broker aborts an
                                # abandoned one after transaction.timeout.ms).
                                stable_end = high
                        elif high <= position:
                            # Everything the log has is read, and it ends before the range:
                            # offsets the driver saw are gone (Spark reports data loss here).
                            position = lost(f"the log ending at {high}", split.end)
                        # read_uncommitted, position < high < end: records before the log end
                        # are still on their way; a new EOF comes once they are read.
                    elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, high = consumer.get_watermark_offsets(
                            TopicPartition(split.topic, split.partition), timeout=10, cached=False
                        )
                        found = f"the log holding [{low}, {high})"
                        position = lost(found, low if low > position else split.end)
                        if position < split.end:
                            consumer.assign(
                                [TopicPartition(split.topic, split.partition, position)]
                            )
                    elif error.retriable() or code == KafkaError._TRANSPORT:
                        continue
                    else:
                        raise KafkaException(error)
                    if position >= split.end:
                        break
                    continue
                offset: int = message.offset() or 0  # set on records
                if offset < position:
                    continue  # already delivered (never expected: librdkafka filters these)
                if offset >= split.end:
                    position = split.end  # past the range: drop it and the rest of the batch
                    break
                builder.messages.append(message)
                position = offset + 1
                if position >= split.end:
                    break
            yield from emit()
        yield from emit()
    finally:
        consumer.close()
        result.seconds = time.monotonic() - began


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


def write_split_metrics(uri: str, split: OffsetRange, result: SplitResult) -> None:
    """Write ``result`` as JSON under directory ``uri`` (any ``pyarrow.fs`` URI or path).

    One file per split, named after its range, so a retried task overwrites its own file.
    """
    fs, root = pafs.FileSystem.from_uri(uri if "://" in uri else f"file://{uri}")
    fs.create_dir(root, recursive=True)
    name = f"{root.rstrip('/')}/{split.topic}-{split.partition}-{split.start}-{split.end}.json"
    with fs.open_output_stream(name) as out:
        out.write(json.dumps(result.to_json(split)).encode("utf-8"))
