"""``BrokerConfig``: a broker's settings under Kafka's ``server.properties`` key names.

Only keys Sluice acts on are read; the rest of a Kafka file is ignored, so a real
``server.properties`` works as a starting point — but a key that is not a Kafka broker key
(``sluice.broker.kafka_broker_keys``: Kafka 3.3's full list, Kafka 4's group coordinator keys)
nor Sluice's own is logged as a warning naming it, as Kafka logs unknown keys: a typo does not
go unnoticed. Sluice's own keys are marked
(Sluice) in their docs.

Listeners: ``listeners`` lists ``NAME://host:port`` entries; a name's security protocol is
its entry in ``listener.security.protocol.map`` (by default the four protocol names map to
themselves). Served: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``; any other
protocol, and a SASL listener whose ``sasl.enabled.mechanisms`` (with Kafka's per-listener
override ``listener.name.<l>.sasl.enabled.mechanisms``) holds a mechanism other than
``PLAIN``, ``SCRAM-SHA-256`` and ``SCRAM-SHA-512``, refuses to start. The ``ssl.*`` and JAAS
keys are read by ``sluice.broker.security`` when the listeners are set up; they stay in
``security_properties`` (kept out of ``repr``: they hold passwords).

Metadata answers a client with the brokers' endpoints of the listener it connected to
(Kafka's per-listener metadata): each broker registers every advertised listener;
``listener`` / ``advertised`` are the inter-broker one, which other brokers connect to.

Inter-broker security (cluster mode): replication fetchers and the transaction marker channel
connect to the other brokers' inter-broker listener as Kafka's inter-broker client does
(``sluice.broker.security.client``): on ``SSL`` / ``SASL_SSL`` trusting ``ssl.truststore.*``
(``listener.name.<l>.ssl.*`` first; required) and presenting the broker's own keystore when
asked; on ``SASL_*`` logging in with ``sasl.mechanism.inter.broker.protocol`` (Kafka's default
GSSAPI is refused: set PLAIN or SCRAM-SHA-256/512) as the ``username`` / ``password`` of
``listener.name.<l>.<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``). A missing or
broken piece refuses to start (``ConfigError`` naming the key): ``inter_broker_security``.
With SCRAM the inter-broker user's credential must be in ZooKeeper before the brokers start
(``/config/users/<user>``, as Kafka's ``kafka-configs --zookeeper`` writes it).
Shutdown (``sluice.broker.server.broker``): the controlled part — leaving the cluster so that
leadership moves away first — gets ``controlled.shutdown.max.retries`` attempts of at most
``controlled.shutdown.retry.backoff.ms`` each; after that the broker stops anyway.
Connection limits (``sluice.broker.server.connection_limits``): as Kafka, a connection beyond
``max.connections`` or its address's limit is closed as it is accepted, and one idle (or
stopped halfway through a request) for ``connections.max.idle.ms`` is closed. A
``max.connections.per.ip.overrides`` entry is ``host:count`` (a name is resolved at startup);
``max.connections.per.ip`` may be 0 only with overrides (Kafka's rule).

Every key Sluice reads here is declared once, in :data:`CONFIG_DEF` (name, type, default,
valid values, doc): the "broker" section of ``docs/configuration.md`` is generated from it, with
the transaction coordinator's keys (``sluice.broker.transactions.transaction_config``) and the
group coordinator's ``group.consumer.*`` / ``group.share.*`` keys
(``sluice.broker.groups.group_coordinator_config``) in sections of their own; the ``log.*``
keys and ``message.max.bytes`` are ``LogConfig``'s (``sluice.broker.log.log_config``). A blank
value takes the default; a malformed value raises ``ConfigError`` naming the key, what was
expected and what was found.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

from sluice.broker.groups import group_coordinator_config
from sluice.broker.groups.group_coordinator_config import (
    ConsumerGroupConfig,
    GroupConfigError,
    ShareGroupConfig,
)
from sluice.broker.kafka_broker_keys import KAFKA_4_GROUP_KEYS, KAFKA_BROKER_KEYS, OTHER_KEYS
from sluice.broker.log.log_config import LogConfig
from sluice.broker.security.client import InterBrokerSecurity, inter_broker_security
from sluice.broker.security.errors import SecurityError
from sluice.broker.transactions.transaction_config import TransactionConfig, TransactionConfigError
from sluice.common import options
from sluice.common.config_def import Check, ConfigDef, Range, Type
from sluice.common.jaas import JaasConfigError
from sluice.common.tls import TlsError, client_context

_log = logging.getLogger(__name__)

#: The security protocols a listener may use; all four are served.
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms served (GSSAPI and OAUTHBEARER are not).
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KAFKA_DEFAULT_SASL_MECHANISM: Final = "GSSAPI"
#: Kafka's "no limit" (``Int.MaxValue``) for the connection limits.
MAX_INT32: Final = 2_147_483_647


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message names the key."""


class UnservedListenerError(ConfigError):
    """A listener asks for a security protocol or SASL mechanism this broker does not serve."""


def _check_http(listener: str) -> str | None:
    url = urlsplit(listener)
    try:
        port = url.port
    except ValueError:
        port = None
    if url.scheme != "http" or port is None:
        return f"expected http://host:port, found {listener!r}"
    return None


def _check_idle_ms(value: int) -> str | None:
    return "expected -1 (never) or at least 1, found 0" if value == 0 else None


_AT_LEAST_0: Final = Range.at_least(0)
_AT_LEAST_1: Final = Range.at_least(1)

CONFIG_DEF: Final = (
    ConfigDef(error=ConfigError, what="broker configuration")
    .define("broker.id", Type.INT, 0, doc="This broker's id in the cluster.")
    .define(
        "listeners", Type.STRING, "PLAINTEXT://127.0.0.1:9092",
        doc="`NAME://host:port,...`; each name's security protocol is its entry in "
        "`listener.security.protocol.map`.",
    )
    .define(
        "listener.security.protocol.map", Type.STRING, None,
        default_doc="NAME:NAME for the four protocols",
        doc="`NAME:PROTOCOL,...`; served: " + ", ".join(SECURITY_PROTOCOLS) + ".",
    )
    .define(
        "advertised.listeners", Type.STRING, None, default_doc="= listeners",
        doc="What Metadata reports, by listener name.",
    )
    .define(
        "inter.broker.listener.name", Type.STRING, None,
        default_doc="the PLAINTEXT listener, else the first",
        doc="The listener other brokers connect to (not with `security.inter.broker.protocol`).",
    )
    .define(
        "security.inter.broker.protocol", Type.STRING, None,
        doc="The inter-broker listener, named by its protocol.",
    )
    .define(
        "sasl.mechanism.inter.broker.protocol", Type.STRING, KAFKA_DEFAULT_SASL_MECHANISM,
        default_doc="GSSAPI (refused: set one)",
        doc="The inter-broker login on a SASL listener: " + ", ".join(SASL_MECHANISMS) + ".",
    )
    .define(
        "sasl.enabled.mechanisms", Type.LIST, (KAFKA_DEFAULT_SASL_MECHANISM,),
        default_doc="GSSAPI (refused: set some)",
        doc="The mechanisms a SASL listener serves (per listener: "
        "`listener.name.<l>.sasl.enabled.mechanisms`).",
    )
    .define(
        "connections.max.reauth.ms", Type.INT, 0,
        doc="Re-authentication is not supported: 0.",
    )
    .define(
        "sasl.server.max.receive.size", Type.INT, 524_288, doc="The largest SASL token."
    )
    .define(
        "log.dirs", Type.STRING, None, default_doc="./data/broker",
        doc="The log directories, comma-separated.",
    )
    .define("log.dir", Type.STRING, None, doc="One log directory, when `log.dirs` is unset.")
    .define(
        "num.partitions", Type.INT, 1, _AT_LEAST_1, doc="Partitions of auto-created topics."
    )
    .define(
        "default.replication.factor", Type.INT, 1, doc="Replicas of auto-created topics."
    )
    .define(
        "auto.create.topics.enable", Type.BOOLEAN, True,
        doc="Create a topic a client asks for.",
    )
    .define(
        "socket.request.max.bytes", Type.INT, 104_857_600, doc="The largest request."
    )
    .define(
        "zookeeper.connect", Type.STRING, None, default_doc="(unset: standalone mode)",
        doc="`host:port[,host:port...][/chroot]` of the cluster's ZooKeeper.",
    )
    .define(
        "zookeeper.session.timeout.ms", Type.INT, 18_000, doc="ZooKeeper session timeout."
    )
    .define(
        "zookeeper.connection.timeout.ms", Type.INT, 18_000, doc="ZooKeeper connect timeout."
    )
    .define(
        "offsets.commit.timeout.ms", Type.INT, 5_000,
        doc="How long an offset commit waits for `acks=all`.",
    )
    .define(
        "min.insync.replicas", Type.INT, 1,
        doc="In-sync replicas an `acks=all` write needs (a topic may override it).",
    )
    .define(
        "replica.lag.time.max.ms", Type.INT, 30_000,
        doc="A follower not caught up for this long leaves the ISR.",
    )
    .define(
        "max.incremental.fetch.session.cache.slots", Type.INT, 1_000, _AT_LEAST_0,
        doc="Incremental fetch sessions (KIP-227) this broker keeps; 0 opens none.",
    )
    .define(
        "min.incremental.fetch.session.eviction.ms", Type.INT, 120_000, _AT_LEAST_0,
        doc="A fetch session unused for this long may be evicted when another is opened.",
    )
    .define(
        "unclean.leader.election.enable", Type.BOOLEAN, False,
        doc="Elect a replica outside the ISR when no in-sync one is left.",
    )
    .define(
        "offsets.topic.num.partitions", Type.INT, 50, _AT_LEAST_1,
        doc="Partitions of `__consumer_offsets`.",
    )
    .define(
        "group.initial.rebalance.delay.ms", Type.INT, 3_000,
        doc="How long a new group waits for more members.",
    )
    .define(
        "group.min.session.timeout.ms", Type.INT, 6_000,
        doc="The shortest session timeout a member may ask for.",
    )
    .define(
        "group.max.session.timeout.ms", Type.INT, 1_800_000,
        doc="The longest session timeout a member may ask for.",
    )
    .define(
        "log.flush.scheduler.interval.ms", Type.INT, 1_000, doc="The flusher's wake-up."
    )
    .define(
        "log.retention.check.interval.ms", Type.INT, 300_000,
        doc="How often retention deletes segments.",
    )
    .define(
        "log.flush.offset.checkpoint.interval.ms", Type.INT, 60_000,
        doc="How often the recovery points are checkpointed.",
    )
    .define(
        "metrics.listener", Type.STRING, None, Check("http://host:port", _check_http),
        default_doc="(unset: off)", doc="(Sluice) Where Prometheus scrapes the metrics.",
    )
    .define(
        "log.dir.failure.retry.ms", Type.INT, 5_000,
        doc="(Sluice) How often a log dir taken offline for lack of space is probed.",
    )
    .define(
        "controlled.shutdown.enable", Type.BOOLEAN, True,
        doc="Leave the cluster (leadership moved away) before stopping.",
    )
    .define(
        "controlled.shutdown.max.retries", Type.INT, 3, _AT_LEAST_0,
        doc="Attempts to leave.",
    )
    .define(
        "controlled.shutdown.retry.backoff.ms", Type.INT, 5_000, _AT_LEAST_0,
        doc="Each attempt's bound.",
    )
    .define(
        "connections.max.idle.ms", Type.INT, 600_000,
        Check("-1 (never) or [1,...]", _check_idle_ms),
        doc="A connection idle (or stopped halfway through a request) this long is closed.",
    )
    .define(
        "max.connections", Type.INT, MAX_INT32, _AT_LEAST_0,
        doc="Connections in all, checked as each is accepted.",
    )
    .define(
        "max.connections.per.ip", Type.INT, MAX_INT32, _AT_LEAST_0,
        doc="Connections per client address (0 only with overrides).",
    )
    .define(
        "max.connections.per.ip.overrides", Type.STRING, None,
        doc="`host:count,...` (a name is resolved at startup).",
    )
    .family(
        "ssl.<key>, sasl.<key>, listener.name.<l>.<key>",
        "Read by `sluice.broker.security` when the listeners are set up.",
    )
    .family(
        "authorizer.class.name, super.users, allow.everyone.if.no.acl.found",
        "Read by `sluice.broker.security.authorizer`.",
    )
    .family(
        "transaction.*, transactional.id.expiration.ms",
        "The transaction coordinator's: see the transactions section.",
    )
    .family("log.*, message.max.bytes", "The logs' defaults: `sluice.broker.log.log_config`.")
    .family(
        "group.consumer.*, group.share.*",
        "The group coordinator's (KIP-848 consumer groups, KIP-932 share groups): see the "
        "groups section.",
    )
)  # fmt: skip


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def parse(
        cls, text: str, key: str = "listeners", protocols: Mapping[str, str] | None = None
    ) -> Listener:
        """One ``NAME://host:port``; its protocol from ``protocols`` (the protocol map)."""
        name, sep, rest = text.strip().partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit() or not name:
            raise ConfigError(f"{key}: expected NAME://host:port, found {text!r}")
        protocols = _DEFAULT_PROTOCOL_MAP if protocols is None else protocols
        protocol = protocols.get(name.upper())
        if protocol is None:
            raise ConfigError(
                f"{key}: the listener name {name} has no security protocol in "
                f"listener.security.protocol.map (expected one of {', '.join(protocols)})"
            )
        return cls(name.upper(), host or "0.0.0.0", int(port), protocol)


_DEFAULT_PROTOCOL_MAP: Final = MappingProxyType({p: p for p in SECURITY_PROTOCOLS})


def _protocol_map(props: Mapping[str, str]) -> Mapping[str, str]:
    text = props.get("listener.security.protocol.map", "").strip()
    if not text:
        return _DEFAULT_PROTOCOL_MAP
    found: dict[str, str] = {}
    for entry in text.split(","):
        name, colon, protocol = entry.strip().partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise ConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL,..., found {entry!r}"
            )
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise UnservedListenerError(
                f"listener.security.protocol.map: {name.strip()} maps to {protocol}; expected "
                f"one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        found[name.strip().upper()] = protocol
    return MappingProxyType(found)


def _listeners(
    props: Mapping[str, str], key: str, text: str, protocols: Mapping[str, str]
) -> tuple[Listener, ...]:
    listeners = tuple(
        Listener.parse(item, key, protocols) for item in text.split(",") if item.strip()
    )
    if not listeners:
        raise ConfigError(f"{key}: expected at least one NAME://host:port, found {text!r}")
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: expected each listener name once, found {', '.join(names)}")
    return listeners


def sasl_mechanisms(props: Mapping[str, str], listener: str) -> tuple[str, ...]:
    """``listener.name.<l>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``, else
    Kafka's default (GSSAPI)."""
    for key in (f"listener.name.{listener.lower()}.sasl.enabled.mechanisms",
                "sasl.enabled.mechanisms"):  # fmt: skip
        value = options.names(props, key)
        if value:
            return tuple(m.upper() for m in value)
    return (KAFKA_DEFAULT_SASL_MECHANISM,)


def _check_served(props: Mapping[str, str], listeners: tuple[Listener, ...]) -> None:
    for listener in listeners:
        if not listener.uses_sasl:
            continue
        mechanisms = sasl_mechanisms(props, listener.name)
        unserved = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if unserved:
            default = "" if "sasl.enabled.mechanisms" in props else " (Kafka's default)"
            raise UnservedListenerError(
                f"listener {listener}: SASL mechanism {', '.join(unserved)}{default} is not "
                f"served; set sasl.enabled.mechanisms to some of {', '.join(SASL_MECHANISMS)}"
            )


def _reachable(listener: Listener) -> Listener:
    """A listener bound to every address (``0.0.0.0`` or no host) is advertised as 127.0.0.1."""
    if listener.host in ("", "0.0.0.0"):
        return Listener(listener.name, "127.0.0.1", listener.port, listener.security_protocol)
    return listener


# Read by sluice.broker.security.authorizer, kept with the security keys.
_AUTHORIZER_KEYS = frozenset(
    {"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"}
)


def _inter_broker_listener(props: Mapping[str, str], listeners: tuple[Listener, ...]) -> str:
    name = options.text(props, "inter.broker.listener.name")
    protocol = options.text(props, "security.inter.broker.protocol")
    if name and protocol:
        raise ConfigError(
            "set inter.broker.listener.name or security.inter.broker.protocol, not both"
        )
    names = [listener.name for listener in listeners]
    key = "inter.broker.listener.name" if name else "security.inter.broker.protocol"
    wanted = (name or protocol or "").upper()
    if not wanted:
        # Kafka requires a listener named PLAINTEXT here; Sluice takes the first otherwise.
        return "PLAINTEXT" if "PLAINTEXT" in names else names[0]
    if wanted not in names:
        raise ConfigError(
            f"{key}={wanted}: expected the name of a listener in listeners, found "
            f"{', '.join(names)}"
        )
    return wanted


def _inter_broker_security(props: Mapping[str, str], listener: Listener) -> InterBrokerSecurity:
    """The inter-broker listener's client settings, its TLS keys loaded once to prove they
    work (``sluice.broker.security.client``); ``ConfigError`` naming the key otherwise."""
    mechanisms = sasl_mechanisms(props, listener.name) if listener.uses_sasl else ()
    try:
        security = inter_broker_security(
            props, listener.name, listener.security_protocol, mechanisms
        )
        if security.tls_properties is not None:
            client_context(security.tls_properties)
    except (SecurityError, JaasConfigError, TlsError) as exc:
        raise ConfigError(f"inter-broker security: {exc}") from None
    return security


_KNOWN_KEYS: Final = (
    KAFKA_BROKER_KEYS,
    KAFKA_4_GROUP_KEYS,
    OTHER_KEYS,
    CONFIG_DEF.keys,
    group_coordinator_config.CONFIG_DEF.keys,
)


def unknown_keys(props: Mapping[str, str]) -> list[str]:
    """The keys of ``props`` that are no Kafka broker key (nor Sluice's own), sorted."""
    unknown = []
    for key in props:
        bare = key
        if key.startswith("listener.name."):
            # listener.name.<l>.<key> and listener.name.<l>.<mechanism>.sasl.<key>
            parts = key.split(".", 3)
            bare = parts[3] if len(parts) == 4 else ""
            head, _, rest = bare.partition(".")
            if head.upper() in SASL_MECHANISMS + ("GSSAPI", "OAUTHBEARER") and rest:
                bare = rest
        if not any(bare in known for known in _KNOWN_KEYS):
            unknown.append(key)
    return sorted(unknown)


def _per_ip_overrides(props: Mapping[str, str]) -> Mapping[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...`` (an IPv6 address keeps its
    colons: the count is after the last one)."""
    text = props.get("max.connections.per.ip.overrides", "")
    found: dict[str, int] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        host, colon, count = entry.strip().rpartition(":")
        if not colon or not host.strip() or not count.strip().isdigit():
            raise ConfigError(
                "max.connections.per.ip.overrides: expected host:count,..., with a count of 0 "
                f"or more, found {entry.strip()!r}"
            )
        found[host.strip().strip("[]")] = int(count)
    return MappingProxyType(found)


_DEFAULT_LISTENER: Final = Listener("PLAINTEXT", "127.0.0.1", 9092)


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int = 0
    #: the inter-broker listener (the one registered and advertised) and its advertised form
    listener: Listener = _DEFAULT_LISTENER
    advertised: Listener = _DEFAULT_LISTENER
    #: every listener, in the order of ``listeners``
    listeners: tuple[Listener, ...] = (_DEFAULT_LISTENER,)
    #: every listener as clients are told of it (``advertised.listeners`` by name, else the
    #: listener itself), in the order of ``listeners``: Metadata answers a client with the
    #: endpoints of the listener it connected to
    advertised_listeners: tuple[Listener, ...] = (_DEFAULT_LISTENER,)
    #: how this broker reaches the others (cluster mode; ``None`` standalone): the inter-broker
    #: listener's TLS keys and SASL login, checked at start (secrets: not in repr)
    inter_broker_security: InterBrokerSecurity | None = field(
        default=None, repr=False, compare=False
    )
    connections_max_reauth_ms: int = 0
    sasl_server_max_receive_size: int = 524_288
    #: the ``ssl.*``, ``sasl.*`` and ``listener.name.*`` keys and the authorizer's keys
    #: (``authorizer.class.name``, ``super.users``, ``allow.everyone.if.no.acl.found``) as
    #: given (secrets: not in repr); ``sluice.broker.security`` reads them
    security_properties: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
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
    fetch_session_cache_slots: int = 1_000
    fetch_session_eviction_ms: int = 120_000
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
    # Sluice's own: how often a log dir taken offline for lack of space is probed (Kafka
    # needs a restart; see broker/log/log_dir_failure_channel.py).
    log_dir_failure_retry_ms: int = 5_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    connections_max_idle_ms: int = 600_000
    max_connections: int = MAX_INT32
    max_connections_per_ip: int = MAX_INT32
    #: ``max.connections.per.ip.overrides``: host (name or address, as given) → limit
    max_connections_per_ip_overrides: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({})
    )
    log: LogConfig = LogConfig()
    transactions: TransactionConfig = TransactionConfig()
    #: the ``group.consumer.*`` keys (KIP-848's groups) and the ``group.share.*`` keys
    #: (KIP-932's share groups)
    consumer_groups: ConsumerGroupConfig = ConsumerGroupConfig()
    share_groups: ShareGroupConfig = ShareGroupConfig()

    @property
    def standalone(self) -> bool:
        return not self.zookeeper_connect

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """The config of ``props``; logs one warning per unknown key. Raises ``ConfigError``
        (``UnservedListenerError`` for a protocol or mechanism not served)."""
        for key in unknown_keys(props):
            _log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        try:
            transactions = TransactionConfig.from_properties(props)
            consumer_groups = ConsumerGroupConfig.from_properties(props)
            share_groups = ShareGroupConfig.from_properties(props)
        except (TransactionConfigError, GroupConfigError) as exc:
            raise ConfigError(str(exc)) from None
        values = CONFIG_DEF.parse(props)
        endpoints = _Endpoints.of(props, values)
        metrics = urlsplit(values["metrics.listener"] or "")
        try:
            log = LogConfig.from_broker_properties(props)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        config = cls(
            **_plain_settings(values),
            listener=endpoints.listener,
            advertised=endpoints.advertised,
            advertised_listeners=endpoints.advertised_listeners,
            listeners=endpoints.listeners,
            inter_broker_security=(
                _inter_broker_security(props, endpoints.listener)
                if values["zookeeper.connect"]
                else None
            ),
            security_properties=_security_properties(props),
            log_dirs=_log_dirs(values),
            metrics_host=(metrics.hostname or "127.0.0.1") if metrics.scheme else None,
            metrics_port=metrics.port if metrics.scheme else None,
            max_connections_per_ip_overrides=_per_ip_overrides(props),
            log=log,
            transactions=transactions,
            consumer_groups=consumer_groups,
            share_groups=share_groups,
        )
        if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip: expected at least 1 (0 only with "
                "max.connections.per.ip.overrides), found 0"
            )
        return config


def _plain_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``BrokerConfig`` fields that are one declared key's value as parsed."""
    return {
        "broker_id": values["broker.id"],
        "connections_max_reauth_ms": values["connections.max.reauth.ms"],
        "sasl_server_max_receive_size": values["sasl.server.max.receive.size"],
        "num_partitions": values["num.partitions"],
        "default_replication_factor": values["default.replication.factor"],
        "auto_create_topics": values["auto.create.topics.enable"],
        "socket_request_max_bytes": values["socket.request.max.bytes"],
        "zookeeper_connect": values["zookeeper.connect"],
        "zookeeper_session_timeout_ms": values["zookeeper.session.timeout.ms"],
        "zookeeper_connection_timeout_ms": values["zookeeper.connection.timeout.ms"],
        "offsets_commit_timeout_ms": values["offsets.commit.timeout.ms"],
        "min_insync_replicas": values["min.insync.replicas"],
        "replica_lag_time_max_ms": values["replica.lag.time.max.ms"],
        "fetch_session_cache_slots": values["max.incremental.fetch.session.cache.slots"],
        "fetch_session_eviction_ms": values["min.incremental.fetch.session.eviction.ms"],
        "unclean_leader_election": values["unclean.leader.election.enable"],
        "offsets_topic_num_partitions": values["offsets.topic.num.partitions"],
        "group_initial_rebalance_delay_ms": values["group.initial.rebalance.delay.ms"],
        "group_min_session_timeout_ms": values["group.min.session.timeout.ms"],
        "group_max_session_timeout_ms": values["group.max.session.timeout.ms"],
        "flush_scheduler_interval_ms": values["log.flush.scheduler.interval.ms"],
        "retention_check_interval_ms": values["log.retention.check.interval.ms"],
        "checkpoint_interval_ms": values["log.flush.offset.checkpoint.interval.ms"],
        "log_dir_failure_retry_ms": values["log.dir.failure.retry.ms"],
        "controlled_shutdown_enable": values["controlled.shutdown.enable"],
        "controlled_shutdown_max_retries": values["controlled.shutdown.max.retries"],
        "controlled_shutdown_retry_backoff_ms": values["controlled.shutdown.retry.backoff.ms"],
        # -1 (or less) never closes an idle connection (Kafka)
        "connections_max_idle_ms": max(values["connections.max.idle.ms"], -1),
        "max_connections": values["max.connections"],
        "max_connections_per_ip": values["max.connections.per.ip"],
    }


@dataclass(frozen=True)
class _Endpoints:
    """The listeners, the inter-broker one, and each as clients are told of it."""

    listeners: tuple[Listener, ...]
    listener: Listener
    advertised_listeners: tuple[Listener, ...]
    advertised: Listener

    @classmethod
    def of(cls, props: Mapping[str, str], values: Mapping[str, Any]) -> _Endpoints:
        protocols = _protocol_map(props)
        listeners = _listeners(props, "listeners", values["listeners"], protocols)
        _check_served(props, listeners)
        inter_broker = _inter_broker_listener(props, listeners)
        listener = next(item for item in listeners if item.name == inter_broker)
        given: tuple[Listener, ...] = ()
        if values["advertised.listeners"]:
            given = _listeners(
                props, "advertised.listeners", values["advertised.listeners"], protocols
            )
            names = {item.name for item in listeners}
            strays = [str(item) for item in given if item.name not in names]
            if strays:
                raise ConfigError(
                    f"advertised.listeners: expected names from listeners, found {strays}"
                )
        # Every listener as clients are told of it: its advertised.listeners entry, else itself.
        by_name = {item.name: item for item in given}
        advertised_listeners = tuple(_reachable(by_name.get(item.name, item)) for item in listeners)
        advertised = next(item for item in advertised_listeners if item.name == inter_broker)
        return cls(listeners, listener, advertised_listeners, advertised)


def _security_properties(props: Mapping[str, str]) -> Mapping[str, str]:
    """The ``ssl.*``, ``sasl.*``, ``listener.name.*`` and authorizer keys, as given."""
    return MappingProxyType(
        {
            key: value
            for key, value in props.items()
            if key.startswith(("ssl.", "sasl.", "listener.name.")) or key in _AUTHORIZER_KEYS
        }
    )


def _log_dirs(values: Mapping[str, Any]) -> tuple[str, ...]:
    dirs = values["log.dirs"] or values["log.dir"] or "./data/broker"
    log_dirs = tuple(d.strip() for d in dirs.split(",") if d.strip())
    if not log_dirs:
        raise ConfigError(f"log.dirs: expected at least one directory, found {dirs!r}")
    return log_dirs
