"""``BrokerConfig``: a broker's settings under Kafka's ``server.properties`` key names.

Only keys Sluice acts on are read; the rest of a Kafka file is ignored, so a real
``server.properties`` works as a starting point — but a key that is not a Kafka broker key
(``KAFKA_BROKER_KEYS``, Kafka 3.3's full list, and Sluice's own) is logged as a warning naming
it, as Kafka logs unknown keys: a typo does not go unnoticed. Sluice's own keys are marked
(Sluice).

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

Integers and booleans are parsed by ``sluice.common.options`` (a blank value takes the
default); a malformed value raises ``ConfigError`` naming the key.

=========================================  =========================  =====================
key                                        default                    meaning
=========================================  =========================  =====================
broker.id                                  0
listeners                                  PLAINTEXT://127.0.0.1:9092 NAME://host:port,...
listener.security.protocol.map             NAME:NAME for the 4 below  listener → protocol
advertised.listeners                       = listeners                what Metadata reports
inter.broker.listener.name /               (the PLAINTEXT listener,   replication's listener
security.inter.broker.protocol              else the first)
sasl.mechanism.inter.broker.protocol       GSSAPI (refused: set one)  inter-broker login
sasl.enabled.mechanisms                    GSSAPI (refused: set one)  per listener too
connections.max.reauth.ms                  0                          re-auth unsupported
sasl.server.max.receive.size               524288                     largest SASL token
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
controlled.shutdown.enable                 true                       leave before stopping
controlled.shutdown.max.retries            3                          attempts to leave
controlled.shutdown.retry.backoff.ms       5000                       each attempt's bound
connections.max.idle.ms                    600000                     idle/half-sent: closed
                                                                      (-1: never)
max.connections                            2147483647                 total, at accept
max.connections.per.ip                     2147483647                 per client address
max.connections.per.ip.overrides           (none)                     host:count,...
log.*, message.max.bytes                   see ``sluice.broker.log.log_config``
=========================================  =========================  =====================
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final
from urllib.parse import urlsplit

from sluice.broker.log.log_config import LogConfig
from sluice.broker.security.client import InterBrokerSecurity, inter_broker_security
from sluice.broker.security.errors import SecurityError
from sluice.broker.transactions.transaction_config import TransactionConfig, TransactionConfigError
from sluice.common import options
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

#: Every broker key of Kafka 3.3 (``KafkaConfig``), so that a real server.properties does not
#: warn for keys Sluice does not act on.
KAFKA_BROKER_KEYS: Final = frozenset(
    """
    advertised.listeners alter.config.policy.class.name
    alter.log.dirs.replication.quota.window.num
    alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name
    auto.create.topics.enable auto.leader.rebalance.enable background.threads
    broker.heartbeat.interval.ms broker.id broker.id.generation.enable broker.rack
    broker.session.timeout.ms client.quota.callback.class compression.type
    connection.failed.authentication.delay.ms connections.max.idle.ms connections.max.reauth.ms
    control.plane.listener.name controlled.shutdown.enable controlled.shutdown.max.retries
    controlled.shutdown.retry.backoff.ms controller.listener.names
    controller.quorum.append.linger.ms controller.quorum.election.backoff.max.ms
    controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
    controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms
    controller.quorum.voters controller.quota.window.num controller.quota.window.size.seconds
    controller.socket.timeout.ms create.topic.policy.class.name default.replication.factor
    delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
    delegation.token.master.key delegation.token.max.lifetime.ms delegation.token.secret.key
    delete.records.purgatory.purge.interval.requests delete.topic.enable early.start.listeners
    fetch.max.bytes fetch.purgatory.purge.interval.requests group.initial.rebalance.delay.ms
    group.max.session.timeout.ms group.max.size group.min.session.timeout.ms
    initial.broker.registration.timeout.ms inter.broker.listener.name
    inter.broker.protocol.version kafka.metrics.polling.interval.secs kafka.metrics.reporters
    leader.imbalance.check.interval.seconds leader.imbalance.per.broker.percentage
    listener.security.protocol.map listeners log.cleaner.backoff.ms
    log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms log.cleaner.enable
    log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
    log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
    log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
    log.cleanup.policy log.dir log.dirs log.flush.interval.messages log.flush.interval.ms
    log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
    log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes
    log.index.size.max.bytes log.message.downconversion.enable log.message.format.version
    log.message.timestamp.difference.max.ms log.message.timestamp.type log.preallocate
    log.retention.bytes log.retention.check.interval.ms log.retention.hours
    log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours
    log.roll.jitter.ms log.roll.ms log.segment.bytes log.segment.delete.delay.ms
    max.connection.creation.rate max.connections max.connections.per.ip
    max.connections.per.ip.overrides max.incremental.fetch.session.cache.slots message.max.bytes
    metadata.log.dir metadata.log.max.record.bytes.between.snapshots metadata.log.segment.bytes
    metadata.log.segment.min.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
    metadata.max.retention.bytes metadata.max.retention.ms metric.reporters metrics.num.samples
    metrics.recording.level metrics.sample.window.ms min.insync.replicas node.id num.io.threads
    num.network.threads num.partitions num.recovery.threads.per.data.dir
    num.replica.alter.log.dirs.threads num.replica.fetchers offset.metadata.max.bytes
    offsets.commit.required.acks offsets.commit.timeout.ms offsets.load.buffer.size
    offsets.retention.check.interval.ms offsets.retention.minutes
    offsets.topic.compression.codec offsets.topic.num.partitions
    offsets.topic.replication.factor offsets.topic.segment.bytes
    password.encoder.cipher.algorithm password.encoder.iterations password.encoder.key.length
    password.encoder.keyfactory.algorithm password.encoder.old.secret password.encoder.secret
    principal.builder.class process.roles producer.purgatory.purge.interval.requests
    queued.max.request.bytes queued.max.requests quota.window.num quota.window.size.seconds
    remote.log.index.file.cache.total.size.bytes remote.log.manager.task.interval.ms
    remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
    remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
    remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
    remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
    remote.log.reader.max.pending.tasks remote.log.reader.threads
    remote.log.storage.manager.class.name remote.log.storage.manager.class.path
    remote.log.storage.manager.impl.prefix remote.log.storage.system.enable
    replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
    replica.fetch.response.max.bytes replica.fetch.wait.max.ms
    replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
    replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
    replication.quota.window.size.seconds request.timeout.ms reserved.broker.max.id
    sasl.client.callback.handler.class sasl.enabled.mechanisms sasl.jaas.config
    sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
    sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name
    sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
    sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
    sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
    sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
    sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
    sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience
    sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.refresh.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class
    sasl.server.max.receive.size security.inter.broker.protocol security.providers
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
    socket.listen.backlog.size socket.receive.buffer.bytes socket.request.max.bytes
    socket.send.buffer.bytes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
    ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
    ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key
    ssl.keystore.location ssl.keystore.password ssl.keystore.type ssl.principal.mapping.rules
    ssl.protocol ssl.provider ssl.secure.random.implementation ssl.trustmanager.algorithm
    ssl.truststore.certificates ssl.truststore.location ssl.truststore.password
    ssl.truststore.type transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction.max.timeout.ms transaction.remove.expired.transaction.cleanup.interval.ms
    transaction.state.log.load.buffer.size transaction.state.log.min.isr
    transaction.state.log.num.partitions transaction.state.log.replication.factor
    transaction.state.log.segment.bytes transactional.id.expiration.ms
    unclean.leader.election.enable zookeeper.clientCnxnSocket zookeeper.connect
    zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
    zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites
    zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
    zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
    zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
    zookeeper.ssl.protocol zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password
    zookeeper.ssl.truststore.type
    """.split()  # noqa: SIM905  (a word list reads better than 270 quoted strings)
)
# Keys of Kafka's ACL authorizer, newer Kafka versions, and Sluice's own.
OTHER_KEYS: Final = frozenset(
    """
    super.users allow.everyone.if.no.acl.found log.local.retention.ms log.local.retention.bytes
    log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms
    log.read.flushed.only metrics.listener log.dir.failure.retry.ms
    """.split()  # noqa: SIM905  (a word list reads better than 270 quoted strings)
)


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message names the key."""


