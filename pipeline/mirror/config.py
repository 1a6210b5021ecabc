"""``MirrorConfig``: the keys of ``conf/mirror.properties``, MirrorMaker 2's names where it has one.

===================================  =============  =============================================
key                                  default        meaning
===================================  =============  =============================================
clusters                             (required)     source cluster aliases, comma-separated
<alias>.bootstrap.servers            (required)     one per source alias
<alias>.<librdkafka key>                            every client of that source cluster
<alias>.consumer.<librdkafka key>                   that source cluster's consumer only
consumer.<librdkafka key>                           every source consumer
target.alias                         (required)     the target (offline) cluster's name
target.bootstrap.servers             (required)
target.replication.factor            -1             for created target topics; -1: broker default
target.<librdkafka key>                             every client of the target cluster
producer.<librdkafka key>                           the target producers
group.id                             sluice-mirror  one group on every source cluster
topics                               .*             comma-separated regexes, full match
topics.exclude                       (none)         comma-separated regexes, full match
refresh.topics.interval.seconds      10             how often the topic list and the partition
                                                    counts are re-read (MirrorMaker 2's key)
refresh.topics.interval.ms           10000          the same in ms (not with the key above)
sync.topic.configs.enabled           true           sync target topics' configs to the source's
sync.topic.configs.interval.seconds  600            how often (IncrementalAlterConfigs)
config.properties.exclude            (MM2's list)   topic configs never copied: comma-separated
                                                    regexes, full match (``topic_configs``)
use.defaults.from                    target         a config at its source default takes the
                                                    target's default (target) or the source's
batch.max.messages                   5000           records per consume → produce → commit cycle
batch.max.wait.ms                    500            how long one consume waits for records
commit.timeout.ms                    60000          retriable commit errors retried this long
exactly.once.enabled                 false          transactional mode: each batch and its
                                                    source offsets in one target transaction
exactly.once.source.support          disabled       MirrorMaker 2's name for the key above
                                                    (KIP-618): enabled, disabled or preparing
metrics.listener                     (unset: off)   http://host:port for Prometheus
===================================  =============  =============================================

Aliases are ``[A-Za-z0-9._-]+`` (they go into the lineage header, ``sluice.pipeline.lineage``);
a key under ``<alias>.`` belongs to the longest alias it starts with. Topic names beginning with
``__`` (``__consumer_offsets``…) are never mirrored, whatever the regexes say. A regex cannot
contain a comma (the list is split on commas first), as in MirrorMaker 2.

Precedence, lowest first: the mirror's defaults, ``<alias>.<key>`` / ``target.<key>``, then
``consumer.<key>`` / ``producer.<key>``, then ``<alias>.consumer.<key>``. Settings the delivery
guarantee rests on are fixed and may not be overridden with another value: consumers have
``enable.auto.commit=false`` and ``enable.auto.offset.store=false`` (the mirror commits
explicit offsets itself), producers ``acks=all`` and ``enable.idempotence=true``;
``group.id`` and ``bootstrap.servers`` have their own keys. Consumer defaults:
``auto.offset.reset=earliest`` (a topic the mirror has never seen is copied from its start),
``partition.assignment.strategy=roundrobin``; producer default: ``partitioner=murmur2_random``
(Java Kafka's key hash, used when source and target partition counts differ).

**Exactly-once** (``sluice.pipeline.mirror.offset_store`` has the protocol):
``exactly.once.enabled=true`` — or MirrorMaker 2's ``exactly.once.source.support=enabled``, its
alias (MirrorMaker 2 sets it per target cluster, ``<target>.exactly.once.source.support``; this
mirror has one target, so the key stands alone) — makes each loop's target producer
transactional with ``transactional.id=<group.id>-<alias>`` (MirrorMaker 2's
``<group>-<connector>-<task>`` shape; stable across restarts, so a restarted mirror fences its
zombie), and stores the source offsets in the target topic ``mm2-offsets.<alias>.internal``
inside each batch's transaction. ``preparing`` is MirrorMaker 2's first step of a rolling
upgrade (workers ready to fence, tasks not yet transactional): here it means disabled, as
nothing has to be prepared. Giving both keys is an error unless they agree. In this mode
``transactional.id`` is the mirror's own (``producer.transactional.id`` is refused) and
``producer.transaction.timeout.ms`` passes through (librdkafka's default, 60 s, bounds how long
a killed mirror's open transaction holds read_committed readers back if it is never restarted).

Every malformed key raises :class:`MirrorConfigError` naming the key, what was expected and
what was found (numbers and lists through ``sluice.common.options``). librdkafka keys are checked
by librdkafka when the clients are built. A blank value (``key=``) is the default, except for
``topics``/``topics.exclude``/``config.properties.exclude``, where it lists no regex
(``topics=`` mirrors nothing, ``config.properties.exclude=`` copies every topic config).

Topic configs and partitions follow MirrorMaker 2 (``sluice.pipeline.mirror.target_topics``):
a target topic is created with the source topic's configs (the ones
``config.properties.exclude`` and ``use.defaults.from`` leave, :mod:`~sluice.pipeline.mirror.
topic_configs`), re-synced every ``sync.topic.configs.interval.seconds``; a source topic that
gained partitions has its target topic grown at the next topic refresh. The refresh interval
is MirrorMaker 2's ``refresh.topics.interval.seconds`` or, finer, ``refresh.topics.interval.ms``
(Sluice's key before; tests refresh every 500 ms); giving both is an error. Sluice's default
stays 10 s (MirrorMaker 2's is 600 s).

A parsed :class:`MirrorConfig` is immutable (its dicts are never changed after parsing), so
every mirror loop thread reads it without a lock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from sluice.common.options import boolean, integer, names, nearest, required, text
from sluice.pipeline.lineage import LineageError, check_cluster_alias
from sluice.pipeline.mirror.topic_configs import (
    DEFAULT_EXCLUDE,
    DEFAULTS_FROM,
    ConfigPropertyFilter,
)

__all__ = ["MirrorConfig", "MirrorConfigError", "SourceCluster"]


class MirrorConfigError(ValueError):
    """A mirror configuration key is missing or malformed; the message names the key."""


# A key without which the config means nothing: missing or blank is a MirrorConfigError.
_required = partial(required, error=MirrorConfigError)


_TOP_LEVEL = frozenset(
    {
        "clusters",
        "group.id",
        "topics",
        "topics.exclude",
        "refresh.topics.interval.ms",
        "refresh.topics.interval.seconds",
        "sync.topic.configs.enabled",
        "sync.topic.configs.interval.seconds",
        "config.properties.exclude",
        "use.defaults.from",
        "batch.max.messages",
        "batch.max.wait.ms",
        "commit.timeout.ms",
        "exactly.once.enabled",
        "exactly.once.source.support",
        "metrics.listener",
        "target.alias",
        "target.bootstrap.servers",
        "target.replication.factor",
    }
)
# Aliases that would make a key's owner ambiguous (``consumer.x`` is a global consumer key).
_RESERVED_ALIASES = frozenset({"target", "consumer", "producer"})

# key → the only value it may have (after lower-casing); the mirror sets it itself.
_FIXED_CONSUMER = {"enable.auto.commit": "false", "enable.auto.offset.store": "false"}
_FIXED_PRODUCER = {"acks": ("all", "-1"), "enable.idempotence": ("true",)}
_OWN_KEYS = {"group.id": "group.id", "bootstrap.servers": "<alias>.bootstrap.servers"}

_CONSUMER_DEFAULTS = {
    "auto.offset.reset": "earliest",
    "partition.assignment.strategy": "roundrobin",
}
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": "5"}


@dataclass(frozen=True)
class SourceCluster:
    """One live cluster the mirror pulls from."""

    alias: str
    bootstrap_servers: str
    client: dict[str, str] = field(default_factory=dict)  # <alias>.<key>: all its clients
    consumer: dict[str, str] = field(default_factory=dict)  # <alias>.consumer.<key>


def _regexes(
    props: Mapping[str, str], key: str, default: tuple[re.Pattern[str], ...]
) -> tuple[re.Pattern[str], ...]:
    """The comma-separated regexes of ``key``; ``default`` only when the key is missing (a
    blank value lists none)."""
    if key not in props:
        return default
    patterns = []
    for item in names(props, key):
        try:
            patterns.append(re.compile(item))
        except re.error as exc:
            raise MirrorConfigError(
                f"{key}: expected comma-separated regular expressions, found {item!r} ({exc})"
            ) from None
    return tuple(patterns)


def _refresh_interval_ms(props: Mapping[str, str]) -> int:
    """``refresh.topics.interval.seconds`` (MirrorMaker 2's) or ``.ms``, never both."""
    seconds_key, ms_key = "refresh.topics.interval.seconds", "refresh.topics.interval.ms"
    if text(props, seconds_key) is not None:
        if text(props, ms_key) is not None:
            raise MirrorConfigError(
                f"{seconds_key}: expected it or {ms_key}, not both; found {seconds_key}="
                f"{props[seconds_key]!r} and {ms_key}={props[ms_key]!r}"
            )
        return 1000 * integer(props, seconds_key, 10, minimum=1, error=MirrorConfigError)
    return integer(props, ms_key, 10_000, minimum=1, error=MirrorConfigError)


# MirrorMaker 2's exactly.once.source.support values (KIP-618) → whether the mirror is
# transactional. ``preparing`` is the rolling-upgrade step before ``enabled``: not yet.
_EXACTLY_ONCE_SUPPORT = {"enabled": True, "disabled": False, "preparing": False}


def _exactly_once(props: Mapping[str, str]) -> bool:
    """``exactly.once.enabled`` (Sluice's) or its alias ``exactly.once.source.support`` (MM2's);
    both may be given only when they agree."""
    key, alias = "exactly.once.enabled", "exactly.once.source.support"
    enabled = boolean(props, key, False, error=MirrorConfigError)
    support = text(props, alias)
    if support is None:
        return enabled
    lowered = support.lower()
    if lowered not in _EXACTLY_ONCE_SUPPORT:
        raise MirrorConfigError(
            f"{alias}: expected one of {', '.join(_EXACTLY_ONCE_SUPPORT)}, found {support!r}"
        )
    aliased = _EXACTLY_ONCE_SUPPORT[lowered]
    if text(props, key) is not None and enabled != aliased:
        raise MirrorConfigError(
            f"{alias}: expected a value agreeing with {key}={props[key]!r} (its alias), "
            f"found {support!r}"
        )
    return aliased


def _defaults_from(props: Mapping[str, str]) -> str:
    value = (text(props, "use.defaults.from") or "target").lower()
    if value not in DEFAULTS_FROM:
        raise MirrorConfigError(
            f"use.defaults.from: expected {' or '.join(DEFAULTS_FROM)}, "
            f"found {props['use.defaults.from']!r}"
        )
    return value


def _alias(value: str, key: str) -> str:
    try:
        return check_cluster_alias(value)
    except LineageError as exc:
        raise MirrorConfigError(f"{key}: {exc}") from None


def _check_fixed(key: str, value: str, allowed: tuple[str, ...], why: str) -> None:
    if value.strip().lower() not in allowed:
        raise MirrorConfigError(f"{key}: {why}; expected {allowed[0]} or unset, found {value!r}")


@dataclass(frozen=True)
class MirrorConfig:
    """A parsed ``mirror.properties``; :meth:`from_properties` builds it, the ``*_config``
    methods give each client's complete librdkafka configuration."""

    sources: tuple[SourceCluster, ...]
    target_alias: str
    target_bootstrap_servers: str
    group_id: str = "sluice-mirror"
    topics: tuple[re.Pattern[str], ...] = (re.compile(".*"),)
    topics_exclude: tuple[re.Pattern[str], ...] = ()
    refresh_topics_interval_ms: int = 10_000
    sync_topic_configs_enabled: bool = True
    sync_topic_configs_interval_s: int = 600
    config_properties: ConfigPropertyFilter = field(default_factory=ConfigPropertyFilter)
    batch_max_messages: int = 5000
    batch_max_wait_ms: int = 500
    commit_timeout_ms: int = 60_000
    exactly_once: bool = False
    target_replication_factor: int = -1
    metrics_host: str | None = None
    metrics_port: int | None = None
    consumer: dict[str, str] = field(default_factory=dict)  # consumer.<key>
    producer: dict[str, str] = field(default_factory=dict)  # producer.<key>
    target_client: dict[str, str] = field(default_factory=dict)  # target.<key>

    # -- parsing -----------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MirrorConfig:
        _required(props, "clusters")
        aliases = list(names(props, "clusters"))
        if not aliases:
            raise MirrorConfigError(f"clusters: expected a comma list, found {props['clusters']!r}")
        for alias in aliases:
            _alias(alias, "clusters")
            if alias in _RESERVED_ALIASES:
                raise MirrorConfigError(
                    f"clusters: expected aliases other than {sorted(_RESERVED_ALIASES)}, "
                    f"found {alias!r}"
                )
        if len(set(aliases)) != len(aliases):
            raise MirrorConfigError(f"clusters: expected distinct aliases, found {aliases}")
        target_alias = _alias(_required(props, "target.alias"), "target.alias")
        if target_alias in aliases:
            raise MirrorConfigError(
                f"target.alias: expected a name other than the source clusters {aliases}, "
                f"found {target_alias!r}"
            )

        client: dict[str, dict[str, str]] = {a: {} for a in aliases}
        source_consumer: dict[str, dict[str, str]] = {a: {} for a in aliases}
        consumer: dict[str, str] = {}
        producer: dict[str, str] = {}
        target_client: dict[str, str] = {}
        by_length = sorted(aliases, key=len, reverse=True)
        for key, value in props.items():
            if key in _TOP_LEVEL:
                continue
            if key.startswith("consumer."):
                consumer[cls._client_key(key, "consumer.", "consumer")] = value
                continue
            if key.startswith("producer."):
                producer[cls._client_key(key, "producer.", "producer")] = value
                continue
            if key.startswith("target."):
                target_client[cls._client_key(key, "target.", "target")] = value
                continue
            owner = next((a for a in by_length if key.startswith(a + ".")), None)
            if owner is None:
                head = key.split(".", 1)[0]
                guess = nearest(key, _TOP_LEVEL)
                hint = (
                    f"did you mean {guess!r}?"
                    if guess
                    else f"is {head!r} a cluster alias missing from clusters?"
                )
                raise MirrorConfigError(
                    f"{key}: expected a mirror key, consumer.*, producer.*, target.* or "
                    f"<alias>.* for an alias in clusters={','.join(aliases)}; found key "
                    f"{key!r} ({hint})"
                )
            rest = key[len(owner) + 1 :]
            if rest == "bootstrap.servers":
                continue
            if rest.startswith("consumer."):
                source_consumer[owner][cls._client_key(key, f"{owner}.consumer.", "consumer")] = (
                    value
                )
            else:
                client[owner][cls._client_key(key, f"{owner}.", "source")] = value

        sources = tuple(
            SourceCluster(
                alias=a,
                bootstrap_servers=required(
                    props, f"{a}.bootstrap.servers", error=MirrorConfigError
                ),
                client=client[a],
                consumer=source_consumer[a],
            )
            for a in aliases
        )
        metrics_host = metrics_port = None
        listener = text(props, "metrics.listener")
        if listener is not None:
            url = urlsplit(listener)
            try:
                port = url.port
            except ValueError:
                port = None
            if url.scheme != "http" or port is None:
                raise MirrorConfigError(
                    f"metrics.listener: expected http://host:port, found {listener!r}"
                )
            metrics_host, metrics_port = url.hostname or "127.0.0.1", port
        replication = integer(
            props, "target.replication.factor", -1, minimum=-1, error=MirrorConfigError
        )
        if replication == 0:
            raise MirrorConfigError(
                "target.replication.factor: expected -1 (the broker's default) or >= 1, found '0'"
            )
        config = cls(
            sources=sources,
            target_alias=target_alias,
            target_bootstrap_servers=required(
                props, "target.bootstrap.servers", error=MirrorConfigError
            ),
            group_id=text(props, "group.id") or "sluice-mirror",
            topics=_regexes(props, "topics", (re.compile(".*"),)),
            topics_exclude=_regexes(props, "topics.exclude", ()),
            refresh_topics_interval_ms=_refresh_interval_ms(props),
            sync_topic_configs_enabled=boolean(
                props, "sync.topic.configs.enabled", True, error=MirrorConfigError
            ),
            sync_topic_configs_interval_s=integer(
                props,
                "sync.topic.configs.interval.seconds",
                600,
                minimum=1,
                error=MirrorConfigError,
            ),
            config_properties=ConfigPropertyFilter(
                exclude=_regexes(
                    props,
                    "config.properties.exclude",
                    tuple(re.compile(p) for p in DEFAULT_EXCLUDE),
                ),
                use_defaults_from=_defaults_from(props),
            ),
            batch_max_messages=integer(
                props, "batch.max.messages", 5000, minimum=1, error=MirrorConfigError
            ),
            batch_max_wait_ms=integer(
                props, "batch.max.wait.ms", 500, minimum=0, error=MirrorConfigError
            ),
            commit_timeout_ms=integer(
                props, "commit.timeout.ms", 60_000, minimum=1, error=MirrorConfigError
            ),
            exactly_once=_exactly_once(props),
            target_replication_factor=replication,
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            consumer=consumer,
            producer=producer,
            target_client=target_client,
        )
        config._check_fixed_settings()
        return config

    @staticmethod
    def _client_key(key: str, prefix: str, role: str) -> str:
        name = key[len(prefix) :]
        if not name:
            raise MirrorConfigError(f"{key}: expected {prefix}<librdkafka key>, found no key")
        if name in _OWN_KEYS and not (role == "target" and name == "bootstrap.servers"):
            own = _OWN_KEYS[name] if role != "target" else "target.bootstrap.servers"
            raise MirrorConfigError(f"{key}: expected the mirror's own key {own}, found {key}")
        return name

    def _check_fixed_settings(self) -> None:
        consumer_layers = [("consumer.", self.consumer)] + [
            (f"{s.alias}.", s.client) for s in self.sources
        ]
        consumer_layers += [(f"{s.alias}.consumer.", s.consumer) for s in self.sources]
        for prefix, settings in consumer_layers:
            for key, only in _FIXED_CONSUMER.items():
                if key in settings:
                    _check_fixed(
                        prefix + key,
                        settings[key],
                        (only,),
                        "the mirror commits explicit offsets after the target acknowledged",
                    )
        for prefix, settings in (("producer.", self.producer), ("target.", self.target_client)):
            for key, allowed in _FIXED_PRODUCER.items():
                if key in settings:
                    _check_fixed(
                        prefix + key,
                        settings[key],
                        allowed,
                        "the target must acknowledge every record from all in-sync replicas",
                    )
            if self.exactly_once and "transactional.id" in settings:
                raise MirrorConfigError(
                    f"{prefix}transactional.id: expected it unset with exactly.once.enabled "
                    f"(the mirror derives it: {self.group_id}-<alias>), found "
                    f"{settings['transactional.id']!r}"
                )

    # -- questions the mirror asks -----------------------------------------------------------

    def source(self, alias: str) -> SourceCluster:
        for s in self.sources:
            if s.alias == alias:
                return s
        raise KeyError(alias)

    def mirrors_topic(self, name: str) -> bool:
        """Whether topic ``name`` is mirrored: some ``topics`` regex matches all of it, no
        ``topics.exclude`` regex does, and it does not start with ``__``."""
        if name.startswith("__"):
            return False
        if not any(p.fullmatch(name) for p in self.topics):
            return False
        return not any(p.fullmatch(name) for p in self.topics_exclude)

    def source_client_config(self, source: SourceCluster) -> dict[str, Any]:
        """Settings every client of ``source`` gets (the lag tool's consumer, for one)."""
        return {**source.client, "bootstrap.servers": source.bootstrap_servers}

    def consumer_config(self, source: SourceCluster) -> dict[str, Any]:
        """The group consumer of ``source``'s mirror loop."""
        return {
            "client.id": f"sluice-mirror-{source.alias}",
            **_CONSUMER_DEFAULTS,
            **source.client,
            **self.consumer,
            **source.consumer,
            **_FIXED_CONSUMER,
            "group.id": self.group_id,
            "bootstrap.servers": source.bootstrap_servers,
        }

    def producer_config(self, source: SourceCluster) -> dict[str, Any]:
        """The target producer of ``source``'s mirror loop (transactional with
        ``exactly_once``)."""
        config: dict[str, Any] = {
            "client.id": f"sluice-mirror-{source.alias}-to-{self.target_alias}",
            **_PRODUCER_DEFAULTS,
            **self.target_client,
            **self.producer,
            "acks": "all",
            "enable.idempotence": True,
            "bootstrap.servers": self.target_bootstrap_servers,
        }
        if self.exactly_once:
            config["transactional.id"] = self.transactional_id(source)
        return config

    def transactional_id(self, source: SourceCluster) -> str:
        """The ``transactional.id`` of ``source``'s loop in exactly-once mode: one per group and
        source cluster, the same after a restart (so the restarted loop fences the old one)."""
        return f"{self.group_id}-{source.alias}"

    def offsets_topic(self, source: SourceCluster) -> str:
        """The target topic holding ``source``'s mirrored positions in exactly-once mode
        (MirrorMaker 2's dedicated mode names its offsets topic so)."""
        return f"mm2-offsets.{source.alias}.internal"

    def offsets_reader_config(self) -> dict[str, Any]:
        """The target consumer that reads the offsets topic: committed records only, and an
        end-of-partition event at the last stable offset."""
        return {
            **self.target_client,
            "group.id": f"{self.group_id}-offsets-reader",  # assign() only: never joins
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "bootstrap.servers": self.target_bootstrap_servers,
        }

    def admin_config(self) -> dict[str, Any]:
        """The target admin client (topics, partitions and their configs)."""
        return {**self.target_client, "bootstrap.servers": self.target_bootstrap_servers}

    def source_admin_config(self, source: SourceCluster) -> dict[str, Any]:
        """The admin client of ``source``'s loop (reads its topic configs)."""
        return {
            "client.id": f"sluice-mirror-{source.alias}-admin",
            **self.source_client_config(source),
        }
