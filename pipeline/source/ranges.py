"""Offset ranges: parse Spark's Kafka source options, resolve them against the log, cut splits.

Three pure steps, all driver-side and all working on JSON-able values, in Spark's conventions
(``org.apache.spark.sql.kafka010``: ``KafkaSourceProvider``, ``JsonUtils``,
``KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets``, ``KafkaOffsetRangeCalculator``):

1. **Options → specs.** ``parse_source_options`` reads the option map a data source receives
   (keys are matched case-insensitively, as Spark lower-cases them) into ``SourceOptions``:
   exactly one consumer strategy (``assign`` JSON ``{"topicA":[0,1]}``, ``subscribe`` comma list,
   ``subscribePattern`` regex), ``startingOffsets`` / ``endingOffsets`` (``"earliest"``,
   ``"latest"`` or JSON ``{"topicA":{"0":23,"1":-2}}`` with -2 = earliest and -1 = latest),
   ``failOnDataLoss``, ``minPartitions``, ``maxRecordsPerPartition``. Spark's batch rules are
   kept exactly: the default start is ``earliest`` and the default end ``latest``; a batch query
   may not start at ``latest`` (nor at -1 for one partition) and may not end at ``earliest``
   (nor at -2); a streaming query takes no ``endingOffsets`` and starts at ``latest`` by
   default. A JSON spec must name exactly the partitions the strategy assigns (Spark's
   ``startOffsetDoesNotMatchAssigned``); ``complete_offsets`` fills new partitions in for a
   resume. Every failure has its own exception class, a subclass of ``OffsetOptionError``,
   whose message names the option and what was found.
2. **Specs + log → ranges.** ``resolve_ranges`` takes each partition's ``LogBounds`` (log start
   offset, log end offset) and returns an ``OffsetRange`` ``[start, end)`` per partition. A
   start below the log start (retention deleted records first) or above the log end (the topic
   was deleted and recreated, or the log truncated), or an end above the log end, is data loss:
   with ``fail_on_data_loss=True`` (the default, as in Spark) it raises
   ``OffsetOutOfRangeError`` naming topic, partition and offsets; with ``False`` the bound is
   clamped — low to the log start, high to the log end, the "offset out-of-range" scheme of the
   offsets-management article — and a ``DataLoss`` record goes into the run report.
3. **Ranges → splits.** ``split_ranges`` follows Spark 4's ``KafkaOffsetRangeCalculator``:
   empty ranges are dropped; ``maxRecordsPerPartition`` first cuts every range into
   ``ceil(size / max)`` near-equal pieces; if there are still fewer pieces than
   ``minPartitions``, ranges are cut proportionally to their size (small ranges whose share
   rounds to one piece stay whole and are taken out of the proportional math). Spark promises
   only *approximately* ``minPartitions``; Sluice then keeps halving the largest split until
   there are at least ``minPartitions`` splits (when there are that many records), so the
   option is a guarantee. Spark decides "stays whole" per topic-partition, which misfires when
   ``maxRecordsPerPartition`` has already cut a partition into several pieces; Sluice decides
   it per piece.

Nothing here performs I/O; every function is safe to call from any thread.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sluice.common.topic_partition import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "Assign",
    "ConsumerStrategy",
    "ConsumerStrategyError",
    "DataLoss",
    "EarliestEndingOffsetError",
    "InvalidAssignError",
    "InvalidBooleanOptionError",
    "InvalidOffsetRangeError",
    "InvalidOffsetsError",
    "InvalidPositiveIntegerError",
    "InvalidSubscribeError",
    "InvalidSubscribePatternError",
    "LatestStartingOffsetError",
    "LogBounds",
    "OffsetOptionError",
    "OffsetOutOfRangeError",
    "OffsetRange",
    "OffsetSpec",
    "PartitionMismatchError",
    "Resolution",
    "SourceOptions",
    "StreamingEndingOffsetsError",
    "Subscribe",
    "SubscribePattern",
    "UnknownPartitionError",
    "complete_offsets",
    "offsets_to_json",
    "parse_assign",
    "parse_ending_offsets",
    "parse_source_options",
    "parse_starting_offsets",
    "parse_subscribe",
    "parse_subscribe_pattern",
    "resolve_ranges",
    "split_ranges",
]

EARLIEST = -2
"""Spark's (and Kafka's ListOffsets) marker for "the log start offset" in a JSON spec."""
LATEST = -1
"""Spark's marker for "the log end offset" in a JSON spec."""

