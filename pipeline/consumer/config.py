"""``ConsumerConfig``: the ZooKeeper consumer's settings, under Kafka 0.8's key names.

The keys are declared once, in :data:`CONFIG_DEF` (Kafka 0.8's defaults, except where a key's
doc says otherwise); the "consumer" section of ``docs/configuration.md`` is generated from it.
``kafka.<key>`` keys pass, without the prefix, to the confluent-kafka ``Consumer`` handles.

Values may be strings (as read from a properties file); a blank value takes the default, as
everywhere in Sluice (``sluice.common.options``). An unknown key, a missing required key or a
bad value raises :class:`ConsumerConfigError` naming the key, what was expected and what was
found. ``ConsumerConfig`` is immutable, hence thread-safe.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.common.config_def import REQUIRED, ConfigDef, OneOf, Range, Type
from sluice.pipeline.consumer.assignors import get_assignor

__all__ = ["ConsumerConfig", "ConsumerConfigError"]


class ConsumerConfigError(ValueError):
    """A configuration key is unknown, missing or has a bad value."""


# auto.offset.reset: Kafka 0.8's names and the later ones, to librdkafka's.
_OFFSET_RESETS = {
    "smallest": "earliest",
    "earliest": "earliest",
    "largest": "latest",
    "latest": "latest",
}

CONFIG_DEF = (
    ConfigDef(error=ConsumerConfigError, what="consumer config")
    .define(
        "zookeeper.connect", Type.STRING, REQUIRED,
        doc="`host:port[,host:port]/chroot` of the ZooKeeper holding the group.",
    )
    .define("group.id", Type.STRING, REQUIRED, doc="The consumer group.")
    .define(
        "bootstrap.servers", Type.STRING, None, default_doc="(required)",
        doc="Where the fetcher connects (or Kafka 0.8's `metadata.broker.list`). Kafka 0.8 found "
        "its brokers in `/brokers/ids`, which a standalone Sluice broker does not write.",
    )
    .define(
        "metadata.broker.list", Type.STRING, None,
        doc="Kafka 0.8's name of `bootstrap.servers`, read when that is unset.",
    )
    .define(
        "consumer.id", Type.STRING, None, default_doc="`<group>_<host>-<ms>-<8 hex digits>`",
        doc="This consumer's id in the group's registry, as Kafka 0.8's.",
    )
    .define(
        "partition.assignment.strategy", Type.STRING, "range",
        doc="range, roundrobin, sticky or cooperative-sticky.",
    )
    .define("rebalance.max.retries", Type.INT, 4, Range.at_least(1), doc="Attempts to rebalance.")
    .define("rebalance.backoff.ms", Type.INT, 2000, doc="Wait between rebalance attempts.")
    .define("auto.commit.enable", Type.BOOLEAN, True, doc="Commit offsets to ZooKeeper.")
    .define("auto.commit.interval.ms", Type.INT, 60_000, doc="How often offsets are committed.")
    .define(
        "auto.offset.reset", Type.STRING, "largest",
        OneOf(*_OFFSET_RESETS, expected="smallest/largest (or earliest/latest)"),
        doc="Where a partition without a committed offset starts.",
    )
    .define(
        "consumer.timeout.ms", Type.INT, -1,
        doc="How long a stream's `next()` waits for a message; -1: for ever.",
    )
    .define("zookeeper.session.timeout.ms", Type.INT, 6000, doc="ZooKeeper session timeout.")
    .define("zookeeper.connection.timeout.ms", Type.INT, 6000, doc="ZooKeeper connect timeout.")
    .define(
        "queued.max.messages", Type.INT, 2000, Range.at_least(1),
        doc="Messages buffered per stream.",
    )
    .define("fetch.wait.max.ms", Type.INT, 100, doc="The fetcher's longest wait for data.")
    .define(
        "topic.metadata.refresh.interval.ms", Type.INT, 30_000,
        doc="How often standalone brokers' partition counts are polled.",
    )
    .family(
        "kafka.<key>", "Passed, without the prefix, to the confluent-kafka Consumer handles.",
        prefix="kafka.",
    )
)  # fmt: skip


def _default_consumer_id(group: str) -> str:
    # Kafka 0.8: groupId_hostname-timestampMs-first 8 characters of a random UUID.
    return f"{group}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ConsumerConfig:
    """The connector's settings (see the module docstring); build it with
    :meth:`from_properties`."""

    zookeeper_connect: str
    group_id: str
    bootstrap_servers: str
    consumer_id: str
    partition_assignment_strategy: str = "range"
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60_000
    auto_offset_reset: str = "largest"
    consumer_timeout_ms: int = -1
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    queued_max_messages: int = 2000
    fetch_wait_max_ms: int = 100
    topic_metadata_refresh_interval_ms: int = 30_000
    kafka: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ConsumerConfig:
        """Parse Kafka-style properties (values may be strings, as read from a file)."""
        options = {key: str(value) for key, value in props.items()}
        CONFIG_DEF.check_known(options)
        values = CONFIG_DEF.parse(options)
        servers = values["bootstrap.servers"] or values["metadata.broker.list"]
        if servers is None:
            raise ConsumerConfigError(
                "bootstrap.servers (or metadata.broker.list): expected a value, found none"
            )
        strategy = values["partition.assignment.strategy"].lower()
        get_assignor(strategy)  # raises UnknownAssignorError early
        return cls(
            zookeeper_connect=values["zookeeper.connect"],
            group_id=values["group.id"],
            bootstrap_servers=servers,
            consumer_id=values["consumer.id"] or _default_consumer_id(values["group.id"]),
            partition_assignment_strategy=strategy,
            rebalance_max_retries=values["rebalance.max.retries"],
            rebalance_backoff_ms=values["rebalance.backoff.ms"],
            auto_commit_enable=values["auto.commit.enable"],
            auto_commit_interval_ms=values["auto.commit.interval.ms"],
            auto_offset_reset=values["auto.offset.reset"],
            consumer_timeout_ms=values["consumer.timeout.ms"],
            zookeeper_session_timeout_ms=values["zookeeper.session.timeout.ms"],
            zookeeper_connection_timeout_ms=values["zookeeper.connection.timeout.ms"],
            queued_max_messages=values["queued.max.messages"],
            fetch_wait_max_ms=values["fetch.wait.max.ms"],
            topic_metadata_refresh_interval_ms=values["topic.metadata.refresh.interval.ms"],
            kafka={k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")},
        )

    @property
    def offset_reset(self) -> str:
        """``auto.offset.reset`` in librdkafka's words: ``"earliest"`` or ``"latest"``."""
        return _OFFSET_RESETS[self.auto_offset_reset]

    def kafka_settings(self, role: str, logger: logging.Logger) -> dict[str, Any]:
        """The settings of one of the connector's confluent-kafka ``Consumer`` handles."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            # Required by librdkafka, never used: we only assign(), and offsets live in ZooKeeper.
            "group.id": f"sluice-zk-{self.group_id}",
            "client.id": f"{self.consumer_id}-{role}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Used when a committed offset is out of range (retention deleted it).
            "auto.offset.reset": self.offset_reset,
            "fetch.wait.max.ms": self.fetch_wait_max_ms,
            "log.connection.close": False,
            "logger": logger,
            **self.kafka,
        }