class UnservedListenerError(ConfigError):
    """A listener asks for a security protocol or SASL mechanism this broker does not serve."""


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
        if bare not in KAFKA_BROKER_KEYS and bare not in OTHER_KEYS:
            unknown.append(key)
    return sorted(unknown)


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    return options.integer(props, key, default, error=ConfigError)


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    return options.boolean(props, key, default, error=ConfigError)


def _at_least(props: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    value = _int(props, key, default)
    if value < minimum:
        raise ConfigError(f"{key}: expected at least {minimum}, found {value}")
    return value


def _idle_ms(props: Mapping[str, str]) -> int:
    """``connections.max.idle.ms``: -1 (or less) never closes an idle connection (Kafka)."""
    value = _int(props, "connections.max.idle.ms", 600_000)
    if value == 0:
        raise ConfigError("connections.max.idle.ms: expected -1 (never) or at least 1, found 0")
    return max(value, -1)


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
        except TransactionConfigError as exc:
            raise ConfigError(str(exc)) from None
        protocols = _protocol_map(props)
        listeners = _listeners(
            props, "listeners", props.get("listeners") or str(_DEFAULT_LISTENER), protocols
        )
        _check_served(props, listeners)
        inter_broker = _inter_broker_listener(props, listeners)
        listener = next(item for item in listeners if item.name == inter_broker)
        given: tuple[Listener, ...] = ()
        if props.get("advertised.listeners"):
            given = _listeners(
                props, "advertised.listeners", props["advertised.listeners"], protocols
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
        inter_broker_security = (
            _inter_broker_security(props, listener) if props.get("zookeeper.connect") else None
        )
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
            advertised_listeners=advertised_listeners,
            listeners=listeners,
            inter_broker_security=inter_broker_security,
            connections_max_reauth_ms=_int(props, "connections.max.reauth.ms", 0),
            sasl_server_max_receive_size=_int(props, "sasl.server.max.receive.size", 524_288),
            security_properties=MappingProxyType(
                {
                    key: value
                    for key, value in props.items()
                    if key.startswith(("ssl.", "sasl.", "listener.name."))
                    or key in _AUTHORIZER_KEYS
                }
            ),  # fmt: skip
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
            log_dir_failure_retry_ms=_int(props, "log.dir.failure.retry.ms", 5_000),
            controlled_shutdown_enable=_bool(props, "controlled.shutdown.enable", True),
            controlled_shutdown_max_retries=_at_least(
                props, "controlled.shutdown.max.retries", 3, 0
            ),
            controlled_shutdown_retry_backoff_ms=_at_least(
                props, "controlled.shutdown.retry.backoff.ms", 5_000, 0
            ),
            connections_max_idle_ms=_idle_ms(props),
            max_connections=_at_least(props, "max.connections", MAX_INT32, 0),
            max_connections_per_ip=_at_least(props, "max.connections.per.ip", MAX_INT32, 0),
            max_connections_per_ip_overrides=_per_ip_overrides(props),
            log=log,
            transactions=transactions,
        )
        if config.num_partitions < 1 or config.offsets_topic_num_partitions < 1:
            raise ConfigError("num.partitions and offsets.topic.num.partitions must be >= 1")
        if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip: expected at least 1 (0 only with "
                "max.connections.per.ip.overrides), found 0"
            )
        return config
