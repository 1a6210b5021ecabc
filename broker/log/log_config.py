"""``LogConfig``: the per-partition settings of the log, under Kafka's names.

Broker-wide defaults come from ``server.properties`` keys (``log.segment.bytes``,
``log.retention.hours`` ...); a topic may override them with the topic-level keys
(``segment.bytes``, ``retention.ms`` ...), as in Kafka. The table below is the whole mapping.

Compaction (Kafka's ``LogConfig``; broker key → topic key, default):

    log.cleanup.policy                  cleanup.policy             delete
    log.cleaner.min.cleanable.ratio     min.cleanable.dirty.ratio  0.5
    log.cleaner.min.compaction.lag.ms   min.compaction.lag.ms      0
    log.cleaner.max.compaction.lag.ms   max.compaction.lag.ms      2^63-1 (never forced)
    log.cleaner.delete.retention.ms     delete.retention.ms        86400000 (one day)

``cleanup.policy`` is ``delete``, ``compact`` or both (``compact,delete``, any order). With
``compact`` the log cleaner keeps the latest record of every key, a record without a key is
refused at append, and the active segment rolls after ``min(segment.ms,
max.compaction.lag.ms)`` so no record waits longer than ``max.compaction.lag.ms`` to become
cleanable (Kafka's ``maxSegmentMs``). Without ``delete`` the retention limits
(``retention.ms``, ``retention.bytes``) do not apply. The broker-wide cleaner settings
(threads, dedupe buffer, backoff) are in ``cleaner_config``.

``read.flushed.only`` (broker key ``log.read.flushed.only``) is Sluice's own: when true a
consumer sees a message only after it was flushed to disk, as in the 2011 paper (§3.1). Kafka
exposes messages as soon as they are appended (and replicated); that stays the default.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice.broker.log.errors import RecordBatchTooLargeError
from sluice.common.options import parse_boolean

MAX_LONG = (1 << 63) - 1
DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    retention_ms: int = 7 * DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_messages: int = MAX_LONG
    flush_ms: int = MAX_LONG
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    max_message_bytes: int = 1024 * 1024 + 12  # Kafka's 1048588
    file_delete_delay_ms: int = 60_000
    message_timestamp_type: str = "CreateTime"
    read_flushed_only: bool = False
    cleanup_policy: str = "delete"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = MAX_LONG
    delete_retention_ms: int = DAY_MS

    def check_batch_size(self, size: int) -> None:
        """Raise :class:`RecordBatchTooLargeError` for a batch of ``size`` bytes that is over
        ``max.message.bytes`` or could not fit a segment."""
        if size > self.max_message_bytes:
            raise RecordBatchTooLargeError(
                f"expected batches of at most {self.max_message_bytes} bytes "
                f"(max.message.bytes), found {size}"
            )
        if size > self.segment_bytes:
            raise RecordBatchTooLargeError(
                f"a {size}-byte batch cannot fit a {self.segment_bytes}-byte segment"
            )

    # The derived values below are read on every append (``compact`` for the key check,
    # ``max_segment_ms`` for the roll deadline): computed once per config, on first use, then
    # plain attribute reads. ``cached_property`` writes the instance ``__dict__`` directly, so
    # it works on a frozen dataclass; the values are not fields (equality, ``replace`` and
    # ``fields`` ignore them) and depend only on fields, which never change.
    @functools.cached_property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (``cleanup.policy`` holds ``compact``)."""
        return "compact" in _policies(self.cleanup_policy)

    @functools.cached_property
    def delete(self) -> bool:
        """Whether retention deletes old segments (``cleanup.policy`` holds ``delete``)."""
        return "delete" in _policies(self.cleanup_policy)

    @functools.cached_property
    def max_batch_bytes(self) -> int:
        """The largest batch :meth:`check_batch_size` accepts."""
        return min(self.max_message_bytes, self.segment_bytes)

    @functools.cached_property
    def max_segment_ms(self) -> int:
        """How old the active segment may grow before it rolls: ``segment.ms``, or less on a
        compacted log so ``max.compaction.lag.ms`` can be honoured (Kafka's rule)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def __post_init__(self) -> None:
        if self.segment_bytes < 14 or self.segment_bytes > (1 << 31) - 1:
            raise ValueError(
                f"segment.bytes: expected 14 .. 2147483647 (positions are 4 bytes), "
                f"found {self.segment_bytes}"
            )
        if self.index_interval_bytes < 0 or self.segment_index_bytes < 12:
            raise ValueError("index.interval.bytes and segment.index.bytes must be positive")
        if self.flush_messages < 1 or self.flush_ms < 0 or self.segment_ms < 1:
            raise ValueError("flush.messages >= 1, flush.ms >= 0 and segment.ms >= 1 expected")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(
                f"message.timestamp.type: expected CreateTime or LogAppendTime, "
                f"found {self.message_timestamp_type!r}"
            )
        policies = _policies(self.cleanup_policy)
        if not policies or not policies <= {"compact", "delete"}:
            raise ValueError(
                f"cleanup.policy: expected delete, compact or compact,delete, "
                f"found {self.cleanup_policy!r}"
            )
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"min.cleanable.dirty.ratio: expected 0 .. 1, "
                f"found {self.min_cleanable_dirty_ratio}"
            )
        if self.min_compaction_lag_ms < 0 or self.delete_retention_ms < 0:
            raise ValueError(
                f"min.compaction.lag.ms and delete.retention.ms: expected >= 0, found "
                f"{self.min_compaction_lag_ms} and {self.delete_retention_ms}"
            )
        if self.max_compaction_lag_ms < 1:
            raise ValueError(
                f"max.compaction.lag.ms: expected >= 1, found {self.max_compaction_lag_ms}"
            )
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError(
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not exceed "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    def with_overrides(self, topic_config: Mapping[str, str]) -> LogConfig:
        """A copy with topic-level keys (``retention.ms=...``) applied."""
        changes: dict[str, Any] = {}
        for key, raw in topic_config.items():
            if key in REPLICATION_TOPIC_KEYS:
                REPLICATION_TOPIC_KEYS[key](raw)  # validated here, used by replication
                continue
            if key not in TOPIC_KEYS:
                known = sorted([*TOPIC_KEYS, *REPLICATION_TOPIC_KEYS])
                raise ValueError(f"unknown topic config {key!r}; expected one of {known}")
            name = TOPIC_KEYS[key]
            changes[name] = _convert(name, raw)
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Defaults from a broker's ``server.properties`` keys; unrelated keys are ignored."""
        changes: dict[str, Any] = {}
        for key, name, scale in _BROKER_KEYS:
            if key in props:
                value = _convert(name, props[key])
                changes[name] = value if scale == 1 else value * scale
        # The most precise unit wins, as in Kafka (ms over minutes over hours).
        for name, keys in _UNIT_PRECEDENCE.items():
            for key, scale in keys:
                if key in props:
                    value = int(props[key])
                    changes[name] = value * scale if value >= 0 else -1
                    break
        return cls(**changes)


