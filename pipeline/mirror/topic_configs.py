"""``ConfigPropertyFilter``: which topic configs the mirror copies, after MirrorMaker 2.

MirrorMaker 2's ``MirrorSourceConnector`` copies a source topic's configs to its target topic
twice over: when it creates the target topic (``createNewTopics``) and every
``sync.topic.configs.interval.seconds`` after (``syncTopicConfigs``, with
IncrementalAlterConfigs). Its ``DefaultConfigPropertyFilter`` decides which configs. This module
is that decision, on the ``ConfigEntry`` objects confluent-kafka's ``describe_configs`` returns:

* a config is **never copied** when it is read-only, sensitive (no value to copy), set by the
  source broker's properties file (``STATIC_BROKER_CONFIG``: a property of that broker, not of
  the topic) or excluded — some regex of ``config.properties.exclude`` matches its whole name.
  MirrorMaker 2's default list, :data:`DEFAULT_EXCLUDE`, keeps the settings that belong to a
  cluster rather than to the data: replication throttles, ``min.insync.replicas``, unclean
  leader election, and the timestamp type and skew (the target keeps its own clock rules);
* a config at its **default** on the source (``is_default``: source ``DEFAULT_CONFIG``) follows
  ``use.defaults.from``: ``target`` (the default) leaves the target topic at the target
  cluster's default — not set at creation, its override deleted by a sync —; ``source`` copies
  the source's default value like any other;
* every other config (a topic override, or a dynamic broker default of the source) is set on
  the target to the source's value.

:meth:`ConfigPropertyFilter.creation_configs` gives the configs of a new target topic
(MirrorMaker 2's ``targetConfig(config, incremental=false)``), :meth:`~ConfigPropertyFilter.
sync_operations` the IncrementalAlterConfigs operations that bring an existing target topic in
line (``targetConfig(config, incremental=true)``: SET, or DELETE for a default). Unlike
MirrorMaker 2, which sends every operation at every sync, ``sync_operations`` is given the
target's own configs and leaves out the operations that would change nothing — a SET of the
value the topic already overrides to, a DELETE of a config the topic does not override — so a
sync of topics already in line writes nothing (no ZooKeeper write, no change notification).
The end state is MirrorMaker 2's.

Immutable and pure: thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigSource,
)

__all__ = ["DEFAULT_EXCLUDE", "DEFAULTS_FROM", "ConfigPropertyFilter"]

# MirrorMaker 2's DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT, as written there.
DEFAULT_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
# use.defaults.from: whose defaults a config at its default takes on the target.
DEFAULTS_FROM = ("target", "source")


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """``config.properties.exclude`` (full-match regexes) and ``use.defaults.from``."""

    exclude: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in DEFAULT_EXCLUDE)
    use_defaults_from: str = "target"

    def __post_init__(self) -> None:
        if self.use_defaults_from not in DEFAULTS_FROM:
            raise ValueError(
                f"use_defaults_from: expected one of {DEFAULTS_FROM}, "
                f"found {self.use_defaults_from!r}"
            )

    def replicates(self, name: str) -> bool:
        """Whether config ``name`` is copied at all (no exclude regex matches all of it)."""
        return not any(p.fullmatch(name) for p in self.exclude)

    def replicates_source_default(self) -> bool:
        """Whether a config at its source default is copied (``use.defaults.from=source``)."""
        return self.use_defaults_from == "source"

    def _copyable(self, entry: Any) -> bool:
        return (
            not entry.is_read_only
            and not entry.is_sensitive
            and _source(entry) != ConfigSource.STATIC_BROKER_CONFIG
            and self.replicates(entry.name)
        )

    def creation_configs(self, source: Mapping[str, Any]) -> dict[str, str]:
        """The configs to create a target topic with, from the source topic's
        ``describe_configs`` result (name → ``ConfigEntry``)."""
        return {
            name: entry.value
            for name, entry in sorted(source.items())
            if self._copyable(entry)
            and entry.value is not None
            and (not entry.is_default or self.replicates_source_default())
        }

    def sync_operations(
        self, source: Mapping[str, Any], target: Mapping[str, Any]
    ) -> list[ConfigEntry]:
        """The IncrementalAlterConfigs operations (``ConfigEntry`` with
        ``incremental_operation``) that give the target topic the source topic's configs;
        ``source`` and ``target`` are the two topics' ``describe_configs`` results. Empty when
        the target is in line already."""
        ops = []
        for name, entry in sorted(source.items()):
            if not self._copyable(entry):
                continue
            current = target.get(name)
            # The target topic's own override of this config, if it has one.
            override = (
                current.value
                if current is not None and _source(current) == ConfigSource.DYNAMIC_TOPIC_CONFIG
                else None
            )
            overridden = override is not None
            if entry.is_default and not self.replicates_source_default():
                if overridden:  # back to the target cluster's default
                    ops.append(
                        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
                    )
                continue
            if entry.value is None or override == entry.value:
                continue
            ops.append(ConfigEntry(name, entry.value, incremental_operation=AlterConfigOpType.SET))
        return ops


def _source(entry: Any) -> Any:
    """``entry.source`` as a ``ConfigSource`` (confluent-kafka gives the enum or its int)."""
    try:
        return ConfigSource(entry.source)
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG
