"""``BrokerConfig``: a broker's settings under Kafka's ``server.properties`` key names.

Only keys Sluice acts on are read; the rest of a Kafka file is ignored, so a real
``server.properties`` works as a starting point. Sluice's own keys are marked (Sluice).
Integers and booleans are parsed by ``sluice.common.options`` (a blank value takes the
default); a malformed value raises ``ConfigError`` naming the key.

=========================================  =========================  =====================
key                                        default                    meaning
=========================================  =========================  =====================
broker.id                                  0
listeners                                  PLAINTEXT://127.0.0.1:9092 where to listen
advertised.listeners                       = listeners                what Metadata reports
log.dirs (or log.dir)                      ./data/broker              comma-separated
num.partitions                             1                          for auto-created topics
default.replication.factor                 1
auto.create.topics.enable                  true
socket.request.max.bytes                   104857600                  largest request
zookeeper.connect                          (unset: standalone mode)
zookeeper.session.timeout.ms               18000
zookeeper.connection.timeout.ms            18000
offsets.commit.timeout.ms                  5000                       acks=all for commits
min.insync.replicas                        1
replica.lag.time.max.ms                    30000
unclean.leader.election.enable             false
offsets.topic.num.partitions               50                         ``__consumer_offsets``
group.initial.rebalance.delay.ms           3000
group.min.session.timeout.ms               6000
group.max.session.timeout.ms               1800000
log.flush.scheduler.interval.ms            1000                       flusher wake-up
log.retention.check.interval.ms            300000
log.flush.offset.checkpoint.interval.ms    60000
metrics.listener (Sluice)                  (unset: off)               http://host:port
log.*, message.max.bytes                   see ``sluice.broker.log.log_config``
=========================================  =========================  =====================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from sluice.broker.log.log_config import LogConfig
from sluice.common import options


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message names the key."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, key: str = "listeners") -> Listener:
        name, sep, rest = text.strip().partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ConfigError(f"{key}: expected NAME://host:port, found {text!r}")
        return cls(name, host or "0.0.0.0", int(port))


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    return options.integer(props, key, default, error=ConfigError)


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    return options.boolean(props, key, default, error=ConfigError)


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int = 0
    listener: Listener = Listener("PLAINTEXT", "127.0.0.1", 9092)
    advertised: Listener = Listener("PLAINTEXT", "127.0.0.1", 9092)
    log_dirs: tuple[str, ...] = ("./data/broker",)
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics: bool = True
    socket_request_max_bytes: int = 104_857_600
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    offsets_commit_timeout_ms: int = 5_000
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    unclean_leader_election: bool = False
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    flush_scheduler_interval_ms: int = 1_000
    retention_check_interval_ms: int = 300_000
    checkpoint_interval_ms: int = 60_000
    metrics_host: str | None = None
    metrics_port: int | None = None
    log: LogConfig = LogConfig()

    @property
    def standalone(self) -> bool:
        return not self.zookeeper_connect

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        listener = Listener.parse(
            props.get("listeners", "PLAINTEXT://127.0.0.1:9092").split(",")[0]
        )
        advertised = listener
        if props.get("advertised.listeners"):
            advertised = Listener.parse(
                props["advertised.listeners"].split(",")[0], "advertised.listeners"
            )
        if advertised.host in ("", "0.0.0.0"):
            advertised = Listener(advertised.name, "127.0.0.1", advertised.port)
        dirs = props.get("log.dirs") or props.get("log.dir") or "./data/broker"
        log_dirs = tuple(d.strip() for d in dirs.split(",") if d.strip())
        if not log_dirs:
            raise ConfigError(f"log.dirs: expected at least one directory, found {dirs!r}")
        metrics_host = metrics_port = None
        if props.get("metrics.listener"):
            url = urlsplit(props["metrics.listener"])
            if url.scheme != "http" or url.port is None:
                found = props["metrics.listener"]
                raise ConfigError(f"metrics.listener: expected http://host:port, found {found!r}")
            metrics_host, metrics_port = url.hostname or "127.0.0.1", url.port
        try:
            log = LogConfig.from_broker_properties(props)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        config = cls(
            broker_id=_int(props, "broker.id", 0),
            listener=listener,
            advertised=advertised,
            log_dirs=log_dirs,
            num_partitions=_int(props, "num.partitions", 1),
            default_replication_factor=_int(props, "default.replication.factor", 1),
            auto_create_topics=_bool(props, "auto.create.topics.enable", True),
            socket_request_max_bytes=_int(props, "socket.request.max.bytes", 104_857_600),
            zookeeper_connect=props.get("zookeeper.connect") or None,
            zookeeper_session_timeout_ms=_int(props, "zookeeper.session.timeout.ms", 18_000),
            zookeeper_connection_timeout_ms=_int(props, "zookeeper.connection.timeout.ms", 18_000),
            offsets_commit_timeout_ms=_int(props, "offsets.commit.timeout.ms", 5_000),
            min_insync_replicas=_int(props, "min.insync.replicas", 1),
            replica_lag_time_max_ms=_int(props, "replica.lag.time.max.ms", 30_000),
            unclean_leader_election=_bool(props, "unclean.leader.election.enable", False),
            offsets_topic_num_partitions=_int(props, "offsets.topic.num.partitions", 50),
            group_initial_rebalance_delay_ms=_int(props, "group.initial.rebalance.delay.ms", 3000),
            group_min_session_timeout_ms=_int(props, "group.min.session.timeout.ms", 6000),
            group_max_session_timeout_ms=_int(props, "group.max.session.timeout.ms", 1_800_000),
            flush_scheduler_interval_ms=_int(props, "log.flush.scheduler.interval.ms", 1000),
            retention_check_interval_ms=_int(props, "log.retention.check.interval.ms", 300_000),
            checkpoint_interval_ms=_int(props, "log.flush.offset.checkpoint.interval.ms", 60_000),
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            log=log,
        )
        if config.num_partitions < 1 or config.offsets_topic_num_partitions < 1:
            raise ConfigError("num.partitions and offsets.topic.num.partitions must be >= 1")
        return config
