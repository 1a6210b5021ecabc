"""The offsets manifest of one load run: ``_manifest.json``, published with the run's data.

The manifest is the paper's "offsets stored in HDFS with the data": it says which offsets of
which partitions the run consumed, what it wrote, and the position the next run resumes from.
It lives inside the run's directory, so the one rename that publishes the data publishes it too
(``sluice.pipeline.table.commit``). A JSON object, version 1::

    {
      "version": 1,
      "run_id": "nightly-2024-01-02",         # [A-Za-z0-9._-]+, unique per table
      "table": "file:///warehouse/events",
      "sequence": 7,                           # the run's load=<sequence> directory
      "previous_run": "nightly-2024-01-01",    # newest run when this one began, or null
      "created": "2024-01-02T03:04:05.000000+00:00",
      "ranges": [{"topic": "t", "partition": 0, "start": 10, "end": 20,   # an OffsetRange
                  "rows": 10, "bytes": 1234}],    # and what reading it gave: a RangeRecord
      "offsets": {"t": {"0": 20, "1": 5}},     # resume position: previous run's + these ends
      "row_counts": [{"topic": "t", "partition": 0, "date": "2024-01-02", "rows": 10}],
      "schema_ids": {"t": [1, 3]},             # Avro schema ids seen per topic (may be {})
      "error_counts": [{"topic": "t", "partition": 0, "rows": 1}],  # optional, see below
      "subscribe_pattern": {"pattern": "t|u", "matched": ["t", "u"]},  # optional, see below
      "data_loss": [{"topic": ..., "partition": ..., "bound": "start", "requested": ...,
                     "used": ..., "log_start": ..., "log_end": ..., "lost": ...}],
      "files": [{"path": "topic=t/date=2024-01-02/part-0.parquet", "size": 2048,
                 "rows": 10}]                  # relative to the run's directory
    }

A typed load (``valueFormat=avro``) puts the records it could not decode in the run's error
table: Parquet files under ``_errors/`` in the run's directory, listed in ``files`` like the
data files (so the rename publishes both) and counted per partition in ``error_counts``. The
key is optional (absent means none; manifests written before it still decode); ``row_counts``
add up to the data files' rows, ``error_counts`` to the ``_errors/`` files' rows.

A load configured with ``subscribePattern`` records the pattern and the topics it matched when
the run was planned, sorted (``Subscription``) — every one, also a topic with nothing new to
read, which then has no range. The key is optional too (absent: the load named its topics);
every range's topic must be among ``matched``.

``offsets`` uses Spark's offsets JSON, so ``offsets_to_json(manifest.offsets)`` is a valid
``startingOffsets``. ``decode`` validates every field and the cross-field invariants (each
range's end is its partition's resume offset, a range's rows fit in its offsets, the per-date
row counts add up to the files' rows, paths are relative and unique) and raises
``InvalidManifestError`` saying what was expected and what was found; a document of another
version raises ``UnsupportedManifestVersionError``. Instances are immutable and thread-safe.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.pipeline.source.ranges import DataLoss, OffsetRange

__all__ = [
    "ERRORS_DIR",
    "MANIFEST_VERSION",
    "DataFile",
    "ErrorCount",
    "InvalidManifestError",
    "Manifest",
    "RangeRecord",
    "RowCount",
    "Subscription",
    "UnsupportedManifestVersionError",
    "is_error_file",
    "merge_offsets",
    "readable_json",
    "valid_run_id",
]

MANIFEST_VERSION = 1
ERRORS_DIR = "_errors"
"""The run directory's error table (undecodable records), relative to the run directory."""
_RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")


