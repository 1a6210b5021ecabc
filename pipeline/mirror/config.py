"""``MirrorConfig``: the keys of ``conf/mirror.properties``, MirrorMaker 2's names where it has one.

The keys are declared once, in :data:`CONFIG_DEF`; the "mirror" section of
``docs/configuration.md`` is generated from it. Client settings pass through in families:
``<alias>.<librdkafka key>`` (every client of that source cluster), ``<alias>.consumer.<key>``
(its consumer only), ``consumer.<key>`` (every source consumer), ``target.<key>`` (every client
of the target cluster) and ``producer.<key>`` (the target producers).

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
what was found (every declared key parsed through ``CONFIG_DEF``). librdkafka keys are checked
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
from typing import Any
from urllib.parse import urlsplit

from sluice.common.config_def import REQUIRED, Check, ConfigDef, OneOf, Range, Type
from sluice.common.options import nearest, required, text
from sluice.pipeline.lineage import LineageError, check_cluster_alias
from sluice.pipeline.mirror.topic_configs import (
    DEFAULT_EXCLUDE,
    DEFAULTS_FROM,
    ConfigPropertyFilter,
)

__all__ = ["CONFIG_DEF", "MirrorConfig", "MirrorConfigError", "SourceCluster"]


class MirrorConfigError(ValueError):
    """A mirror configuration key is missing or malformed; the message names the key."""


def _check_regexes(patterns: tuple[str, ...]) -> str | None:
    for item in patterns:
        try:
            re.compile(item)
        except re.error as exc:
            return f"expected comma-separated regular expressions, found {item!r} ({exc})"
    return None


def _check_http(listener: str) -> str | None:
    url = urlsplit(listener)
    try:
        port = url.port
    except ValueError:
        port = None
    if url.scheme != "http" or port is None:
        return f"expected http://host:port, found {listener!r}"
    return None


def _check_replication(factor: int) -> str | None:
    if factor < -1:
        return f"expected an integer >= -1, found {factor}"
    if factor == 0:
        return "expected -1 (the broker's default) or >= 1, found '0'"
    return None


# MirrorMaker 2's exactly.once.source.support values (KIP-618) → whether the mirror is
# transactional. ``preparing`` is the rolling-upgrade step before ``enabled``: not yet.
_EXACTLY_ONCE_SUPPORT = {"enabled": True, "disabled": False, "preparing": False}
_REGEXES = Check("comma-separated regexes, full match", _check_regexes)

CONFIG_DEF = (
    ConfigDef(error=MirrorConfigError, what="mirror config")
    .define("clusters", Type.LIST, REQUIRED, doc="Source cluster aliases, comma-separated.")
    .define("target.alias", Type.STRING, REQUIRED, doc="The target (offline) cluster's name.")
    .define(
        "target.bootstrap.servers", Type.STRING, REQUIRED, doc="The target cluster's brokers."
    )
    .define(
        "target.replication.factor", Type.INT, -1,
        Check("-1 or [1,...]", _check_replication), doc="For created target topics; -1: the "
        "broker's default.",
    )
    .define(
        "group.id", Type.STRING, "sluice-mirror", doc="One group on every source cluster."
    )
    .define(
        "topics", Type.LIST, (".*",), _REGEXES, blank_is_default=False,
        doc="The mirrored topics: comma-separated regexes, full match (blank: none).",
    )
    .define(
        "topics.exclude", Type.LIST, (), _REGEXES, blank_is_default=False,
        doc="Topics never mirrored: comma-separated regexes, full match.",
    )
    .define(
        "refresh.topics.interval.seconds", Type.INT, None, Range.at_least(1), default_doc="10",
        doc="How often the topic list and the partition counts are re-read (MirrorMaker 2's "
        "key).",
    )
    .define(
        "refresh.topics.interval.ms", Type.INT, None, Range.at_least(1), default_doc="10000",
        doc="The same in ms (not with the key above).",
    )
    .define(
        "sync.topic.configs.enabled", Type.BOOLEAN, True,
        doc="Sync target topics' configs to the source's.",
    )
    .define(
        "sync.topic.configs.interval.seconds", Type.INT, 600, Range.at_least(1),
        doc="How often (IncrementalAlterConfigs).",
    )
    .define(
        "config.properties.exclude", Type.LIST, DEFAULT_EXCLUDE, _REGEXES,
        default_doc="(MirrorMaker 2's list)", blank_is_default=False,
        doc="Topic configs never copied: comma-separated regexes, full match (blank: none).",
    )
    .define(
        "use.defaults.from", Type.STRING, "target", OneOf(*DEFAULTS_FROM),
        doc="A config at its source default takes the target's default (target) or the "
        "source's.",
    )
    .define(
        "batch.max.messages", Type.INT, 5000, Range.at_least(1),
        doc="Records per consume → produce → commit cycle.",
    )
    .define(
        "batch.max.wait.ms", Type.INT, 500, Range.at_least(0),
        doc="How long one consume waits for records.",
    )
    .define(
        "commit.timeout.ms", Type.INT, 60_000, Range.at_least(1),
        doc="Retriable commit errors are retried this long.",
    )
    .define(
        "exactly.once.enabled", Type.BOOLEAN, False,
        doc="Transactional mode: each batch and its source offsets in one target transaction.",
    )
    .define(
        "exactly.once.source.support", Type.STRING, None, OneOf(*_EXACTLY_ONCE_SUPPORT),
        default_doc="disabled", doc="MirrorMaker 2's name for the key above (KIP-618).",
    )
    .define(
        "metrics.listener", Type.STRING, None, Check("http://host:port", _check_http),
        default_doc="(unset: off)", doc="Where Prometheus scrapes the mirror's metrics.",
    )
    .family("<alias>.bootstrap.servers", "(required) One per source alias.")
    .family("<alias>.<librdkafka key>", "Every client of that source cluster.")
    .family("<alias>.consumer.<librdkafka key>", "That source cluster's consumer only.")
    .family("consumer.<librdkafka key>", "Every source consumer.", prefix="consumer.")
    .family("target.<librdkafka key>", "Every client of the target cluster.", prefix="target.")
    .family("producer.<librdkafka key>", "The target producers.", prefix="producer.")
)  # fmt: skip


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


def _refresh_interval_ms(props: Mapping[str, str], values: Mapping[str, Any]) -> int:
    """``refresh.topics.interval.seconds`` (MirrorMaker 2's) or ``.ms``, never both."""
    seconds_key, ms_key = "refresh.topics.interval.seconds", "refresh.topics.interval.ms"
    seconds, ms = values[seconds_key], values[ms_key]
    if seconds is not None and ms is not None:
        raise MirrorConfigError(
            f"{seconds_key}: expected it or {ms_key}, not both; found {seconds_key}="
            f"{props[seconds_key]!r} and {ms_key}={props[ms_key]!r}"
        )
    return 1000 * seconds if seconds is not None else ms if ms is not None else 10_000


def _exactly_once(props: Mapping[str, str], values: Mapping[str, Any]) -> bool:
    """``exactly.once.enabled`` (Sluice's) or its alias ``exactly.once.source.support`` (MM2's);
    both may be given only when they agree."""
    key, alias = "exactly.once.enabled", "exactly.once.source.support"
    enabled: bool = values[key]
    support: str | None = values[alias]
    if support is None:
        return enabled
    aliased = _EXACTLY_ONCE_SUPPORT[support]
    if text(props, key) is not None and enabled != aliased:
        raise MirrorConfigError(
            f"{alias}: expected a value agreeing with {key}={props[key]!r} (its alias), "
            f"found {props[alias].strip()!r}"
        )
    return aliased


def _alias(value: str, key: str) -> str:
    try:
        return check_cluster_alias(value)
    except LineageError as exc:
        raise MirrorConfigError(f"{key}: {exc}") from None


def _check_fixed(key: str, value: str, allowed: tuple[str, ...], why: str) -> None:
    if value.strip().lower() not in allowed:
        raise MirrorConfigError(f"{key}: {why}; expected {allowed[0]} or unset, found {value!r}")


def _source_aliases(props: Mapping[str, str], values: Mapping[str, Any]) -> tuple[str, ...]:
    """``clusters``, checked, and checked against ``target.alias``."""
    aliases: tuple[str, ...] = values["clusters"]
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
        raise MirrorConfigError(f"clusters: expected distinct aliases, found {list(aliases)}")
    target_alias = _alias(values["target.alias"], "target.alias")
    if target_alias in aliases:
        raise MirrorConfigError(
            f"target.alias: expected a name other than the source clusters {list(aliases)}, "
            f"found {target_alias!r}"
        )
    return aliases


def _client_key(key: str, prefix: str, role: str) -> str:
    """The librdkafka key of ``key`` under ``prefix``; the mirror's own keys refused."""
    name = key[len(prefix) :]
    if not name:
        raise MirrorConfigError(f"{key}: expected {prefix}<librdkafka key>, found no key")
    if name in _OWN_KEYS and not (role == "target" and name == "bootstrap.servers"):
        own = _OWN_KEYS[name] if role != "target" else "target.bootstrap.servers"
        raise MirrorConfigError(f"{key}: expected the mirror's own key {own}, found {key}")
    return name


@dataclass
class _ClientLayers:
    """The librdkafka settings of every key that is not a mirror key, by layer."""

    client: dict[str, dict[str, str]]  # <alias>.<key>
    source_consumer: dict[str, dict[str, str]]  # <alias>.consumer.<key>
    consumer: dict[str, str] = field(default_factory=dict)  # consumer.<key>
    producer: dict[str, str] = field(default_factory=dict)  # producer.<key>
    target_client: dict[str, str] = field(default_factory=dict)  # target.<key>

    @classmethod
    def route(cls, props: Mapping[str, str], aliases: tuple[str, ...]) -> _ClientLayers:
        """Each key to its layer; a key of no layer is an error with a "did you mean"."""
        layers = cls({a: {} for a in aliases}, {a: {} for a in aliases})
        by_length = sorted(aliases, key=len, reverse=True)
        for key, value in props.items():
            if key in CONFIG_DEF.keys:
                continue
            for prefix, layer in (
                ("consumer.", layers.consumer),
                ("producer.", layers.producer),
                ("target.", layers.target_client),
            ):
                if key.startswith(prefix):
                    layer[_client_key(key, prefix, prefix[:-1])] = value
                    break
            else:
                owner = next((a for a in by_length if key.startswith(a + ".")), None)
                if owner is None:
                    raise MirrorConfigError(_no_owner(key, aliases))
                rest = key[len(owner) + 1 :]
                if rest == "bootstrap.servers":
                    continue
                if rest.startswith("consumer."):
                    consumer_key = _client_key(key, f"{owner}.consumer.", "consumer")
                    layers.source_consumer[owner][consumer_key] = value
                else:
                    layers.client[owner][_client_key(key, f"{owner}.", "source")] = value
        return layers

    def sources(
        self, props: Mapping[str, str], aliases: tuple[str, ...]
    ) -> tuple[SourceCluster, ...]:
        """The source clusters, each with its bootstrap servers and its layers."""
        return tuple(
            SourceCluster(
                alias=a,
                bootstrap_servers=required(
                    props, f"{a}.bootstrap.servers", error=MirrorConfigError
                ),
                client=self.client[a],
                consumer=self.source_consumer[a],
            )
            for a in aliases
        )


def _no_owner(key: str, aliases: tuple[str, ...]) -> str:
    """The error of a key that is no mirror key and under no alias."""
    head = key.split(".", 1)[0]
    guess = nearest(key, CONFIG_DEF.names())
    hint = (
        f"did you mean {guess!r}?"
        if guess
        else f"is {head!r} a cluster alias missing from clusters?"
    )
    return (
        f"{key}: expected a mirror key, consumer.*, producer.*, target.* or "
        f"<alias>.* for an alias in clusters={','.join(aliases)}; found key "
        f"{key!r} ({hint})"
    )


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
        """The config of ``props``; raises :class:`MirrorConfigError` naming the key."""
        values = CONFIG_DEF.parse(props)
        aliases = _source_aliases(props, values)
        layers = _ClientLayers.route(props, aliases)
        metrics = urlsplit(values["metrics.listener"] or "")
        config = cls(
            sources=layers.sources(props, aliases),
            target_alias=values["target.alias"],
            target_bootstrap_servers=values["target.bootstrap.servers"],
            group_id=values["group.id"],
            topics=tuple(re.compile(p) for p in values["topics"]),
            topics_exclude=tuple(re.compile(p) for p in values["topics.exclude"]),
            refresh_topics_interval_ms=_refresh_interval_ms(props, values),
            sync_topic_configs_enabled=values["sync.topic.configs.enabled"],
            sync_topic_configs_interval_s=values["sync.topic.configs.interval.seconds"],
            config_properties=ConfigPropertyFilter(
                exclude=tuple(re.compile(p) for p in values["config.properties.exclude"]),
                use_defaults_from=values["use.defaults.from"],
            ),
            batch_max_messages=values["batch.max.messages"],
            batch_max_wait_ms=values["batch.max.wait.ms"],
            commit_timeout_ms=values["commit.timeout.ms"],
            exactly_once=_exactly_once(props, values),
            target_replication_factor=values["target.replication.factor"],
            metrics_host=(metrics.hostname or "127.0.0.1") if metrics.scheme else None,
            metrics_port=metrics.port if metrics.scheme else None,
            consumer=layers.consumer,
            producer=layers.producer,
            target_client=layers.target_client,
        )
        config._check_fixed_settings()
        return config

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
