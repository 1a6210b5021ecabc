"""The ``sluice`` source's options: Spark's Kafka source options parsed into typed values.

A Spark data source receives its options as ``str -> str`` with the keys lower-cased
(``CaseInsensitiveStringMap``); ``CaseInsensitiveOptions`` gives them back the same rule, so a
key is looked up — and named in an error — by its documented spelling (``failOnDataLoss``).
Parsing follows Spark's ``org.apache.spark.sql.kafka010.KafkaSourceProvider`` and ``JsonUtils``:

* **what to read** (``parse_source_options`` → ``SourceOptions``): exactly one consumer
  strategy (``assign`` JSON ``{"topicA":[0,1]}``, ``subscribe`` comma list, ``subscribePattern``
  regex), ``startingOffsets`` / ``endingOffsets`` (``"earliest"``, ``"latest"`` or JSON
  ``{"topicA":{"0":23,"1":-2}}`` with -2 = ``EARLIEST`` and -1 = ``LATEST``),
  ``failOnDataLoss``, ``minPartitions``, ``maxRecordsPerPartition``. Spark's batch rules are
  kept exactly: the default start is ``earliest`` and the default end ``latest``; a batch query
  may not start at ``latest`` (nor at -1 for one partition) and may not end at ``earliest``
  (nor at -2); a streaming query takes no ``endingOffsets`` and starts at ``latest`` by
  default. ``complete_offsets`` fills partitions a spec lacks in for a resume, and
  ``offsets_to_json`` writes a spec back in Spark's JSON.
* **where to start or end by time** (``TimestampSpec``, in ``SourceOptions``): Spark's
  ``getKafkaOffsetRangeLimit`` takes, in this order of precedence, ``startingTimestamp`` (one
  timestamp, ms, for every partition), ``startingOffsetsByTimestamp`` (JSON
  ``{"topicA":{"0":1000}}``, every assigned partition named) and ``startingOffsets``; the same
  for the end (``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets``, batch
  only). A timestamp resolves to the first offset whose record timestamp is at least it
  (ListOffsets by timestamp); when no record is that late, a start fails (strategy ``error``,
  the default) or starts at latest (``startingOffsetsByTimestampStrategy=latest``), and an end
  is latest. Per-partition start and end must name the same partitions, and no start may be
  later than its end (Spark's ``checkOffsetLimitValidity``).
* **how to read** — the options that shape records, triggers and the client, not which
  records — is ``sluice.pipeline.source.read_options``.
* **typed values** (``ValueOptions.parse``): ``valueFormat=avro|json-schema|protobuf`` and
  its options (see ``sluice.pipeline.source.data_source``, "Typed values").

Booleans and positive integers go through ``sluice.common.options``; unlike a ``.properties``
key, a source option given blank is an error (Spark's ``toBoolean`` / ``toInt`` refuse it),
not the default. Every failure has its own exception class; those of the offset options
subclass ``OffsetOptionError``, as do the errors of ``sluice.pipeline.source.ranges`` for
offsets the log cannot honour. Messages name the option and what was found.

Pure functions and immutable values; nothing here performs I/O; thread-safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sluice.common.options import boolean, positive_int, text
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.value_format import ValueFormat

__all__ = [
    "EARLIEST",
    "LATEST",
    "NO_MATCH_STRATEGIES",
    "ON_DECODE_ERROR",
    "Assign",
    "CaseInsensitiveOptions",
    "ConsumerStrategy",
    "ConsumerStrategyError",
    "EarliestEndingOffsetError",
    "InvalidAssignError",
    "InvalidBooleanOptionError",
    "InvalidOffsetsError",
    "InvalidPositiveIntegerError",
    "InvalidSubscribeError",
    "InvalidSubscribePatternError",
    "InvalidTimestampError",
    "InvalidTimestampStrategyError",
    "LatestStartingOffsetError",
    "OffsetOptionError",
    "OffsetSpec",
    "PartitionOffsets",
    "SourceOptions",
    "StreamingEndingOffsetsError",
    "Subscribe",
    "SubscribePattern",
    "TimestampRangeError",
    "TimestampSpec",
    "ValueOptionError",
    "ValueOptions",
    "complete_offsets",
    "named_topics",
    "offsets_to_json",
    "option_flag",
    "option_positive_int",
    "parse_assign",
    "parse_consumer_strategy",
    "parse_ending_offsets",
    "parse_source_options",
    "parse_starting_offsets",
    "parse_subscribe",
    "parse_subscribe_pattern",
    "parse_timestamp_limit",
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
    """Base of every error for an offset option that is malformed or the log cannot honour."""


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
    """An option that takes a positive integer (``minPartitions``, ...) got something else."""


class InvalidBooleanOptionError(OffsetOptionError):
    """An option that takes ``true`` or ``false`` (``failOnDataLoss``, ...) got something else."""


class InvalidTimestampError(OffsetOptionError):
    """A timestamp option is not a timestamp (ms) or not JSON like ``{"t":{"0":1000}}``."""


class InvalidTimestampStrategyError(OffsetOptionError):
    """``startingOffsetsByTimestampStrategy`` is neither ``error`` nor ``latest``."""


class TimestampRangeError(OffsetOptionError):
    """Per-partition start and end timestamps name other partitions, or a start is after its
    end (Spark's ``unmatchedTopicPartitionsBetweenOffsets`` / ``...TimestampGreaterThan...``)."""


class ValueOptionError(ValueError):
    """A typed read's option (``valueFormat`` and those it brings) is missing or not of the
    form it takes."""


# --------------------------------------------------------------------------------------------
# Keys and scalar values
# --------------------------------------------------------------------------------------------


class CaseInsensitiveOptions(Mapping[str, str]):
    """Options whose keys match whatever their case, as Spark's ``CaseInsensitiveStringMap``.

    Iterating yields the keys lower-cased; looking one up takes any spelling. Immutable.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self._values = {str(k).lower(): str(v) for k, v in options.items()}

    def __getitem__(self, key: str) -> str:
        return self._values[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _refuse_blank(
    options: Mapping[str, str], key: str, expected: str, error: type[Exception]
) -> None:
    raw = options.get(key)
    if raw is not None and not raw.strip():
        raise error(f"{key}: expected {expected}, found {raw!r}")


def option_flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    """A source option taking ``true`` / ``false`` (any case); missing: ``default``."""
    _refuse_blank(options, key, "true or false", InvalidBooleanOptionError)
    return boolean(options, key, default, error=InvalidBooleanOptionError)


def option_positive_int(options: Mapping[str, str], key: str) -> int | None:
    """A source option taking a decimal integer > 0; missing: ``None``."""
    _refuse_blank(options, key, "a positive integer", InvalidPositiveIntegerError)
    return positive_int(options, key, error=InvalidPositiveIntegerError)


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

_STRATEGY_KEYS = ("assign", "subscribe", "subscribePattern")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The validated offset-related options of one read: what to read."""

    strategy: ConsumerStrategy
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec | None  # None for streaming queries
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    # Set, they take precedence over starting_offsets / ending_offsets (Spark's order).
    starting_timestamps: TimestampSpec | None = None
    ending_timestamps: TimestampSpec | None = None


def named_topics(strategy: ConsumerStrategy) -> list[str] | None:
    """The topics an ``assign`` or ``subscribe`` names; ``None`` for ``subscribePattern``."""
    if isinstance(strategy, Subscribe):
        return list(strategy.topics)
    if isinstance(strategy, Assign):
        return list(strategy.partitions)
    return None


# --------------------------------------------------------------------------------------------
# Parsing what to read
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


# --------------------------------------------------------------------------------------------
# Where to start or end by time
# --------------------------------------------------------------------------------------------

NO_MATCH_STRATEGIES = ("error", "latest")
"""``startingOffsetsByTimestampStrategy`` values: fail, or start at latest, when no offset has a
timestamp at least the one asked for."""

_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'


@dataclass(frozen=True, slots=True)
class TimestampSpec:
    """A start or end given by record timestamp (ms since the epoch); see the module doc.

    Exactly one of ``every`` (``startingTimestamp`` / ``endingTimestamp``: every assigned
    partition) and ``per_partition`` (``...OffsetsByTimestamp``) is set. ``on_no_match`` applies
    to a start; an end without a match is always latest (Spark). A timestamp of -2 or -1 is
    what Kafka's ListOffsets makes of it, which Spark passes on: earliest or latest.
    """

    option: str
    every: int | None = None
    per_partition: PartitionOffsets | None = None
    on_no_match: Literal["error", "latest"] = "error"

    def timestamps(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The timestamp to look up per partition: ``every`` for each of ``partitions``, or the
        JSON's (which ``resolve_ranges``' caller checks against the assigned partitions)."""
        if self.every is not None:
            return dict.fromkeys(partitions, self.every)
        assert self.per_partition is not None
        return {
            TopicPartition(t, p): ts for t, ps in self.per_partition.items() for p, ts in ps.items()
        }


def _parse_timestamp(option: str, value: str) -> int:
    text = value.strip()
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit() and int(text) >= EARLIEST):
        raise InvalidTimestampError(
            f"option {option!r}: expected a timestamp in ms since the epoch (or -2 for "
            f"earliest, -1 for latest), found {value!r}"
        )
    return int(text)


def _parse_timestamps_json(option: str, value: str) -> PartitionOffsets:
    try:
        doc = json.loads(value)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc:
        result: PartitionOffsets = {}
        for topic, stamps in doc.items():
            if not (isinstance(stamps, dict) and stamps):
                break
            if not all(
                _is_partition_key(k) and type(ts) is int and ts >= EARLIEST
                for k, ts in stamps.items()
            ):
                break
            result[topic] = {int(k): ts for k, ts in stamps.items()}
        else:
            return result
    raise InvalidTimestampError(
        f"option {option!r}: expected JSON like {_TIMESTAMPS_EXAMPLE} (timestamps in ms, -2 for "
        f"earliest, -1 for latest), found {value!r}"
    )


def parse_timestamp_limit(
    options: Mapping[str, str], bound: Literal["starting", "ending"]
) -> TimestampSpec | None:
    """``<bound>Timestamp`` or else ``<bound>OffsetsByTimestamp``; ``None`` when neither is
    given (``<bound>Offsets`` then applies). Keys in any case."""
    opts = CaseInsensitiveOptions(options)
    raw_strategy = opts.get("startingOffsetsByTimestampStrategy")
    strategy = (raw_strategy or "error").strip().lower()
    if strategy not in NO_MATCH_STRATEGIES:
        raise InvalidTimestampStrategyError(
            f"option 'startingOffsetsByTimestampStrategy': expected error or latest, "
            f"found {raw_strategy!r}"
        )
    on_no_match: Literal["error", "latest"] = "latest" if strategy == "latest" else "error"
    every_key, json_key = f"{bound}Timestamp", f"{bound}OffsetsByTimestamp"
    if every_key in opts:
        every = _parse_timestamp(every_key, opts[every_key])
        return TimestampSpec(every_key, every=every, on_no_match=on_no_match)
    if json_key in opts:
        stamps = _parse_timestamps_json(json_key, opts[json_key])
        return TimestampSpec(json_key, per_partition=stamps, on_no_match=on_no_match)
    return None


def _check_timestamp_limits(start: TimestampSpec | None, end: TimestampSpec | None) -> None:
    """Spark's ``checkOffsetLimitValidity`` for two per-partition timestamp specs."""
    if start is None or end is None or start.per_partition is None or end.per_partition is None:
        return
    starts, ends = start.timestamps(()), end.timestamps(())
    if set(starts) != set(ends):

        def names(tps: Iterable[TopicPartition]) -> str:
            return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"

        raise TimestampRangeError(
            f"options {start.option!r} and {end.option!r}: expected the same partitions, "
            f"found {names(starts)} and {names(ends)}"
        )
    for tp, ts in sorted(starts.items()):
        if ts > ends[tp] >= 0:
            raise TimestampRangeError(
                f"{tp.topic}-{tp.partition}: expected the starting timestamp <= the ending "
                f"timestamp, found {ts} > {ends[tp]}"
            )


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


def parse_consumer_strategy(options: Mapping[str, str]) -> ConsumerStrategy:
    """Exactly one of ``assign``, ``subscribe``, ``subscribePattern`` (keys in any case)."""
    opts = CaseInsensitiveOptions(options)
    given = [k for k in _STRATEGY_KEYS if k in opts]
    if len(given) != 1:
        raise ConsumerStrategyError(
            "options: expected exactly one of 'assign', 'subscribe', 'subscribePattern', "
            f"found {len(given)}" + (f" ({', '.join(k.lower() for k in given)})" if given else "")
        )
    key = given[0]
    strategy: ConsumerStrategy
    if key == "assign":
        strategy = parse_assign(opts[key])
    elif key == "subscribe":
        strategy = parse_subscribe(opts[key])
    else:
        strategy = parse_subscribe_pattern(opts[key])
    return strategy


def parse_source_options(options: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Validate the offset-related options of a read, as Spark's ``KafkaSourceProvider`` does.

    Keys are matched case-insensitively; other keys (``kafka.bootstrap.servers`` ...) are left
    to the caller.
    """
    opts = CaseInsensitiveOptions(options)
    if streaming:
        # Spark refuses endingOffsetsByTimestamp here and ignores endingTimestamp; Sluice
        # refuses both (an option is never silently ignored).
        for key in ("endingTimestamp", "endingOffsetsByTimestamp"):
            if key in opts:
                raise StreamingEndingOffsetsError(
                    f"option {key!r}: ending timestamp not valid in streaming queries, "
                    f"found {opts[key]!r}"
                )
    starting_timestamps = parse_timestamp_limit(opts, "starting")
    ending_timestamps = None if streaming else parse_timestamp_limit(opts, "ending")
    _check_timestamp_limits(starting_timestamps, ending_timestamps)
    return SourceOptions(
        strategy=parse_consumer_strategy(opts),
        starting_offsets=parse_starting_offsets(opts.get("startingOffsets"), streaming=streaming),
        ending_offsets=parse_ending_offsets(opts.get("endingOffsets"), streaming=streaming),
        fail_on_data_loss=option_flag(opts, "failOnDataLoss", True),
        min_partitions=option_positive_int(opts, "minPartitions"),
        max_records_per_partition=option_positive_int(opts, "maxRecordsPerPartition"),
        starting_timestamps=starting_timestamps,
        ending_timestamps=ending_timestamps,
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
# Typed values
# --------------------------------------------------------------------------------------------

ON_DECODE_ERROR = ("fail", "errorTable")


@dataclass(frozen=True, slots=True)
class ValueOptions:
    """The options of a typed read (``valueFormat=avro|json-schema|protobuf``; see
    ``data_source``'s doc and ``sluice.pipeline.source.value_format``). Picklable.

    ``error_path`` may be ``None`` with ``on_decode_error="errorTable"`` while a caller still
    has to choose the directory (the nightly load: a run's staging directory);
    ``require_error_path`` checks it before a read. ``message`` is Protobuf's value message
    (``valueSchemaMessage``, a full name; ``None``: the schema's first message).
    """

    registry_url: str
    subject: str | None = None
    version: str | None = None
    schema_id: int | None = None
    nested: bool = False
    on_decode_error: str = "fail"  # "fail" or "errorTable"
    error_path: str | None = None
    value_format: ValueFormat = ValueFormat.AVRO
    message: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ValueOptions | None:
        """``None`` for ``valueFormat=binary`` (the default); keys in any case.

        ``onDecodeError`` defaults to ``errorTable`` when ``decodeErrorPath`` is given, else to
        ``fail``.
        """
        opts = CaseInsensitiveOptions(options)
        try:
            value_format = ValueFormat.parse(text(opts, "valueFormat"))
        except ValueError as exc:
            raise ValueOptionError(str(exc)) from None
        if value_format is None:
            return None
        url = text(opts, "schema.registry.url")
        if url is None:
            raise ValueOptionError("schema.registry.url: expected a URL, found none")
        columns = (text(opts, "valueColumns") or "flatten").lower()
        if columns not in ("flatten", "struct"):
            raise ValueOptionError(f"valueColumns: expected flatten or struct, found {columns!r}")
        error_path = text(opts, "decodeErrorPath")
        on_error = text(opts, "onDecodeError") or ("errorTable" if error_path else "fail")
        matched = [m for m in ON_DECODE_ERROR if m.lower() == on_error.lower()]
        if not matched:
            raise ValueOptionError(
                f"onDecodeError: expected fail or errorTable, found {on_error!r}"
            )
        message = text(opts, "valueSchemaMessage")
        if message is not None and value_format is not ValueFormat.PROTOBUF:
            raise ValueOptionError(
                f"valueSchemaMessage: expected only with valueFormat=protobuf, found "
                f"valueFormat={value_format.value}"
            )
        return cls(
            registry_url=url,
            subject=text(opts, "valueSchemaSubject"),
            version=text(opts, "valueSchemaVersion"),
            schema_id=option_positive_int(opts, "valueSchemaId"),
            nested=columns == "struct",
            on_decode_error=matched[0],
            error_path=error_path,
            value_format=value_format,
            message=message,
        )

    def require_error_path(self) -> None:
        """Raise ``ValueOptionError`` if ``errorTable`` has no directory to write to."""
        if self.on_decode_error == "errorTable" and not self.error_path:
            raise ValueOptionError(
                "decodeErrorPath: expected a directory for onDecodeError=errorTable, found none"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "registry_url": self.registry_url,
            "subject": self.subject,
            "version": self.version,
            "schema_id": self.schema_id,
            "nested": self.nested,
            "on_decode_error": self.on_decode_error,
            "error_path": self.error_path,
            "value_format": self.value_format.value,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ValueOptions:
        fields = {k: value[k] for k in cls.__dataclass_fields__ if k in value}
        fields["value_format"] = ValueFormat(value.get("value_format", "avro"))
        return cls(**fields)
