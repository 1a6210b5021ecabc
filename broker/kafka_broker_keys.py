"""The broker keys Kafka defines, as word lists: a key in them that Sluice does not act on is
accepted silently; any other key that is neither here nor declared (``sluice.broker.config``,
``sluice.broker.groups.group_coordinator_config``, ...) is logged as a warning naming it, as
Kafka logs unknown keys.

* :data:`KAFKA_BROKER_KEYS`: every broker key of Kafka 3.3's ``KafkaConfig``;
* :data:`KAFKA_4_GROUP_KEYS`: the keys Kafka 4 added for its group coordinator
  (``GroupCoordinatorConfig``, ``ShareGroupConfig``, ``ShareCoordinatorConfig``) that Sluice
  does not read — its threads, linger, offloaded assignors, streams groups, the share-group
  persister; the ``group.consumer.*`` and ``group.share.*`` keys Sluice does read are declared
  in ``group_coordinator_config``;
* :data:`OTHER_KEYS`: Kafka's ACL authorizer's keys, some of newer Kafka versions', and
  Sluice's own that are read outside a declaration.

Data only (immutable sets); imports nothing of Sluice.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KAFKA_4_GROUP_KEYS", "KAFKA_BROKER_KEYS", "OTHER_KEYS"]

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

#: Kafka 4's group coordinator keys that Sluice does not act on (its thread pools, write
#: linger, offloaded assignors and assignment intervals, streams groups, the share-group
#: persister and state topic).
KAFKA_4_GROUP_KEYS: Final = frozenset(
    """
    group.coordinator.rebalance.protocols group.coordinator.threads
    group.coordinator.background.threads group.coordinator.append.linger.ms
    group.coordinator.cached.buffer.max.bytes group.coordinator.new.enable
    group.consumer.assignment.interval.ms group.consumer.min.assignment.interval.ms
    group.consumer.max.assignment.interval.ms group.consumer.assignor.offload.enable
    group.consumer.regex.refresh.interval.ms
    group.share.enable group.share.assignors group.share.assignment.interval.ms
    group.share.min.assignment.interval.ms group.share.max.assignment.interval.ms
    group.share.assignor.offload.enable group.share.initialize.retry.interval.ms
    group.share.persister.class.name share.fetch.purgatory.purge.interval.requests
    group.streams.session.timeout.ms group.streams.min.session.timeout.ms
    group.streams.max.session.timeout.ms group.streams.heartbeat.interval.ms
    group.streams.min.heartbeat.interval.ms group.streams.max.heartbeat.interval.ms
    group.streams.max.size group.streams.num.standby.replicas
    group.streams.max.standby.replicas group.streams.initial.rebalance.delay.ms
    group.streams.assignment.interval.ms group.streams.min.assignment.interval.ms
    group.streams.max.assignment.interval.ms group.streams.assignor.offload.enable
    group.streams.task.offset.interval.ms group.streams.min.task.offset.interval.ms
    share.coordinator.state.topic.num.partitions share.coordinator.state.topic.replication.factor
    share.coordinator.state.topic.min.isr share.coordinator.state.topic.segment.bytes
    share.coordinator.snapshot.update.records.per.snapshot share.coordinator.threads
    share.coordinator.append.linger.ms share.coordinator.write.timeout.ms
    share.coordinator.load.buffer.size share.coordinator.state.topic.compression.codec
    """.split()  # noqa: SIM905  (a word list reads better than quoted strings)
)

#: Keys of Kafka's ACL authorizer, newer Kafka versions, and Sluice's own.
OTHER_KEYS: Final = frozenset(
    """
    super.users allow.everyone.if.no.acl.found log.local.retention.ms log.local.retention.bytes
    log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms
    log.read.flushed.only
    """.split()  # noqa: SIM905  (a word list reads better than 270 quoted strings)
)