PartitionOffsets = dict[str, dict[int, int]]
OffsetSpec = Literal["earliest", "latest"] | PartitionOffsets
"""``"earliest"``, ``"latest"``, or ``{topic: {partition: offset}}`` (offset >= 0, -2 or -1)."""


# --------------------------------------------------------------------------------------------
# Errors: one class per failure; the message names the option and what was found
# --------------------------------------------------------------------------------------------


class OffsetOptionError(ValueError):
    """Base of every error raised for a bad option value or an unusable offset."""


class ConsumerStrategyError(OffsetOptionError):
    """None, or more than one, of ``assign``, ``subscribe``, ``subscribePattern`` was given."""


class InvalidAssignError(OffsetOptionError):
    """``assign`` is not JSON of the form ``{"topicA":[0,1]}``."""


class InvalidSubscribeError(OffsetOptionError):
    """``subscribe`` names no topic."""


class InvalidSubscribePatternError(OffsetOptionError):
    """``subscribePattern`` is empty or not a regular expression."""


class InvalidOffsetsError(OffsetOptionError):
    """``startingOffsets`` / ``endingOffsets`` is neither a keyword nor valid offsets JSON."""


class LatestStartingOffsetError(OffsetOptionError):
    """A batch query's ``startingOffsets`` is ``latest``, or -1 for some partition."""


class EarliestEndingOffsetError(OffsetOptionError):
    """A batch query's ``endingOffsets`` is ``earliest``, or -2 for some partition."""


class StreamingEndingOffsetsError(OffsetOptionError):
    """``endingOffsets`` was given to a streaming query."""


class InvalidPositiveIntegerError(OffsetOptionError):
    """``minPartitions`` / ``maxRecordsPerPartition`` is not a positive integer."""


class InvalidBooleanOptionError(OffsetOptionError):
    """``failOnDataLoss`` is not ``true`` or ``false``."""


class PartitionMismatchError(OffsetOptionError):
    """An offsets JSON names other partitions than the strategy assigns."""


class UnknownPartitionError(OffsetOptionError):
    """A partition to resolve has no log bounds."""


class InvalidOffsetRangeError(OffsetOptionError):
    """A resolved start offset lies after the resolved end offset."""