def readable_json(doc: Mapping[str, Any]) -> str:
    """``doc`` as JSON text a person can read and diff, ending in a newline: each key of the
    object on its own line, and each entry of a list or object value on its own line, indented
    by two and four spaces; anything deeper stays on its entry's line.

    ``json.dumps(doc, indent=2)`` lays out every level, but any ``indent`` makes ``json`` use
    its pure-Python encoder: a call per value (a 200-topic load's manifest: ~94,000 calls,
    about 0.05 s). Here each line is one call of the C encoder. ``json.loads`` reads the
    text back to ``doc``."""
    lines = ["{"]
    last = len(doc) - 1
    for n, (key, value) in enumerate(doc.items()):
        head, comma = f"  {json.dumps(key)}: ", "," if n < last else ""
        if isinstance(value, list) and value:
            entries = [json.dumps(v) for v in value]
            lines.append(head + "[")
            lines.append(",\n".join("    " + e for e in entries))
            lines.append("  ]" + comma)
        elif isinstance(value, dict) and value:
            entries = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
            lines.append(head + "{")
            lines.append(",\n".join("    " + e for e in entries))
            lines.append("  }" + comma)
        else:
            lines.append(head + json.dumps(value) + comma)
    lines.append("}")
    return "\n".join(lines) + "\n"


class InvalidManifestError(ValueError):
    """A manifest document or object breaks the format; the message says expected vs found."""


class UnsupportedManifestVersionError(InvalidManifestError):
    """The document's ``version`` is not one this code reads."""


def valid_run_id(run_id: str) -> bool:
    """Run ids are path segments: 1-200 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``."""
    return bool(_RUN_ID.fullmatch(run_id)) and run_id not in (".", "..")


@dataclass(frozen=True, slots=True)
class RangeRecord:
    """One partition range the run consumed, with the records and bytes it read from it.

    In JSON the range's fields and ``rows``, ``bytes`` sit side by side in one object.
    """

    range: OffsetRange
    rows: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {**self.range.to_json(), "rows": self.rows, "bytes": self.bytes}


@dataclass(frozen=True, slots=True, order=True)
class RowCount:
    """Rows written for one topic, partition and event date (``YYYY-MM-DD``)."""

    topic: str
    partition: int
    date: str
    rows: int


@dataclass(frozen=True, slots=True)
class ErrorCount:
    """Records of one topic-partition that went to the run's error table."""

    topic: str
    partition: int
    rows: int


@dataclass(frozen=True, slots=True)
class Subscription:
    """A ``subscribePattern`` run's regex and the topics it matched at plan time (sorted,
    each once)."""

    pattern: str
    matched: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "matched": list(self.matched)}


def is_error_file(path: str) -> bool:
    """Whether a run-relative path is one of the error table's files."""
    return path.startswith(ERRORS_DIR + "/")


@dataclass(frozen=True, slots=True)
class DataFile:
    """One Parquet file of the run: path relative to the run directory, size, row count."""

    path: str
    size: int
    rows: int


def merge_offsets(
    previous: Mapping[str, Mapping[int, int]], ranges: Iterable[OffsetRange]
) -> dict[str, dict[int, int]]:
    """The resume position after a run: ``previous`` with each consumed range's end."""
    merged = {t: dict(ps) for t, ps in previous.items()}
    for r in ranges:
        merged.setdefault(r.topic, {})[r.partition] = r.end
    return merged


