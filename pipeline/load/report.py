"""The run report of one nightly load: what was read, what landed, what was lost, how long.

Written as JSON next to the table (``<warehouse>/_reports/<run_id>.json``) whatever the outcome
— published, nothing new, or failed — and printed as a summary table. The manifest
(``sluice.pipeline.table.manifest``) is the machine contract the next run resumes from; the
report is for people and monitoring, and may carry more (timings, the failure, the Spark
application id).
JSON, version 1::

    {"version": 1, "run_id": "...", "table": "file:///w/events", "status": "published",
     "sequence": 3, "spark_app_id": "local-...", "started": "...", "finished": "...",
     "phases": {"plan": 0.2, "read+write": 12.1, ...},
     "partitions": [{"topic": "t", "partition": 0, "start": 0, "end": 100, "rows": 99,
                     "bytes": 5120, "seconds": 0.4, "lost": 0, "errors": 1}],
     "dates": [{"topic": "t", "partition": 0, "date": "2024-01-02", "rows": 99}],
     "data_loss": [...DataLoss.to_json()...], "total_rows": 99, "total_lost": 0,
     "total_errors": 1, "errors_path": "file:///w/events/load=3/_errors",
     "reader_schema": {"id": 4, "subject": "t-value", "version": 2, "type": "AVRO"},
     "schema_ids": {"t": [1, 4]},
     "progress": {"splits_done": 4, "splits_total": 4, "offsets_total": 100,
                  "rows_per_second": 8.2, "seconds": 12.1},
     "topics": ["t"], "subscribe_pattern": {"pattern": "t|u", "matched": ["t"]},
     "message": "...", "error": null}

``rows`` are the records that landed in the table; ``errors`` the undecodable ones a typed load
(a typed ``valueFormat``) put in the run's error table (``errors_path``, set when there are any);
``reader_schema`` and ``schema_ids`` (writer schemas seen) are null / ``{}`` for binary loads.
``progress`` is the read+write job's last progress reading (``sluice.pipeline.load.progress``:
splits done of total, the offsets planned, seconds) with ``rows_per_second`` the exact rate
(rows and error rows over the phase's seconds); null when the run read nothing.
``topics`` are the topics planned (sorted); ``subscribe_pattern`` is null unless the load was
configured with ``subscribePattern``: then its regex and every topic it matched at plan time,
sorted, also those with nothing new (the manifest's ``Subscription``; for the Parquet layout
the manifest records the same).

A partition's entry is its ``OffsetRange`` (``sluice.pipeline.source.ranges``) with the counts
reading it produced (``PartitionReport``); a date's entry is the manifest's ``RowCount``.
``status`` is ``published``, ``no-new-data`` or ``failed``. Instances are plain mutable
dataclasses filled in by one thread.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from dataclasses import dataclass, field
from typing import Any

from sluice.common.text_table import render_table
from sluice.pipeline.source.ranges import DataLoss, OffsetRange
from sluice.pipeline.table.filesystem import TableFileSystem
from sluice.pipeline.table.manifest import RowCount, Subscription, readable_json

__all__ = ["REPORT_VERSION", "LoadReport", "PartitionReport"]

REPORT_VERSION = 1


_TYPE_NAMES = {"AVRO": "Avro", "JSON": "JSON Schema", "PROTOBUF": "Protobuf"}
"""How the summary names a reader schema's type."""