class OffsetOutOfRangeError(OffsetOptionError):
    """A requested offset is outside the log and ``failOnDataLoss`` is true."""


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
    """A partition's log start offset (first offset retention kept) and log end offset."""

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
    """One clamped bound, for the run report.

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
# Consumer strategies
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: exactly these partitions (whether or not the topic has them yet)."""

    partitions: dict[str, list[int]]

    def assigned(self, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
        del partitions_per_topic
        return sorted(TopicPartition(t, p) for t, ps in self.partitions.items() for p in ps)


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: every partition of the listed topics that exist."""

    topics: list[str]

    def assigned(self, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
        return sorted(
            TopicPartition(t, p)
            for t in set(self.topics)
            for p in range(partitions_per_topic.get(t, 0))
        )


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every partition of every topic the regex matches as a whole.

    Spark compiles a Java regex; Python's ``re`` agrees on the usual topic patterns
    (``events\\..*``, ``a|b``, character classes), not on Java-only syntax.
    """

    pattern: re.Pattern[str]

    def assigned(self, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
        return sorted(
            TopicPartition(t, p)
            for t, count in partitions_per_topic.items()
            if self.pattern.fullmatch(t)
            for p in range(count)
        )


ConsumerStrategy = Assign | Subscribe | SubscribePattern

_STRATEGY_KEYS = ("assign", "subscribe", "subscribepattern")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The validated offset-related options of one read."""

    strategy: ConsumerStrategy
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec | None  # None for streaming queries
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'


def _is_partition_key(key: str) -> bool:
    return key.isascii() and key.isdigit()


def _parse_offsets_json(option: str, text: str) -> PartitionOffsets:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    result: PartitionOffsets = {}
    if isinstance(value, dict) and value:
        for topic, offsets in value.items():
            if not (isinstance(offsets, dict) and offsets):
                break
            parsed: dict[int, int] = {}
            for key, offset in offsets.items():
                if not _is_partition_key(key):
                    break
                if type(offset) is not int or offset < EARLIEST:
                    break
                parsed[int(key)] = offset
            else:
                result[topic] = parsed
                continue
            break
        else:
            return result
    raise InvalidOffsetsError(
        f"option {option!r}: expected 'earliest', 'latest' or JSON like {_OFFSETS_EXAMPLE} "
        f"(offsets >= 0, -2 for earliest, -1 for latest), found {text!r}"
    )


def _parse_offsets(option: str, value: str) -> OffsetSpec:
    text = value.strip()
    keyword = text.lower()
    if keyword == "earliest":
        return "earliest"
    if keyword == "latest":
        return "latest"
    return _parse_offsets_json(option, text)


def parse_starting_offsets(value: str | None, *, streaming: bool = False) -> OffsetSpec:
    """``startingOffsets``; default ``earliest`` for batch, ``latest`` for streaming.

    A batch query may not start at ``latest`` or at -1 (Spark: "starting offset can't be latest
    for batch queries on Kafka").
    """
    if value is None:
        return "latest" if streaming else "earliest"
    spec = _parse_offsets("startingOffsets", value)
    if streaming:
        return spec
    if spec == "latest":
        raise LatestStartingOffsetError(
            "option 'startingOffsets': a batch query can't start at latest, found 'latest'"
        )
    if isinstance(spec, dict):
        for topic, offsets in spec.items():
            for partition, offset in offsets.items():
                if offset == LATEST:
                    raise LatestStartingOffsetError(
                        f"option 'startingOffsets': a batch query can't start at latest, "
                        f"found -1 for {topic}-{partition}"
                    )
    return spec


def parse_ending_offsets(value: str | None, *, streaming: bool = False) -> OffsetSpec | None:
    """``endingOffsets``; default ``latest``; ``None`` for streaming (where it is an error).

    A batch query may not end at ``earliest`` or at -2 (Spark: "ending offset can't be earliest
    for batch queries on Kafka").
    """
    if streaming:
        if value is not None:
            raise StreamingEndingOffsetsError(
                f"option 'endingOffsets': not valid in streaming queries, found {value!r}"
            )
        return None
    if value is None:
        return "latest"
    spec = _parse_offsets("endingOffsets", value)
    if spec == "earliest":
        raise EarliestEndingOffsetError(
            "option 'endingOffsets': a batch query can't end at earliest, found 'earliest'"
        )
    if isinstance(spec, dict):
        for topic, offsets in spec.items():
            for partition, offset in offsets.items():
                if offset == EARLIEST:
                    raise EarliestEndingOffsetError(
                        f"option 'endingOffsets': a batch query can't end at earliest, "
                        f"found -2 for {topic}-{partition}"
                    )
    return spec


def parse_assign(value: str) -> Assign:
    """``assign``: JSON ``{"topicA":[0,1],"topicB":[2,4]}``."""
    text = value.strip()
    parsed: Any = None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
    if (
        isinstance(parsed, dict)
        and parsed
        and all(
            isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps)
            for ps in parsed.values()
        )
        and any(parsed.values())
    ):
        return Assign({t: sorted(set(ps)) for t, ps in parsed.items()})
    raise InvalidAssignError(
        f"option 'assign': expected JSON like {_ASSIGN_EXAMPLE} naming at least one "
        f"partition, found {value!r}"
    )


def parse_subscribe(value: str) -> Subscribe:
    """``subscribe``: a comma-separated topic list; blanks around names are ignored."""
    topics = [t.strip() for t in value.split(",") if t.strip()]
    if not topics:
        raise InvalidSubscribeError(
            f"option 'subscribe': expected a comma-separated list of topics, found {value!r}"
        )
    return Subscribe(topics)


def parse_subscribe_pattern(value: str) -> SubscribePattern:
    """``subscribePattern``: a regex that must match a whole topic name."""
    text = value.strip()
    if not text:
        raise InvalidSubscribePatternError(
            f"option 'subscribePattern': expected a regular expression, found {value!r}"
        )
    try:
        return SubscribePattern(re.compile(text))
    except re.error as exc:
        raise InvalidSubscribePatternError(
            f"option 'subscribePattern': expected a regular expression, found {value!r} ({exc})"
        ) from None


def _positive_int(option: str, value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit() and int(text) > 0:
        return int(text)
    raise InvalidPositiveIntegerError(
        f"option {option!r}: expected a positive integer, found {value!r}"
    )


def _boolean(option: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidBooleanOptionError(f"option {option!r}: expected true or false, found {value!r}")


def parse_source_options(options: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Validate the offset-related options of a read, as Spark's ``KafkaSourceProvider`` does.

    Keys are matched case-insensitively; other keys (``kafka.bootstrap.servers`` ...) are left
    to the caller.
    """
    lowered = {k.lower(): v for k, v in options.items()}
    given = [k for k in _STRATEGY_KEYS if k in lowered]
    if len(given) != 1:
        raise ConsumerStrategyError(
            "options: expected exactly one of 'assign', 'subscribe', 'subscribePattern', "
            f"found {len(given)}" + (f" ({', '.join(given)})" if given else "")
        )
    key = given[0]
    strategy: ConsumerStrategy
    if key == "assign":
        strategy = parse_assign(lowered[key])
    elif key == "subscribe":
        strategy = parse_subscribe(lowered[key])
    else:
        strategy = parse_subscribe_pattern(lowered[key])
    return SourceOptions(
        strategy=strategy,
        starting_offsets=parse_starting_offsets(
            lowered.get("startingoffsets"), streaming=streaming
        ),
        ending_offsets=parse_ending_offsets(lowered.get("endingoffsets"), streaming=streaming),
        fail_on_data_loss=_boolean("failOnDataLoss", lowered.get("failondataloss"), True),
        min_partitions=_positive_int("minPartitions", lowered.get("minpartitions")),
        max_records_per_partition=_positive_int(
            "maxRecordsPerPartition", lowered.get("maxrecordsperpartition")
        ),
    )


def offsets_to_json(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """Spark's offsets JSON (``{"t":{"0":23}}``), usable as ``startingOffsets``."""
    return json.dumps(
        {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())},
        separators=(",", ":"),
    )


def complete_offsets(
    offsets: Mapping[str, Mapping[int, int]],
    partitions: Iterable[TopicPartition],
    fill: int = EARLIEST,
) -> PartitionOffsets:
    """Restrict ``offsets`` to ``partitions`` and give partitions it lacks ``fill``.

    Resuming from a manifest needs it: a partition added since the last run starts at
    earliest, and a spec must name exactly the assigned partitions.
    """
    result: PartitionOffsets = {}
    for tp in sorted(partitions):
        result.setdefault(tp.topic, {})[tp.partition] = offsets.get(tp.topic, {}).get(
            tp.partition, fill
        )
    return result


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

        def names(tps: Iterable[TopicPartition]) -> str:
            return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"

        raise PartitionMismatchError(
            f"option {option!r}: offsets must name exactly the assigned partitions "
            f"(use -2 for earliest, -1 for latest); expected {names(partitions)}, "
            f"found {names(specified)}"
        )
    return specified


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
    wanted = sorted(bounds if partitions is None else set(partitions))
    missing = [tp for tp in wanted if tp not in bounds]
    if missing:
        raise UnknownPartitionError(
            f"partitions {[f'{t}-{p}' for t, p in missing]}: expected log bounds, found none "
            "(the topic or partition does not exist)"
        )
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


def _clamp(
    tp: TopicPartition,
    start: int,
    end: int,
    log: LogBounds,
    fail: bool,
    losses: list[DataLoss],
) -> OffsetRange:
    def out_of_range(bound: str, offset: int, why: str) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
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
            raise InvalidPositiveIntegerError(
                f"option {name!r}: expected a positive integer, found {value}"
            )
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