@dataclass(frozen=True, slots=True)
class Manifest:
    """One run's manifest; see the module doc. ``validate()`` runs in ``__post_init__``."""

    run_id: str
    table: str
    sequence: int
    previous_run: str | None
    ranges: tuple[RangeRecord, ...]
    offsets: dict[str, dict[int, int]]
    files: tuple[DataFile, ...]
    row_counts: tuple[RowCount, ...] = ()
    schema_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    data_loss: tuple[DataLoss, ...] = ()
    error_counts: tuple[ErrorCount, ...] = ()
    subscription: Subscription | None = None
    created: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())

    def __post_init__(self) -> None:
        self.validate()

    # ----------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``InvalidManifestError`` unless every field and invariant holds."""
        if not valid_run_id(self.run_id):
            _fail("run_id", "1-200 characters of [A-Za-z0-9._-]", repr(self.run_id))
        if self.previous_run is not None and not valid_run_id(self.previous_run):
            _fail("previous_run", "a run id or null", repr(self.previous_run))
        if self.previous_run == self.run_id:
            _fail("previous_run", f"a run other than {self.run_id!r}", repr(self.previous_run))
        if not self.table:
            _fail("table", "a table URI", "''")
        if self.sequence < 1:
            _fail("sequence", "an integer >= 1", str(self.sequence))
        if (self.sequence == 1) != (self.previous_run is None):
            _fail(
                "previous_run",
                "null exactly when sequence is 1",
                f"{self.previous_run!r} with sequence {self.sequence}",
            )
        try:
            dt.datetime.fromisoformat(self.created)
        except ValueError:
            _fail("created", "an ISO-8601 timestamp", repr(self.created))
        seen: set[tuple[str, int]] = set()
        for i, record in enumerate(self.ranges):
            where, r = f"ranges[{i}]", record.range
            if (r.topic, r.partition) in seen:
                _fail(
                    where, "one range per partition", f"a second range for {r.topic}-{r.partition}"
                )
            seen.add((r.topic, r.partition))
            if not 0 <= r.start <= r.end:
                _fail(where, "0 <= start <= end", f"start {r.start}, end {r.end}")
            if not 0 <= record.rows <= r.count:
                _fail(where, f"0 <= rows <= {r.count} (end - start)", f"rows {record.rows}")
            if record.bytes < 0:
                _fail(where, "bytes >= 0", f"bytes {record.bytes}")
            resume = self.offsets.get(r.topic, {}).get(r.partition)
            if resume != r.end:
                _fail(
                    f"offsets[{r.topic!r}][{r.partition}]",
                    f"the range's end {r.end}",
                    "nothing" if resume is None else str(resume),
                )
        for topic, partitions in self.offsets.items():
            for partition, offset in partitions.items():
                if partition < 0 or offset < 0:
                    _fail(
                        f"offsets[{topic!r}]",
                        "partitions and offsets >= 0",
                        f"{partition}: {offset}",
                    )
        for i, c in enumerate(self.row_counts):
            try:
                dt.date.fromisoformat(c.date)
            except ValueError:
                _fail(f"row_counts[{i}].date", "a YYYY-MM-DD date", repr(c.date))
            if c.rows < 0 or c.partition < 0:
                _fail(f"row_counts[{i}]", "partition and rows >= 0", f"{c.partition}, {c.rows}")
        paths: set[str] = set()
        for i, f in enumerate(self.files):
            parts = f.path.split("/")
            if (
                not f.path
                or f.path.startswith("/")
                or "\\" in f.path
                or any(p in ("", ".", "..") for p in parts)
            ):
                _fail(f"files[{i}].path", "a relative path without '.' or '..'", repr(f.path))
            if f.path in paths:
                _fail(f"files[{i}].path", "unique paths", f"{f.path!r} twice")
            paths.add(f.path)
            if f.size < 0 or f.rows < 0:
                _fail(f"files[{i}]", "size and rows >= 0", f"size {f.size}, rows {f.rows}")
        if self.row_counts:
            counted = sum(c.rows for c in self.row_counts)
            written = self.total_rows
            if counted != written:
                _fail("row_counts", f"rows adding up to the files' {written}", str(counted))
        errors_seen: set[tuple[str, int]] = set()
        for i, e in enumerate(self.error_counts):
            if e.rows < 0 or e.partition < 0:
                _fail(f"error_counts[{i}]", "partition and rows >= 0", f"{e.partition}, {e.rows}")
            if (e.topic, e.partition) in errors_seen:
                _fail(f"error_counts[{i}]", "one count per partition", f"{e.topic}-{e.partition}")
            errors_seen.add((e.topic, e.partition))
        in_files = sum(f.rows for f in self.files if is_error_file(f.path))
        if sum(e.rows for e in self.error_counts) != in_files:
            _fail(
                "error_counts",
                f"rows adding up to the {ERRORS_DIR}/ files' {in_files}",
                str(sum(e.rows for e in self.error_counts)),
            )
        for topic, ids in self.schema_ids.items():
            if any(i < 0 for i in ids):
                _fail(f"schema_ids[{topic!r}]", "ids >= 0", str(list(ids)))
        if self.subscription is not None:
            self._validate_subscription(self.subscription)

    def _validate_subscription(self, sub: Subscription) -> None:
        if not sub.pattern:
            _fail("subscribe_pattern.pattern", "a regular expression", "''")
        if list(sub.matched) != sorted(set(sub.matched)) or not all(sub.matched):
            _fail("subscribe_pattern.matched", "topic names, sorted, each once", str(sub.matched))
        outside = sorted({r.range.topic for r in self.ranges} - set(sub.matched))
        if outside:
            _fail("ranges", f"topics among those {sub.pattern!r} matched", str(outside))

    @property
    def total_rows(self) -> int:
        """Rows of the data files (the error table's not included)."""
        return sum(f.rows for f in self.files if not is_error_file(f.path))

    @property
    def total_errors(self) -> int:
        """Records of the run's error table."""
        return sum(e.rows for e in self.error_counts)

    # ----------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "run_id": self.run_id,
            "table": self.table,
            "sequence": self.sequence,
            "previous_run": self.previous_run,
            "created": self.created,
            "ranges": [r.to_json() for r in self.ranges],
            "offsets": {
                t: {str(p): o for p, o in sorted(ps.items())}
                for t, ps in sorted(self.offsets.items())
            },
            "row_counts": [
                {"topic": c.topic, "partition": c.partition, "date": c.date, "rows": c.rows}
                for c in self.row_counts
            ],
            "schema_ids": {t: sorted(ids) for t, ids in sorted(self.schema_ids.items())},
            "data_loss": [d.to_json() for d in self.data_loss],
            "files": [{"path": f.path, "size": f.size, "rows": f.rows} for f in self.files],
        }
        if self.error_counts:
            doc["error_counts"] = [
                {"topic": e.topic, "partition": e.partition, "rows": e.rows}
                for e in self.error_counts
            ]
        if self.subscription is not None:
            doc["subscribe_pattern"] = self.subscription.to_json()
        return doc

    def encode(self) -> bytes:
        """The document as ``readable_json`` lays it out, UTF-8."""
        return readable_json(self.to_json()).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidManifestError(
                f"manifest: expected a JSON object, found undecodable bytes ({exc})"
            ) from None
        return cls.from_json(doc)

    @classmethod
    def from_json(cls, doc: Any) -> Manifest:
        obj = _Reader(doc, "manifest")
        version = obj.get("version", int)
        if version != MANIFEST_VERSION:
            raise UnsupportedManifestVersionError(
                f"manifest.version: expected {MANIFEST_VERSION}, found {version}"
            )
        offsets = _read_offsets(obj)
        schema_ids = _read_schema_ids(obj)
        manifest = cls(
            run_id=obj.get("run_id", str),
            table=obj.get("table", str),
            sequence=obj.get("sequence", int),
            previous_run=obj.get("previous_run", str, nullable=True),
            created=obj.get("created", str),
            ranges=tuple(
                RangeRecord(
                    OffsetRange(
                        r.get("topic", str),
                        r.get("partition", int),
                        r.get("start", int),
                        r.get("end", int),
                    ),
                    r.get("rows", int),
                    r.get("bytes", int),
                )
                for r in obj.items(
                    "ranges", {"topic", "partition", "start", "end", "rows", "bytes"}
                )
            ),
            offsets=offsets,
            row_counts=tuple(
                RowCount(
                    r.get("topic", str),
                    r.get("partition", int),
                    r.get("date", str),
                    r.get("rows", int),
                )
                for r in obj.items("row_counts", {"topic", "partition", "date", "rows"})
            ),
            schema_ids=schema_ids,
            data_loss=tuple(
                DataLoss(
                    r.get("topic", str),
                    r.get("partition", int),
                    r.get_choice("bound", ("start", "end")),
                    r.get("requested", int),
                    r.get("used", int),
                    r.get("log_start", int),
                    r.get("log_end", int),
                    r.get("lost", int),
                )
                for r in obj.items("data_loss", _DATA_LOSS_KEYS)
            ),
            files=tuple(
                DataFile(r.get("path", str), r.get("size", int), r.get("rows", int))
                for r in obj.items("files", {"path", "size", "rows"})
            ),
            error_counts=tuple(
                ErrorCount(r.get("topic", str), r.get("partition", int), r.get("rows", int))
                for r in (
                    obj.items("error_counts", {"topic", "partition", "rows"})
                    if "error_counts" in obj.raw
                    else []
                )
            ),
            subscription=_read_subscription(obj),
        )
        obj.check_keys(_MANIFEST_KEYS)
        return manifest


