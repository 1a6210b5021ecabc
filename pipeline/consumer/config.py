"""``ConsumerConfig``: the ZooKeeper consumer's settings, under Kafka 0.8's key names.

Keys, with their defaults (Kafka 0.8's, except where noted)::

    zookeeper.connect                   required; "host:port[,host:port]/chroot"
    group.id                            required
    bootstrap.servers                   required (or 0.8's metadata.broker.list): where the
                                        fetcher connects. Kafka 0.8 found its brokers in
                                        /brokers/ids, which a standalone Sluice broker does not
                                        write
    consumer.id                         <group>_<host>-<ms>-<8 hex digits>, as Kafka 0.8's
    partition.assignment.strategy       range (also roundrobin, sticky, cooperative-sticky)
    rebalance.max.retries               4 (>= 1)
    rebalance.backoff.ms                2000
    auto.commit.enable                  true
    auto.commit.interval.ms             60000
    auto.offset.reset                   largest (smallest/largest, or earliest/latest)
    consumer.timeout.ms                 -1 (a stream's next() blocks for ever)
    zookeeper.session.timeout.ms        6000
    zookeeper.connection.timeout.ms     6000
    queued.max.messages                 2000 (>= 1; per stream)
    fetch.wait.max.ms                   100
    topic.metadata.refresh.interval.ms  30000 (how often standalone brokers' partition counts
                                        are polled)
    kafka.<key>                         passed, without the prefix, to the confluent-kafka
                                        ``Consumer`` handles

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

from sluice.common.options import boolean, integer, text
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

# Integer keys: their default and their least legal value (None: any integer).
_INTS: dict[str, tuple[int, int | None]] = {
    "rebalance.max.retries": (4, 1),
    "rebalance.backoff.ms": (2000, None),
    "auto.commit.interval.ms": (60_000, None),
    "consumer.timeout.ms": (-1, None),
    "zookeeper.session.timeout.ms": (6000, None),
    "zookeeper.connection.timeout.ms": (6000, None),
    "queued.max.messages": (2000, 1),
    "fetch.wait.max.ms": (100, None),
    "topic.metadata.refresh.interval.ms": (30_000, None),
}

_KNOWN = {
    "zookeeper.connect",
    "group.id",
    "bootstrap.servers",
    "metadata.broker.list",
    "consumer.id",
    "partition.assignment.strategy",
    "auto.commit.enable",
    "auto.offset.reset",
    *_INTS,
}


def _required(options: Mapping[str, str], key: str, alias: str | None = None) -> str:
    value = text(options, key) or (text(options, alias) if alias else None)
    if value is None:
        named = f"{key} (or {alias})" if alias else key
        raise ConsumerConfigError(f"{named}: expected a value, found none")
    return value


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
        kafka: dict[str, str] = {}
        for key, value in options.items():
            if key.startswith("kafka."):
                kafka[key[len("kafka.") :]] = value
            elif key not in _KNOWN:
                raise ConsumerConfigError(f"unknown consumer config key {key!r}")
        zookeeper = _required(options, "zookeeper.connect")
        group = _required(options, "group.id")
        servers = _required(options, "bootstrap.servers", "metadata.broker.list")
        ints: dict[str, Any] = {
            key.replace(".", "_"): integer(
                options, key, default, minimum=minimum, error=ConsumerConfigError
            )
            for key, (default, minimum) in _INTS.items()
        }
        reset = (text(options, "auto.offset.reset") or "largest").lower()
        if reset not in _OFFSET_RESETS:
            raise ConsumerConfigError(
                "auto.offset.reset: expected smallest/largest (or earliest/latest), "
                f"found {reset!r}"
            )
        strategy = (text(options, "partition.assignment.strategy") or "range").lower()
        get_assignor(strategy)  # raises UnknownAssignorError early
        return cls(
            zookeeper_connect=zookeeper,
            group_id=group,
            bootstrap_servers=servers,
            consumer_id=text(options, "consumer.id") or _default_consumer_id(group),
            partition_assignment_strategy=strategy,
            auto_commit_enable=boolean(
                options, "auto.commit.enable", True, error=ConsumerConfigError
            ),
            auto_offset_reset=reset,
            kafka=kafka,
            **ints,
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
