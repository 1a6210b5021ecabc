"""Offset ranges: the one ``[start, end)`` type, resolved against the log and cut into splits.

``OffsetRange`` (topic, partition, start, end) is *the* range of Sluice's read path: the
driver resolves one per partition, the source cuts them into Spark splits, the split reader
(``sluice.pipeline.source.split_reader``) fetches exactly one, the load's report and the
table's manifest (``sluice.pipeline.table.manifest.RangeRecord``) record them with what reading
them produced — composing an ``OffsetRange``, never repeating its fields. JSON form
``{"topic": "t", "partition": 0, "start": 10, "end": 20}``; invariant of a resolved range:
``log_start <= start <= end <= log_end`` of its partition.

Two pure, driver-side steps on the specs ``sluice.pipeline.source.options`` parses, in Spark's
conventions (``KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets``,
``KafkaOffsetRangeCalculator``):

1. **Specs + log → ranges.** ``resolve_ranges`` takes each partition's ``LogBounds`` (log start
   offset, log end offset) and returns an ``OffsetRange`` per partition. A JSON spec must name
   exactly the assigned partitions (Spark's ``startOffsetDoesNotMatchAssigned``:
   ``PartitionMismatchError``). A start below the log start (retention deleted records first)
   or above the log end (the topic was deleted and recreated, or the log truncated), or an end
   above the log end, is data loss: with ``fail_on_data_loss=True`` (the default, as in Spark)
   it raises ``OffsetsOutOfBoundsError`` naming topic, partition and offsets; with ``False`` the
   bound is clamped — low to the log start, high to the log end, the "offset out-of-range"
   scheme of the offsets-management article — and a ``DataLoss`` record goes into the run
   report and the manifest. ``resume_ranges`` does the same for a resume (the nightly load):
   committed offsets as ints, each partition read from its committed offset (its log start if
   it has none) to its log end — no offset spec in between.
2. **Ranges → splits.** ``split_ranges`` follows Spark 4's ``KafkaOffsetRangeCalculator``:
   empty ranges are dropped; ``maxRecordsPerPartition`` first cuts every range into
   ``ceil(size / max)`` near-equal pieces; if there are still fewer pieces than
   ``minPartitions``, ranges are cut proportionally to their size (small ranges whose share
   rounds to one piece stay whole and are taken out of the proportional math). Spark promises
   only *approximately* ``minPartitions``; Sluice then keeps halving the largest split until
   there are at least ``minPartitions`` splits (when there are that many records), so the
   option is a guarantee. Spark decides "stays whole" per topic-partition, which misfires when
   ``maxRecordsPerPartition`` has already cut a partition into several pieces; Sluice decides
   it per piece.

Before step 1, a start or end given by timestamp (``TimestampSpec``) becomes an offsets spec:
``timestamp_offsets`` takes what ListOffsets by timestamp found per partition
(``KafkaMetadata.offsets_for_times``) and applies Spark's ``readTimestampOffsets``: a found
offset is used as it is; none found is an error for a start (``NoMatchingOffsetError``,
Spark's "No offset matched from request of topic-partition ... and timestamp ...") unless the
strategy is ``latest``, and latest (-1) for an end.

The errors subclass ``OffsetOptionError``: an offset option the log cannot honour. Nothing here
performs I/O; values are immutable; every function is safe to call from any thread.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.options import (
    EARLIEST,
    LATEST,
    InvalidPositiveIntegerError,
    OffsetOptionError,
    OffsetSpec,
    PartitionOffsets,
    TimestampSpec,
)

__all__ = [
    "DataLoss",
    "InvalidOffsetRangeError",
    "LogBounds",
    "NoMatchingOffsetError",
    "OffsetRange",
    "OffsetsOutOfBoundsError",
    "PartitionMismatchError",
    "Resolution",
    "UnknownPartitionError",
    "pack_splits",
    "resolve_ranges",
    "resume_ranges",
    "split_ranges",
    "timestamp_offsets",
]


# --------------------------------------------------------------------------------------------
# Errors: one class per failure; the message names the partition and the offsets found
# --------------------------------------------------------------------------------------------


class PartitionMismatchError(OffsetOptionError):
    """An offsets JSON names other partitions than the strategy assigns."""


class UnknownPartitionError(OffsetOptionError):
    """A partition to resolve has no log bounds."""


class InvalidOffsetRangeError(OffsetOptionError):
    """A resolved start offset lies after the resolved end offset."""


class NoMatchingOffsetError(OffsetOptionError):
    """No record of a partition is as late as a starting timestamp, and the strategy is
    ``error`` (``startingOffsetsByTimestampStrategy``'s default)."""


class OffsetsOutOfBoundsError(OffsetOptionError):
    """Offsets to read lie outside the partition's log and ``failOnDataLoss`` is true.

    Not the broker's ``OffsetOutOfRangeError`` (a fetch past the log): this one is raised on
    the driver, before any fetch, when a planned range does not fit the log bounds.
    """


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """The offsets ``[start, end)`` of one partition. Immutable; ordered by topic, partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        """Number of offsets in the range (Spark's ``size``; negative when start > end)."""
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def name(self) -> str:
        """``topic-partition[start,end)``: how a split is named to Spark and in messages."""
        return f"{self.topic}-{self.partition}[{self.start},{self.end})"

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> OffsetRange:
        return cls(
            str(value["topic"]), int(value["partition"]), int(value["start"]), int(value["end"])
        )


@dataclass(frozen=True, slots=True)
class LogBounds:
    """A partition's log start offset (first offset retention kept) and log end offset: where
    a reader of the planning ``isolation.level`` can read to — the last stable offset under
    ``read_committed`` (``sluice.pipeline.source.metadata``), the high watermark otherwise."""

    log_start: int
    log_end: int

    def __post_init__(self) -> None:
        if not 0 <= self.log_start <= self.log_end:
            raise ValueError(
                f"log bounds: expected 0 <= log_start <= log_end, "
                f"found log_start={self.log_start}, log_end={self.log_end}"
            )


@dataclass(frozen=True, slots=True)
class DataLoss:
    """One clamped bound of one partition's range, for the run report and the manifest.

    ``bound`` is ``"start"`` or ``"end"``; ``requested`` is the offset asked for and ``used`` the
    offset read instead. ``lost`` counts the offsets this run will not read because of the
    clamp: a start below the log start loses ``min(log_start, end) - requested`` offsets
    (deleted by retention before they were read); a start above the log end means the partition
    was recreated or truncated, and jumping to the log end skips the current log's
    ``log_end - log_start`` offsets (what the old incarnation held past our start cannot be
    known); an end above the log end loses ``requested - log_end`` offsets that do not exist.
    """

    topic: str
    partition: int
    bound: Literal["start", "end"]
    requested: int
    used: int
    log_start: int
    log_end: int
    lost: int

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "bound": self.bound,
            "requested": self.requested,
            "used": self.used,
            "log_start": self.log_start,
            "log_end": self.log_end,
            "lost": self.lost,
        }


@dataclass(frozen=True, slots=True)
class Resolution:
    """What ``resolve_ranges`` returns: one range per partition and the clamped bounds."""

    ranges: list[OffsetRange]
    data_loss: list[DataLoss]


# --------------------------------------------------------------------------------------------
# Resolution against the log
# --------------------------------------------------------------------------------------------


def _spec_offsets(
    option: str, spec: OffsetSpec, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    if spec == "earliest":
        return dict.fromkeys(partitions, EARLIEST)
    if spec == "latest":
        return dict.fromkeys(partitions, LATEST)
    specified = {TopicPartition(t, p): o for t, ps in spec.items() for p, o in ps.items()}
    if set(specified) != set(partitions):
        raise PartitionMismatchError(
            f"option {option!r}: offsets must name exactly the assigned partitions "
            f"(use -2 for earliest, -1 for latest); expected {_names(partitions)}, "
            f"found {_names(specified)}"
        )
    return specified


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"


def timestamp_offsets(
    spec: TimestampSpec,
    partitions: Iterable[TopicPartition],
    found: Mapping[TopicPartition, int | None],
    *,
    starting: bool,
) -> PartitionOffsets:
    """The offsets spec of a timestamp spec, given the offsets ListOffsets ``found`` for the
    timestamps ``spec.timestamps(partitions)`` asked about (-2 and -1 need no lookup: they
    become earliest and latest); see the module doc.

    A per-partition spec must name exactly ``partitions`` (``PartitionMismatchError``).
    """
    wanted = sorted(set(partitions))
    asked = spec.timestamps(wanted)
    if set(asked) != set(wanted):
        raise PartitionMismatchError(
            f"option {spec.option!r}: timestamps must name exactly the assigned partitions; "
            f"expected {_names(wanted)}, found {_names(asked)}"
        )
    result: PartitionOffsets = {}
    for tp in wanted:
        # -2 / -1 are ListOffsets' earliest / latest, not times: resolved with the log bounds.
        offset = asked[tp] if asked[tp] in (EARLIEST, LATEST) else found.get(tp)
        if offset is None:
            if starting and spec.on_no_match == "error":
                raise NoMatchingOffsetError(
                    f"option {spec.option!r}: no offset matched from request of topic-partition "
                    f"{tp.topic}-{tp.partition} and timestamp {asked[tp]} (no record is that "
                    "late); set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
            offset = LATEST
        result.setdefault(tp.topic, {})[tp.partition] = offset
    return result


def _with_bounds(
    bounds: Mapping[TopicPartition, LogBounds], partitions: Iterable[TopicPartition] | None
) -> list[TopicPartition]:
    """``partitions`` (default: every one in ``bounds``) sorted; each must have bounds."""
    wanted = sorted(bounds if partitions is None else set(partitions))
    missing = [tp for tp in wanted if tp not in bounds]
    if missing:
        raise UnknownPartitionError(
            f"partitions {[f'{t}-{p}' for t, p in missing]}: expected log bounds, found none "
            "(the topic or partition does not exist)"
        )
    return wanted


def resolve_ranges(
    bounds: Mapping[TopicPartition, LogBounds],
    starting_offsets: OffsetSpec,
    ending_offsets: OffsetSpec,
    *,
    partitions: Iterable[TopicPartition] | None = None,
    fail_on_data_loss: bool = True,
) -> Resolution:
    """One ``OffsetRange`` per partition, sorted by (topic, partition); see the module doc.

    ``partitions`` defaults to every partition in ``bounds``; each must have bounds.
    """
    wanted = _with_bounds(bounds, partitions)
    starts = _spec_offsets("startingOffsets", starting_offsets, wanted)
    ends = _spec_offsets("endingOffsets", ending_offsets, wanted)
    ranges: list[OffsetRange] = []
    losses: list[DataLoss] = []
    for tp in wanted:
        log = bounds[tp]
        start = {EARLIEST: log.log_start, LATEST: log.log_end}.get(starts[tp], starts[tp])
        end = {EARLIEST: log.log_start, LATEST: log.log_end}.get(ends[tp], ends[tp])
        explicit = starts[tp] >= 0 and ends[tp] >= 0
        if start > end and start <= log.log_end and explicit:
            raise InvalidOffsetRangeError(
                f"{tp.topic}-{tp.partition}: expected startingOffsets <= endingOffsets, "
                f"found start {start} > end {end}"
            )
        # "earliest" may resolve past an explicit end that retention already passed: then
        # there is nothing to read, an empty range at the start (not an error).
        end = max(end, start) if not explicit else end
        ranges.append(_clamp(tp, start, end, log, fail_on_data_loss, losses))
    return Resolution(ranges, losses)


def resume_ranges(
    bounds: Mapping[TopicPartition, LogBounds],
    committed: Mapping[TopicPartition, int],
    *,
    partitions: Iterable[TopicPartition] | None = None,
    fail_on_data_loss: bool = True,
) -> Resolution:
    """One ``OffsetRange`` per partition from its ``committed`` offset (its log start when it
    has none) to its log end, sorted by (topic, partition): a resume, in offsets throughout.

    The bounds rules are ``resolve_ranges``' for an explicit start and "latest": a committed
    offset below the log start or above the log end is data loss (raised, or clamped and
    recorded). ``partitions`` defaults to every partition in ``bounds``; each must have bounds;
    committed offsets of other partitions are ignored.
    """
    wanted = _with_bounds(bounds, partitions)
    ranges: list[OffsetRange] = []
    losses: list[DataLoss] = []
    for tp in wanted:
        log = bounds[tp]
        start = committed.get(tp, log.log_start)
        ranges.append(_clamp(tp, start, max(log.log_end, start), log, fail_on_data_loss, losses))
    return Resolution(ranges, losses)


def _clamp(
    tp: TopicPartition,
    start: int,
    end: int,
    log: LogBounds,
    fail: bool,
    losses: list[DataLoss],
) -> OffsetRange:
    def out_of_range(bound: str, offset: int, why: str) -> OffsetsOutOfBoundsError:
        return OffsetsOutOfBoundsError(
            f"{tp.topic}-{tp.partition}: {bound} offset {offset} is {why} "
            f"(log start {log.log_start}, log end {log.log_end}); some data may have been "
            "lost because it is not in the log any more, either aged out by retention or the "
            "topic was deleted and recreated; set failOnDataLoss=false to clamp and report it"
        )

    def loss(bound: Literal["start", "end"], requested: int, used: int, lost: int) -> None:
        losses.append(
            DataLoss(
                tp.topic, tp.partition, bound, requested, used, log.log_start, log.log_end, lost
            )
        )

    if start < log.log_start:
        if fail:
            raise out_of_range("start", start, "below the log start")
        loss("start", start, log.log_start, min(log.log_start, end) - start)
        start, end = log.log_start, max(end, log.log_start)
    elif start > log.log_end:
        if fail:
            raise out_of_range("start", start, "above the log end")
        loss("start", start, log.log_end, log.log_end - log.log_start)
        start = end = log.log_end
    if end > log.log_end:
        if fail:
            raise out_of_range("end", end, "above the log end")
        loss("end", end, log.log_end, end - log.log_end)
        end = log.log_end
    return OffsetRange(tp.topic, tp.partition, start, end)


# --------------------------------------------------------------------------------------------
# Splitting (Spark 4's KafkaOffsetRangeCalculator)
# --------------------------------------------------------------------------------------------


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    # Spark's getDividedPartition: integer division, the last piece takes the round-off.
    pieces = []
    remaining, start = r.count, r.start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = min(start + size, r.end)
        pieces.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return [p for p in pieces if p.count > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Spark's getPartCount: math.round of a double, i.e. round half up (not Python's banker's).
    return max(math.floor(size / total * min_parts + 0.5), 1)


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges into Spark splits; see the module doc. Input order is kept, pieces in order.

    Guarantees: the splits cover every offset of every non-empty range exactly once; none holds
    more than ``max_records_per_partition`` offsets; there are at least ``min_partitions``
    splits when the ranges hold at least that many offsets.
    """
    for name, value in (
        ("minPartitions", min_partitions),
        ("maxRecordsPerPartition", max_records_per_partition),
    ):
        if value is not None and value <= 0:
            raise InvalidPositiveIntegerError(f"{name}: expected a positive integer, found {value}")
    splits = [r for r in ranges if r.count > 0]
    if max_records_per_partition is not None:
        splits = [
            piece
            for r in splits
            for piece in _divide(r, math.ceil(r.count / max_records_per_partition))
        ]
    if min_partitions is None or len(splits) >= min_partitions:
        return splits

    total = sum(r.count for r in splits)
    whole = [_part_count(r.count, total, min_partitions) == 1 for r in splits]
    split_total = total - sum(r.count for r, w in zip(splits, whole, strict=True) if w)
    split_min = max(min_partitions - sum(whole), 1)
    result = [
        piece
        for r, w in zip(splits, whole, strict=True)
        for piece in ([r] if w else _divide(r, _part_count(r.count, split_total, split_min)))
    ]
    # Top up: halve the largest split (the first of equals) until minPartitions is reached.
    while len(result) < min_partitions and any(r.count > 1 for r in result):
        index = max(range(len(result)), key=lambda i: (result[i].count, -i))
        result[index : index + 1] = _divide(result[index], 2)
    return result


# --------------------------------------------------------------------------------------------
# Packing (Camus's and Gobblin's work units)
# --------------------------------------------------------------------------------------------


def pack_splits(splits: Sequence[OffsetRange], rows_per_task: int) -> list[list[OffsetRange]]:
    """Group ``splits`` into tasks of about ``rows_per_task`` offsets each, in order.

    Camus and Gobblin pack the small partitions of many topics into one work unit so that the
    cost of a task (a process, a consumer, a file) is paid per batch of rows, not per
    partition. Greedy, in the given order (the plan's: by topic, then partition): a task takes
    the next split while it holds fewer than ``rows_per_task`` offsets and the split fits; a
    split at least that large is a task of its own. Every split is in exactly one task, in
    order; no task is empty.
    """
    if rows_per_task <= 0:
        raise InvalidPositiveIntegerError(
            f"rowsPerTask: expected a positive integer, found {rows_per_task}"
        )
    tasks: list[list[OffsetRange]] = []
    current: list[OffsetRange] = []
    rows = 0
    for split in splits:
        if current and rows + split.count > rows_per_task:
            tasks.append(current)
            current, rows = [], 0
        current.append(split)
        rows += split.count
    if current:
        tasks.append(current)
    return tasks