_MANIFEST_KEYS = {
    "version", "run_id", "table", "sequence", "previous_run", "created", "ranges", "offsets",
    "row_counts", "schema_ids", "data_loss", "files", "error_counts", "subscribe_pattern",
}  # fmt: skip
_DATA_LOSS_KEYS = {
    "topic", "partition", "bound", "requested", "used", "log_start", "log_end", "lost",
}  # fmt: skip


def _read_offsets(obj: _Reader) -> dict[str, dict[int, int]]:
    """``offsets``: ``{"<topic>": {"<partition>": <offset>}}`` with int keys."""
    offsets: dict[str, dict[int, int]] = {}
    for topic, value in obj.get("offsets", dict).items():
        partitions = _Reader(value, f"manifest.offsets[{topic!r}]").raw
        offsets[topic] = {}
        for key, offset in partitions.items():
            if not (key.isascii() and key.isdigit()) or type(offset) is not int:
                _fail(f"offsets[{topic!r}]", '{"<partition>": <offset>}', f"{key!r}: {offset!r}")
            offsets[topic][int(key)] = offset
    return offsets


def _read_schema_ids(obj: _Reader) -> dict[str, tuple[int, ...]]:
    """``schema_ids``: ``{"<topic>": [<id>, ...]}``."""
    schema_ids: dict[str, tuple[int, ...]] = {}
    for topic, ids in obj.get("schema_ids", dict).items():
        if not isinstance(ids, list) or any(type(i) is not int for i in ids):
            _fail(f"schema_ids[{topic!r}]", "a list of integers", repr(ids))
        schema_ids[topic] = tuple(ids)
    return schema_ids


