"""``TOPIC_CONFIGS``: every topic-level config Kafka defines, with its type, default, broker
synonyms and validation — what CreateTopics, AlterConfigs, IncrementalAlterConfigs and
DescribeConfigs agree on.

Kafka's table is ``LogConfig``'s ``ConfigDef`` (Kafka 3.7 ``TopicConfig`` names); the broker
synonyms and their order are ``LogConfig.TopicConfigSynonyms`` (the most precise unit first:
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``). Every key here is
accepted and stored: the ones the log models (``sluice.broker.log.log_config``) and
replication reads (``min.insync.replicas``, ``unclean.leader.election.enable``) take effect;
the others (``compression.type``, ``preallocate``, ``message.downconversion.enable``…) are
kept and reported, as a Kafka broker reports a config that changes nothing on its storage
engine. A key Kafka does not define is refused, as Kafka refuses it (``Unknown topic config
name``). ``read.flushed.only`` is Sluice's own (see ``log_config``).

Validation, like Kafka's ``ConfigDef.parse`` then ``LogConfig.validate``: the value must parse
as the key's type (``Not a number of type LONG``) and pass the key's validator (``Value must be
at least 14``); an error names the key, the value and what was expected, and is raised as
:class:`~sluice.broker.cluster.topic_metadata.InvalidConfigError`.

:func:`describe` computes one topic's entries as DescribeConfigs reports them (Kafka's
``ConfigHelper.createTopicConfigEntry``): the topic's override (source ``TOPIC_CONFIG``) or the
broker's value (``STATIC_BROKER_CONFIG``, named after the broker synonym) or Kafka's default
(``DEFAULT_CONFIG``), with the synonyms in that precedence order.

Pure; thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sluice.broker.cluster.topic_metadata import InvalidConfigError
from sluice.broker.log.log_config import REPLICATION_TOPIC_KEYS, TOPIC_KEYS, LogConfig
from sluice.common.options import parse_boolean

MAX_LONG = (1 << 63) - 1
MAX_INT = (1 << 31) - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs' ``config_type`` (v3+), Kafka's ``DescribeConfigsResponse.ConfigType``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' ``config_source`` (v1+): Kafka's ``ConfigSource``."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


Check = Callable[[object], str | None]  # None if fine, else what was expected


def _at_least(low: float) -> Check:
    def check(value: object) -> str | None:
        assert isinstance(value, int | float)
        return None if value >= low else f"Value must be at least {config_text(low)}"

    return check


def _between(low: float, high: float) -> Check:
    def check(value: object) -> str | None:
        assert isinstance(value, int | float)
        ok = low <= value <= high
        return None if ok else f"Value must be between {config_text(low)} and {config_text(high)}"

    return check


def _one_of(*allowed: str) -> Check:
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in allowed]
        return None if not bad else f"String must be one of: {', '.join(allowed)}"

    return check


def _throttled_replicas(value: object) -> str | None:
    # Kafka's ThrottledReplicaListValidator: "*" or partition:broker pairs.
    assert isinstance(value, list)
    if value == ["*"] or all(
        len(v.split(":")) == 2 and all(part.strip().isdigit() for part in v.split(":"))
        for v in value
    ):
        return None
    return "must be the literal '*' or a list of replicas in the form <partitionId>:<brokerId>"


def config_text(value: object) -> str:
    """A value as Kafka writes it in a config (``true``, ``0.5``, ``compact,delete``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(value)
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic config: Kafka's name, type, default (as text), broker synonyms in precedence
    order, validator, and whether Sluice acts on it."""

    name: str
    type: ConfigType
    default: str
    synonyms: tuple[str, ...] = ()
    check: Check | None = None

    def parse(self, raw: str) -> object:
        """The value of ``raw`` as Kafka's ``ConfigDef.parseType`` reads it, validated; raises
        ``InvalidConfigError`` saying what was expected and what was found."""
        text = raw.strip()
        value: object
        try:
            if self.type is ConfigType.BOOLEAN:
                value = parse_boolean(self.name, text)  # an InvalidOptionError is a ValueError
            elif self.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
                value = int(text)
                limit = MAX_INT if self.type is ConfigType.INT else MAX_LONG
                if not -limit - 1 <= value <= limit:
                    raise ValueError
            elif self.type is ConfigType.DOUBLE:
                value = float(text)
            elif self.type is ConfigType.LIST:
                value = [v.strip() for v in text.split(",") if v.strip()]
            else:
                value = text
        except ValueError:
            kind = {ConfigType.BOOLEAN: "Expected value to be either true or false"}.get(
                self.type, f"Not a number of type {self.type.name}"
            )
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {self.name}: {kind}"
            ) from None
        if self.check is not None:
            problem = self.check(value)
            if problem is not None:
                raise InvalidConfigError(
                    f"Invalid value {raw} for configuration {self.name}: {problem}"
                )
        return value


def _def(
    name: str, kind: ConfigType, default: object, *synonyms: str, check: Check | None = None
) -> TopicConfigDef:
    return TopicConfigDef(name, kind, config_text(default), synonyms, check)


_B, _S, _I, _L, _D, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_WEEK_MS = 7 * 24 * 3600 * 1000
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _def("cleanup.policy", _LIST, "delete", "log.cleanup.policy",
             check=_one_of("compact", "delete")),
        _def("compression.type", _S, "producer", "compression.type",
             check=_one_of(*_COMPRESSION)),
        _def("compression.gzip.level", _I, -1, "compression.gzip.level",
             check=lambda v: None if v == -1 or 1 <= v <= 9  # type: ignore[operator]
             else "Value must be between 1 and 9 or -1"),
        _def("compression.lz4.level", _I, 9, "compression.lz4.level", check=_between(1, 17)),
        _def("compression.zstd.level", _I, 3, "compression.zstd.level",
             check=_between(-131072, 22)),
        _def("delete.retention.ms", _L, 86_400_000, "log.cleaner.delete.retention.ms",
             check=_at_least(0)),
        _def("file.delete.delay.ms", _L, 60_000, "log.segment.delete.delay.ms",
             check=_at_least(0)),
        _def("flush.messages", _L, MAX_LONG, "log.flush.interval.messages", check=_at_least(1)),
        _def("flush.ms", _L, MAX_LONG, "log.flush.interval.ms", check=_at_least(0)),
        _def("follower.replication.throttled.replicas", _LIST, "",
             "follower.replication.throttled.replicas", check=_throttled_replicas),
        _def("index.interval.bytes", _I, 4096, "log.index.interval.bytes", check=_at_least(0)),
        _def("leader.replication.throttled.replicas", _LIST, "",
             "leader.replication.throttled.replicas", check=_throttled_replicas),
        _def("local.retention.bytes", _L, -2, "log.local.retention.bytes", check=_at_least(-2)),
        _def("local.retention.ms", _L, -2, "log.local.retention.ms", check=_at_least(-2)),
        _def("max.compaction.lag.ms", _L, MAX_LONG, "log.cleaner.max.compaction.lag.ms",
             check=_at_least(1)),
        _def("max.message.bytes", _I, 1_048_588, "message.max.bytes", check=_at_least(0)),
        _def("message.downconversion.enable", _B, True, "log.message.downconversion.enable"),
        _def("message.format.version", _S, "3.0-IV1", "log.message.format.version"),
        _def("message.timestamp.after.max.ms", _L, MAX_LONG,
             "log.message.timestamp.after.max.ms", check=_at_least(0)),
        _def("message.timestamp.before.max.ms", _L, MAX_LONG,
             "log.message.timestamp.before.max.ms", check=_at_least(0)),
        _def("message.timestamp.difference.max.ms", _L, MAX_LONG,
             "log.message.timestamp.difference.max.ms", check=_at_least(0)),
        _def("message.timestamp.type", _S, "CreateTime", "log.message.timestamp.type",
             check=_one_of("CreateTime", "LogAppendTime")),
        _def("min.cleanable.dirty.ratio", _D, 0.5, "log.cleaner.min.cleanable.ratio",
             check=_between(0, 1)),
        _def("min.compaction.lag.ms", _L, 0, "log.cleaner.min.compaction.lag.ms",
             check=_at_least(0)),
        _def("min.insync.replicas", _I, 1, "min.insync.replicas", check=_at_least(1)),
        _def("preallocate", _B, False, "log.preallocate"),
        _def("remote.log.copy.disable", _B, False),
        _def("remote.log.delete.on.disable", _B, False),
        _def("remote.storage.enable", _B, False),
        _def("retention.bytes", _L, -1, "log.retention.bytes"),
        _def("retention.ms", _L, _WEEK_MS, "log.retention.ms", "log.retention.minutes",
             "log.retention.hours", check=_at_least(-1)),
        # Kafka: at least LegacyRecord.RECORD_OVERHEAD_V0 (14); Sluice's positions are 4 bytes.
        _def("segment.bytes", _I, 1 << 30, "log.segment.bytes", check=_at_least(14)),
        _def("segment.index.bytes", _I, 10 * 1024 * 1024, "log.index.size.max.bytes",
             check=_at_least(4)),
        _def("segment.jitter.ms", _L, 0, "log.roll.jitter.ms", "log.roll.jitter.hours",
             check=_at_least(0)),
        _def("segment.ms", _L, _WEEK_MS, "log.roll.ms", "log.roll.hours", check=_at_least(1)),
        _def("unclean.leader.election.enable", _B, False, "unclean.leader.election.enable"),
        # Sluice's own (the 2011 paper's flushed-only reads), see log_config.
        _def("read.flushed.only", _B, False, "log.read.flushed.only"),
    )
}  # fmt: skip
"""Topic config name → definition: every topic config of Kafka 3.7, and Sluice's one."""

#: Keys Sluice's log or replication acts on; the rest are stored and reported only.
EFFECTIVE_KEYS = frozenset(TOPIC_KEYS) | frozenset(REPLICATION_TOPIC_KEYS)


def validate(config: Mapping[str, str | None]) -> dict[str, str]:
    """``config`` checked key by key (every value parsed and validated as Kafka does); returns
    it without null values. Raises ``InvalidConfigError`` for an unknown key or a bad value."""
    out: dict[str, str] = {}
    for key, raw in config.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        if raw is None:
            continue
        definition.parse(raw)
        out[key] = raw
    return out


def log_overrides(config: Mapping[str, str]) -> dict[str, str]:
    """The part of a topic's config the log settings and replication model
    (``LogConfig.with_overrides`` takes exactly these keys)."""
    return {k: v for k, v in config.items() if k in EFFECTIVE_KEYS}


def log_settings(base: LogConfig, config: Mapping[str, str]) -> LogConfig:
    """A topic's log settings: ``base`` (the broker's) with the topic's overrides of the keys
    the log models; the other Kafka keys are stored and reported only. Raises ``ValueError``
    for a value the log settings refuse (e.g. ``segment.bytes`` over 2 GiB)."""
    return base.with_overrides(log_overrides(config))


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs entry: name, value, source, and the synonyms (highest precedence
    first, the entry's own source included)."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def describe(
    topic_config: Mapping[str, str], broker_values: Mapping[str, str]
) -> list[ConfigEntry]:
    """Every topic config of one topic, as DescribeConfigs reports it (see module docstring).

    ``broker_values``: broker keys (synonyms such as ``log.retention.ms``) this broker sets to
    something other than Kafka's default, with their values."""
    entries = []
    for definition in sorted(TOPIC_CONFIGS.values(), key=lambda d: d.name):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if definition.name in topic_config:
            synonyms.append(
                (definition.name, topic_config[definition.name], ConfigSource.TOPIC_CONFIG)
            )
        for synonym in definition.synonyms:
            if synonym in broker_values:
                synonyms.append(
                    (synonym, broker_values[synonym], ConfigSource.STATIC_BROKER_CONFIG)
                )
        default_name = definition.synonyms[0] if definition.synonyms else definition.name
        synonyms.append((default_name, definition.default, ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(
            ConfigEntry(definition.name, value, source, definition.type, synonyms=tuple(synonyms))
        )
    return entries