@dataclass(slots=True)
class PartitionReport:
    """One partition's range in this run and what reading it produced (filled in from the
    split tasks' results; ``seconds`` is their fetch and write time). In JSON the range's
    fields and the counts sit side by side."""

    range: OffsetRange
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0
    lost: int = 0
    errors: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.range.to_json(),
            "rows": self.rows,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "lost": self.lost,
            "errors": self.errors,
        }


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class LoadReport:
    """One run's report; see the module doc."""

    run_id: str
    table: str
    status: str = "running"
    sequence: int | None = None
    spark_app_id: str | None = None
    started: str = field(default_factory=_now)
    finished: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    partitions: list[PartitionReport] = field(default_factory=list)
    dates: list[RowCount] = field(default_factory=list)
    data_loss: list[DataLoss] = field(default_factory=list)
    message: str = ""
    error: str | None = None
    # typed loads: {"id", "subject", "version", "type"} (type: AVRO, JSON or PROTOBUF)
    reader_schema: dict[str, Any] | None = None
    schema_ids: dict[str, list[int]] = field(default_factory=dict)  # writer ids per topic
    errors_path: str | None = None  # the published error table, when it has rows
    progress: dict[str, Any] | None = None  # the read+write job's last progress reading
    topics: list[str] = field(default_factory=list)  # the topics planned, sorted
    subscription: Subscription | None = None  # subscribePattern: the regex and what it matched

    @property
    def total_rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def total_errors(self) -> int:
        return sum(p.errors for p in self.partitions)

    @property
    def total_lost(self) -> int:
        return sum(d.lost for d in self.data_loss)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "run_id": self.run_id,
            "table": self.table,
            "status": self.status,
            "sequence": self.sequence,
            "spark_app_id": self.spark_app_id,
            "started": self.started,
            "finished": self.finished,
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "partitions": [p.to_json() for p in self.partitions],
            "dates": [
                {"topic": d.topic, "partition": d.partition, "date": d.date, "rows": d.rows}
                for d in self.dates
            ],
            "data_loss": [d.to_json() for d in self.data_loss],
            "total_rows": self.total_rows,
            "total_lost": self.total_lost,
            "total_errors": self.total_errors,
            "errors_path": self.errors_path,
            "reader_schema": self.reader_schema,
            "schema_ids": self.schema_ids,
            "progress": self.progress,
            "topics": self.topics,
            "subscribe_pattern": None if self.subscription is None else self.subscription.to_json(),
            "message": self.message,
            "error": self.error,
        }

    def finish(self, status: str, message: str, error: str | None = None) -> None:
        self.status, self.message, self.error = status, message, error
        self.finished = _now()

    def write(self, reports_uri: str) -> str:
        """Write ``<reports_uri>/<run_id>.json`` (any ``pyarrow.fs`` URI); return its URI."""
        fs, path = TableFileSystem.from_uri(reports_uri)
        fs.mkdirs(path)
        target = posixpath.join(path, f"{self.run_id}.json")
        fs.write_bytes(target, readable_json(self.to_json()).encode("utf-8"))
        return fs.uri(target)

    def summary(self) -> str:
        """The human-readable summary: a header line, the per-partition table, the losses."""
        lines = [
            f"run {self.run_id} -> {self.table}: {self.status}"
            + (f" as load={self.sequence}" if self.sequence and self.status == "published" else "")
        ]
        if self.message:
            lines.append(self.message)
        if self.subscription is not None:
            matched = ", ".join(self.subscription.matched) or "none"
            lines.append(f"topics matching {self.subscription.pattern!r}: {matched}")
        if self.partitions:
            rows = [
                [
                    p.range.topic,
                    str(p.range.partition),
                    str(p.range.start),
                    str(p.range.end),
                    str(p.rows),
                    str(p.bytes),
                    f"{p.seconds:.2f}",
                    str(p.lost),
                    str(p.errors),
                ]
                for p in self.partitions
            ]
            rows.append(
                [
                    "total",
                    "",
                    "",
                    "",
                    str(self.total_rows),
                    str(sum(p.bytes for p in self.partitions)),
                    f"{sum(p.seconds for p in self.partitions):.2f}",
                    str(sum(p.lost for p in self.partitions)),
                    str(self.total_errors),
                ]
            )
            header = [
                "topic", "partition", "start", "end", "rows", "bytes", "seconds", "lost", "errors"
            ]  # fmt: skip
            lines.append(render_table(header, rows))
        for loss in self.data_loss:
            lines.append(
                f"DATA LOSS {loss.topic}-{loss.partition}: {loss.bound} offset {loss.requested} "
                f"outside the log [{loss.log_start}, {loss.log_end}); read from {loss.used}, "
                f"{loss.lost} offsets lost"
            )
        if self.reader_schema:
            ids = "; ".join(f"{t}: {', '.join(map(str, i))}" for t, i in self.schema_ids.items())
            lines.append(
                f"values: {_TYPE_NAMES.get(self.reader_schema.get('type', 'AVRO'), 'Avro')}, "
                f"reader schema id {self.reader_schema['id']}"
                + (f" ({self.reader_schema['subject']} v{self.reader_schema['version']})"
                   if self.reader_schema.get("subject") else "")
                + (f"; writer schema ids {ids}" if ids else "")
            )  # fmt: skip
        if self.total_errors:
            lines.append(
                f"ERRORS: {self.total_errors} undecodable records in the error table"
                + (f" {self.errors_path}" if self.errors_path else "")
            )
        if self.progress:
            lines.append(
                f"read+write: {self.progress['splits_done']}/{self.progress['splits_total']} "
                f"splits, {self.progress['rows_per_second']:,.0f} rows/s"
            )
        if self.phases:
            lines.append(
                "phases: " + ", ".join(f"{name} {secs:.1f}s" for name, secs in self.phases.items())
            )
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)