def _policies(raw: str) -> frozenset[str]:
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def _convert(name: str, raw: str) -> Any:
    field = {f.name: f for f in dataclasses.fields(LogConfig)}[name]
    if field.type in ("float", float):
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"{name}: expected a number, found {raw!r}") from None
    if field.type in ("bool", bool):
        return parse_boolean(name, raw, error=ValueError)
    if field.type in ("str", str):
        return raw.strip()
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, found {raw!r}") from None


TOPIC_KEYS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "max.message.bytes": "max_message_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "message.timestamp.type": "message_timestamp_type",
    "read.flushed.only": "read_flushed_only",
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
}


def _check_min_isr(raw: str) -> None:
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"min.insync.replicas: expected an integer >= 1, found {raw!r}")


def _check_bool(key: str) -> Any:
    def check(raw: str) -> None:
        parse_boolean(key, raw, error=ValueError)

    return check


# Topic keys that are not log settings: replication reads them from the topic's config.
REPLICATION_TOPIC_KEYS: dict[str, Any] = {
    "min.insync.replicas": _check_min_isr,
    "unclean.leader.election.enable": _check_bool("unclean.leader.election.enable"),
}

_BROKER_KEYS = [
    ("log.segment.bytes", "segment_bytes", 1),
    ("log.retention.bytes", "retention_bytes", 1),
    ("log.flush.interval.messages", "flush_messages", 1),
    ("log.flush.interval.ms", "flush_ms", 1),
    ("log.index.interval.bytes", "index_interval_bytes", 1),
    ("log.index.size.max.bytes", "segment_index_bytes", 1),
    ("message.max.bytes", "max_message_bytes", 1),
    ("log.segment.delete.delay.ms", "file_delete_delay_ms", 1),
    ("log.message.timestamp.type", "message_timestamp_type", 1),
    ("log.read.flushed.only", "read_flushed_only", 1),
    ("log.cleanup.policy", "cleanup_policy", 1),
    ("log.cleaner.min.cleanable.ratio", "min_cleanable_dirty_ratio", 1),
    ("log.cleaner.min.compaction.lag.ms", "min_compaction_lag_ms", 1),
    ("log.cleaner.max.compaction.lag.ms", "max_compaction_lag_ms", 1),
    ("log.cleaner.delete.retention.ms", "delete_retention_ms", 1),
]

_UNIT_PRECEDENCE = {
    "retention_ms": [
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ],
    "segment_ms": [("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
}