def _read_subscription(obj: _Reader) -> Subscription | None:
    """``subscribe_pattern`` (optional): ``{"pattern": "<regex>", "matched": ["<topic>", ...]}``."""
    if "subscribe_pattern" not in obj.raw:
        return None
    sub = _Reader(obj.raw["subscribe_pattern"], f"{obj.where}.subscribe_pattern")
    sub.check_keys({"pattern", "matched"})
    matched = sub.get("matched", list)
    if not all(isinstance(t, str) for t in matched):
        _fail("subscribe_pattern.matched", "a list of topic names", repr(matched))
    return Subscription(sub.get("pattern", str), tuple(matched))


def _fail(where: str, expected: str, found: str) -> None:
    raise InvalidManifestError(f"manifest.{where}: expected {expected}, found {found}")


class _Reader:
    """Typed access to one JSON object; errors name the field path, expected and found."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise InvalidManifestError(
                f"{where}: expected a JSON object, found {type(value).__name__}"
            )
        self.raw: dict[str, Any] = value
        self.where = where

    def _value(self, key: str) -> Any:
        if key not in self.raw:
            raise InvalidManifestError(f"{self.where}.{key}: expected a value, found nothing")
        return self.raw[key]

    def get(self, key: str, kind: type[Any], *, nullable: bool = False) -> Any:
        value = self._value(key)
        if value is None and nullable:
            return None
        # bool is an int subclass; JSON true must not pass for a number.
        if type(value) is not kind:
            found = "null" if value is None else f"{type(value).__name__} {value!r}"
            raise InvalidManifestError(
                f"{self.where}.{key}: expected {kind.__name__}"
                f"{' or null' if nullable else ''}, found {found}"
            )
        return value

    def get_choice(self, key: str, choices: tuple[str, ...]) -> Any:
        value = self._value(key)
        if value not in choices:
            raise InvalidManifestError(
                f"{self.where}.{key}: expected one of {list(choices)}, found {value!r}"
            )
        return value

    def items(self, key: str, keys: set[str]) -> list[_Reader]:
        values = self.get(key, list)
        readers = [_Reader(v, f"{self.where}.{key}[{i}]") for i, v in enumerate(values)]
        for reader in readers:
            reader.check_keys(keys)
        return readers

    def check_keys(self, keys: set[str]) -> None:
        extra = sorted(set(self.raw) - keys)
        if extra:
            raise InvalidManifestError(
                f"{self.where}: expected only the keys {sorted(keys)}, found also {extra}"
            )
