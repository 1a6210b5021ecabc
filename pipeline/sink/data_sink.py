"""The ``sluice`` sink: ``df.write`` / ``df.writeStream`` ``.format("sluice")`` into Kafka.

Spark's Kafka sink (``org.apache.spark.sql.kafka010``: ``KafkaWriter``, ``KafkaWriteTask``,
``KafkaSourceProvider``) as the writer half of a Spark 4 Python Data Source::

    (df.selectExpr("CAST(id AS STRING) AS key", "to_json(struct(*)) AS value")
       .write.format("sluice")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "page_views")
       .mode("append")
       .save())

    (stream_df.writeStream.format("sluice")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "page_views")
       .option("checkpointLocation", "/checkpoints/page_views_out")
       .start())

Columns (``sluice.pipeline.sink.columns``): ``value`` required, ``key``, ``topic``,
``partition``, ``headers``, ``timestamp`` optional. Options (``sluice.pipeline.sink.options``):
``kafka.*`` producer settings, ``topic``, and ``valueFormat=avro|json-schema|protobuf`` with
the registry options (``sluice.pipeline.sink.writer_schema``; the encoders ``avro_values``,
``json_values``, ``protobuf_values``).

Lifecycle (``pyspark.sql.datasource``)
======================================
``SluiceDataSource.writer(schema, overwrite)`` / ``streamWriter(...)`` build a
``SluiceBatchWriter`` / ``SluiceStreamWriter`` on the driver (in a Python worker Spark starts
for planning). Everything that can be checked without writing is checked there, so a bad
query fails before any record is sent: the options, the columns against the contract, the
save mode, and for a typed value format the writer schema (registered or looked up once)
against the value struct. Spark pickles the writer to the executors, where ``write`` runs one
``sluice.pipeline.sink.write_task.KafkaWriteTask`` per Spark task and returns its
``SinkCommitMessage`` only after every record of the task was acknowledged. ``commit`` (all
tasks succeeded) and ``abort`` (one failed) run on the driver; the sink uses no transactions
(see below), so there is nothing to commit or roll back: both only log what was written.

Save modes: ``append`` only for batch writes. Spark itself refuses ``ignore`` and
``errorifexists`` for Python data sources; ``overwrite`` is refused here
(``UnsupportedSaveModeError``), as Spark's Kafka sink refuses it: a topic cannot be truncated.
A streaming query may use any output mode: with ``complete`` each micro-batch appends the whole
result again, as Spark's Kafka sink does (its ``truncate`` is a no-op).

Delivery guarantee: at-least-once
=================================
A batch job succeeds only if every task's records were acknowledged (``acks=all``); a failed
task is retried by Spark and writes its rows again, so a row may land twice but is never
silently dropped. A streaming micro-batch is committed to the checkpoint only after ``commit``,
i.e. after every task of the batch saw every delivery report succeed; a query stopped or
failed before that re-runs the batch on restart, writing it again. It stays at-least-once
although the broker has transactions: ``commit`` runs on the driver, and Kafka's producer API
cannot commit a transaction a producer in an executor opened (``init_transactions`` with its
``transactional.id`` aborts it; librdkafka cannot resume another instance's producer id and
epoch, which Flink does in Java by reflection), while a transaction the task commits itself is
visible before the job commits. The full reasoning is in ``sluice.pipeline.sink.write_task``.

A writer is used by one thread at a time, as Spark does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from sluice.pipeline.sink.columns import SinkColumns
from sluice.pipeline.sink.options import SinkOptions
from sluice.pipeline.sink.write_task import KafkaWriteTask, SinkCommitMessage
from sluice.pipeline.sink.writer_schema import WriterSchema

try:  # pyspark >= 4.1: streaming writers get Arrow batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _STREAM_ARROW = True
except ImportError:  # pragma: no cover - pyspark 4.0: rows, turned into Arrow here
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as DataSourceStreamArrowWriter,
    )

    _STREAM_ARROW = False

__all__ = [
    "SluiceBatchWriter",
    "SluiceStreamWriter",
    "UnsupportedSaveModeError",
]

log = logging.getLogger("sluice.sink")


class UnsupportedSaveModeError(ValueError):
    """A batch write in ``overwrite`` mode: a Kafka topic cannot be truncated."""


class _Sink:
    """What the batch and streaming writers share: the write checked and planned on the
    driver (options, columns, writer schema), and the executor's task."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.options = SinkOptions.parse(options)
        self.schema = schema
        self.columns = SinkColumns.of(
            schema, topic_option=self.options.topic, typed=self.options.typed is not None
        )
        self.writer_schema: WriterSchema | None = None
        if self.options.typed is not None:
            self.writer_schema = WriterSchema.resolve(self.options.typed)
            self.writer_schema.check_struct(schema["value"].dataType)

    def _run(self, batches: Iterator[Any]) -> SinkCommitMessage:
        if not _STREAM_ARROW and isinstance(self, SluiceStreamWriter):  # pragma: no cover
            batches = _rows_to_batches(batches, self.schema)
        return KafkaWriteTask(self.options, self.columns, self.writer_schema).run(batches)

    @staticmethod
    def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int]:
        done = [m for m in messages if isinstance(m, SinkCommitMessage)]
        return sum(m.records for m in done), len(done)


def _rows_to_batches(rows: Iterator[Any], schema: Any) -> Iterator[pa.RecordBatch]:
    """pyspark 4.0's streaming writers get ``Row``s: the same data as Arrow batches."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row.asDict(recursive=True))
        if len(chunk) == 10_000:
            yield pa.RecordBatch.from_pylist(chunk, schema=arrow_schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=arrow_schema)


class SluiceBatchWriter(_Sink, DataSourceArrowWriter):
    """``df.write.format("sluice").mode("append")``; see the module doc."""

    def __init__(self, options: Mapping[str, str], schema: Any, overwrite: bool) -> None:
        if overwrite:
            raise UnsupportedSaveModeError(
                "Save mode overwrite not allowed for the sluice sink: expected append (a Kafka "
                "topic cannot be truncated, as Spark's Kafka sink says), found overwrite"
            )
        super().__init__(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Executor side: this task's rows, every one acknowledged before returning."""
        return self._run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        records, tasks = self._summary(messages)
        log.info("wrote %d records in %d tasks", records, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        records, tasks = self._summary(messages)
        log.warning(
            "write failed; %d records of %d finished tasks stay in Kafka (at-least-once: a "
            "rerun writes them again)",
            records,
            tasks,
        )


class SluiceStreamWriter(_Sink, DataSourceStreamArrowWriter):
    """``df.writeStream.format("sluice")``; a micro-batch commits after every record of it
    was acknowledged (see the module doc). ``overwrite`` (complete mode) appends, as Spark's
    Kafka sink does."""

    def __init__(self, options: Mapping[str, str], schema: Any, overwrite: bool) -> None:
        super().__init__(options, schema)
        self.overwrite = overwrite

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        """Executor side: this task's share of the micro-batch, every record acknowledged."""
        return self._run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        records, tasks = self._summary(messages)
        log.info("micro-batch %d: wrote %d records in %d tasks", batchId, records, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        records, tasks = self._summary(messages)
        log.warning(
            "micro-batch %d failed; %d records of %d finished tasks stay in Kafka and the "
            "batch is written again when the query restarts",
            batchId,
            records,
            tasks,
        )
