"""The mirror: consumers in the offline datacenter pull from the live clusters (paper §4).

Like Kafka's MirrorMaker, on confluent-kafka. ``sluice mirror --config conf/mirror.properties``
runs one :class:`Mirror` per process; it runs one :class:`ClusterMirror` loop per source cluster,
each on its own thread with its own consumer, target producer and target admin client (nothing
is shared between loops but the metrics, so one slow cluster never holds up another). Every
process of a deployment uses the same ``group.id`` on every source cluster: the clusters' group
coordinators share the partitions among the processes, and a process that stops or dies hands
its partitions over through an ordinary rebalance.

One loop, one batch at a time::

    consume ≤ batch.max.messages records (waiting ≤ batch.max.wait.ms)
      → produce each to the target: same topic, key, value, timestamp and headers, the lineage
        header added; the same partition when source and target partition counts are equal,
        else librdkafka's murmur2_random (Java Kafka's key hash)
      → wait for every delivery report (acks=all, idempotent producer)
      → all acknowledged: commit each partition's next offset, synchronously, explicitly
      → consume again

**Invariant: a source offset is committed only after the target acknowledged (acks=all) every
record before it.** Consumers run with ``enable.auto.commit=false`` and
``enable.auto.offset.store=false``; the only commits are the explicit ones above, made after
``flush()`` returned with no record left and no delivery error. A delivery error (the target
refused a record, or did not acknowledge it within librdkafka's ``message.timeout.ms``) is
never committed past: the loop raises :class:`DeliveryError` *without committing*, the process
stops every loop, closes the consumers (leaving the groups) and exits 1; whoever owns the
partitions next — a restart, another process — mirrors the batch again from the last commit.

Rebalance callbacks run inside ``consume()``, which the loop calls only when nothing is in
flight (the previous batch is acknowledged and committed, or the loop is failing): a revoked
partition never has a produced-but-uncommitted record. Records ``consume()`` returns for a
partition revoked during that same call are dropped unproduced (the next owner reads them).

**Duplicates.** Delivery is at-least-once. A record is mirrored twice only if its batch was
acknowledged by the target but its commit did not happen:

* a mirror process killed (``kill -9``, a crash, a failed loop) loses at most the batch each
  of its loops had in flight: **≤ batch.max.messages × (number of source clusters)** duplicates
  per death (one batch per source-cluster loop);
* a commit refused because the group was rebalancing at that moment (counted in
  ``sluice_mirror_commits_refused_total``) duplicates that one batch's records of the moved
  partitions;
* the idempotent producer adds none: librdkafka's internal retries are de-duplicated by the
  target broker.

Count them downstream with the lineage header (``sluice.pipeline.lineage``): every copy carries
``sluice-lineage: <source cluster>/<topic>/<partition>/<offset>`` of the record's first
position, kept unchanged when the source record already had one.

**Exactly-once** (``exactly.once.enabled=true``, or MirrorMaker 2's
``exactly.once.source.support=enabled``; KIP-618). Each batch is one transaction of the loop's
target producer (``transactional.id=<group.id>-<alias>``): the records *and* the source offsets
they reach, stored in the target topic ``mm2-offsets.<alias>.internal``, commit together or
not at all. At start the loop fences the previous incarnation of its id, reads the committed
positions from the target (read_committed) and starts each assigned partition there; the
source group's commits, made after each transaction, are only informational (``sluice mirror
lag``, the lag metric). A killed mirror then leaves **no duplicate** for read_committed readers
(its open transaction is aborted when it restarts, or after ``transaction.timeout.ms``), and a
delivery error aborts the batch's transaction before the loop stops. One process per source
cluster in this mode: a second one fences the first. The protocol and the storage layout:
:mod:`sluice.pipeline.mirror.offset_store`; the producer's errors:
:mod:`sluice.pipeline.mirror.target_transaction`.

**Stopping.** :meth:`Mirror.stop` (SIGTERM/SIGINT in the CLI) lets each loop finish the batch
in flight — produce, wait, commit — then close its consumer (leaving the group, so the
partitions move at once) and producer; the process exits 0.

**Topics**, as MirrorMaker 2 keeps them (:mod:`sluice.pipeline.mirror.target_topics`). Every
``refresh.topics.interval.*`` each loop lists its source cluster's topics with their partition
counts, keeps those ``MirrorConfig.mirrors_topic`` accepts, creates the missing ones on the
target with the source's partition count and configs, grows a target topic that has fewer
partitions than its source (CreatePartitions), and resubscribes when the list changed. Every
``sync.topic.configs.interval.seconds`` it brings the mirrored topics' target configs in line
with the source's (IncrementalAlterConfigs; ``config.properties.exclude`` and
``use.defaults.from`` as in MirrorMaker 2). Not done: target topics are never deleted, and
ACLs are not copied.

**Partitions added at the source.** The refresh's topic listing is a full Metadata request of
the loop's own consumer: librdkafka compares the subscribed topics' partition counts in it with
the ones it last saw and, when a count changed, rejoins the group, so the new partitions are
assigned (and read from their earliest offset) without waiting for the consumer's own
``topic.metadata.refresh.interval.ms``. The target is grown first, in the same refresh, before
the loop consumes again. Another process of the group may have started the rebalance before
this one's refresh: a batch with a partition beyond the source count this loop knows refreshes
first (growing the target), so the same-partition mapping holds for the new partitions too.
Only a target that could not be grown (logged at every refresh) gets them key-hashed.

Lag, records and bytes go to :class:`sluice.pipeline.mirror.metrics.MirrorMetrics`;
:func:`mirror_lag` answers ``sluice mirror lag`` from the group's committed offsets.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from sluice.pipeline.lineage import LINEAGE_HEADER, LineageError, origin
from sluice.pipeline.mirror.config import MirrorConfig, SourceCluster
from sluice.pipeline.mirror.errors import (
    CommitError,
    DeliveryError,
    MirrorError,
    MirrorFencedError,
    MirrorOffsetsError,
    TopicConfigSyncError,
    TopicSetupError,
    error_of,
    is_retriable,
    kafka_codes,
)
from sluice.pipeline.mirror.metrics import MirrorMetrics
from sluice.pipeline.mirror.offset_store import MirrorOffsetStore
from sluice.pipeline.mirror.target_topics import TargetTopics
from sluice.pipeline.mirror.target_transaction import TargetTransactions

__all__ = [
    "ClusterMirror",
    "CommitError",
    "DeliveryError",
    "Mirror",
    "MirrorError",
    "MirrorFencedError",
    "MirrorOffsetsError",
    "PartitionLag",
    "TopicConfigSyncError",
    "TopicSetupError",
    "format_lag",
    "mirror_lag",
]

log = logging.getLogger("sluice.mirror")

LAG_INTERVAL_S = 1.0
PROGRESS_INTERVAL_S = 30.0
METADATA_TIMEOUT_S = 10.0


# The group moved on while the batch was being mirrored: the commit cannot be made, and the
# partitions' next owner mirrors the batch again (duplicates, never loss).
_REFUSED_BY_REBALANCE = kafka_codes(
    "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "_ASSIGNMENT_LOST"
)
_UNKNOWN_PARTITION = KafkaError._UNKNOWN_PARTITION


@dataclass
class _Batch:
    """Delivery reports of one batch, written by the producer's callbacks (on this thread,
    inside ``flush()``)."""

    source: str
    pending: int = 0
    errors: list[str] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)  # topic → acknowledged records
    sizes: dict[str, int] = field(default_factory=dict)  # topic → their key + value bytes

    def on_delivery(self, err: Any, msg: Any, where: str) -> None:
        # ``where`` is the source position: librdkafka hands no headers back in reports.
        self.pending -= 1
        if err is not None:
            self.errors.append(f"{where}: {err}" if len(self.errors) < 5 else "")
            return
        topic = msg.topic()
        self.records[topic] = self.records.get(topic, 0) + 1
        self.sizes[topic] = (
            self.sizes.get(topic, 0) + len(msg.key() or b"") + len(msg.value() or b"")
        )


class ClusterMirror:
    """One source cluster → the target: a consumer, a producer and an admin client on each
    side, used only from the thread that calls :meth:`run` (librdkafka handles are not to be
    shared while a ``consume()`` runs). :meth:`run` returns after ``stop`` is set and the batch
    in flight is committed; it raises :class:`MirrorError` when the loop cannot go on."""

    def __init__(
        self,
        config: MirrorConfig,
        source: SourceCluster,
        metrics: MirrorMetrics,
        stop: threading.Event,
    ) -> None:
        self.config = config
        self.source = source
        self.alias = source.alias
        self.metrics = metrics
        self.stop = stop
        self._consumer: Any = None
        self._producer: Any = None
        # Kept for the loop's life: a collected admin client fails its futures.
        self._admins: list[Any] = []
        self._topics: TargetTopics | None = None
        self._subscribed: list[str] = []
        self._source_counts: dict[str, int] = {}
        self._owned: set[tuple[str, int]] = set()
        self._next: dict[tuple[str, int], int] = {}  # committed offsets of owned partitions
        # Exactly-once mode: the transactions and the positions committed in the target.
        self._txn: TargetTransactions | None = None
        self._store: MirrorOffsetStore | None = None
        self._stored: dict[tuple[str, int], int] = {}
        self._reset_earliest = str(
            config.consumer_config(source).get("auto.offset.reset", "")
        ).lower() in ("earliest", "smallest", "beginning")
        self.mirrored = 0  # records acknowledged by the target, for progress lines

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._consumer = Consumer(self.config.consumer_config(self.source))
            self._producer = Producer(self.config.producer_config(self.source))
            self._admins = [
                AdminClient(self.config.source_admin_config(self.source)),
                AdminClient(self.config.admin_config()),
            ]
        except KafkaException as exc:
            self._close()
            raise MirrorError(f"{self.alias}: cannot build the clients: {exc}") from None
        topics = self._topics = TargetTopics(self.config, self.alias, *self._admins)
        if self.config.exactly_once:
            try:
                self._start_transactions()
            except BaseException:
                self._close()
                raise
        wait_s = self.config.batch_max_wait_ms / 1000
        next_refresh = next_lag = next_sync = 0.0
        next_progress = time.monotonic() + PROGRESS_INTERVAL_S
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if now >= next_refresh:
                    self._refresh_topics()
                    next_refresh = now + self.config.refresh_topics_interval_ms / 1000
                if self.config.sync_topic_configs_enabled and now >= next_sync:
                    # Right after the first refresh, as MirrorMaker 2 schedules it.
                    topics.sync_configs(self._subscribed)
                    next_sync = now + self.config.sync_topic_configs_interval_s
                # Rebalance callbacks run inside consume(): nothing is in flight here.
                messages = self._consumer.consume(self.config.batch_max_messages, wait_s)
                batch = self._usable(messages)
                now = time.monotonic()
                # Before the batch too: a target that stalls the batch shows as lag.
                if batch or now >= next_lag:
                    self._update_lag()
                    next_lag = now + LAG_INTERVAL_S
                if batch:
                    self._mirror(batch)
                if now >= next_progress:
                    log.info(
                        "%s: %d records mirrored so far, %d partitions owned",
                        self.alias, self.mirrored, len(self._owned),
                    )  # fmt: skip
                    next_progress = now + PROGRESS_INTERVAL_S
        finally:
            self._close()

    def _start_transactions(self) -> None:
        """Fence the previous incarnation, then read the committed positions (in this order:
        after the fence nothing more of the old one can commit)."""
        self._txn = TargetTransactions(
            self._producer, self.alias, self.config.transactional_id(self.source),
            self.config.commit_timeout_ms,
        )  # fmt: skip
        self._txn.init()
        self._store = MirrorOffsetStore(self.config, self.source, self._admins[1])
        self._store.ensure_topic()
        self._stored = self._store.load()
        log.info(
            "%s: exactly-once as transactional.id %s; %d committed positions in %s",
            self.alias, self._txn.transactional_id, len(self._stored), self._store.topic,
        )  # fmt: skip

    def _usable(self, messages: Sequence[Any]) -> list[Any]:
        batch = []
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise MirrorError(f"{self.alias}: fatal consumer error: {err}")
                log.warning("%s: consumer error (librdkafka retries): %s", self.alias, err)
                continue
            if (msg.topic(), msg.partition()) not in self._owned:
                continue  # revoked inside this consume(): the next owner reads it
            batch.append(msg)
        return batch

    def _mirror(self, messages: list[Any]) -> None:
        """Produce ``messages``, wait for every acknowledgement, then commit — or raise."""
        if any(m.partition() >= self._source_counts.get(m.topic(), 0) for m in messages):
            # Partitions the last refresh did not see (another process's refresh started the
            # rebalance): grow the target first, so they keep their partition numbers.
            self._refresh_topics()
        batch = _Batch(self.alias)
        next_offsets: dict[tuple[str, int], int] = {}
        first_offsets: dict[tuple[str, int], int] = {}
        if self._txn is None:
            self._produce_batch(messages, batch, next_offsets, first_offsets)
        else:
            self._txn.begin()
            try:
                self._produce_batch(messages, batch, next_offsets, first_offsets)
            except BaseException:
                self._txn.abort()  # nothing of the batch becomes visible
                raise
            if not self._txn.commit():
                self.metrics.transactions_aborted.labels(self.alias).inc()
                self._rewind(first_offsets)
                return
            self._stored.update(next_offsets)
        for topic, count in batch.records.items():
            self.metrics.record_delivered(self.alias, topic, count, batch.sizes[topic])
        self.mirrored += len(messages)
        offsets = [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(next_offsets.items())]
        if self._txn is not None:
            self._commit_informational(offsets)
            committed = True
        else:
            committed = self._commit(offsets)
        if committed:
            self.metrics.batches.labels(self.alias).inc()
            for (t, p), o in next_offsets.items():
                if (t, p) in self._owned:
                    self._next[(t, p)] = o

    def _produce_batch(
        self,
        messages: list[Any],
        batch: _Batch,
        next_offsets: dict[tuple[str, int], int],
        first_offsets: dict[tuple[str, int], int],
    ) -> None:
        """Produce ``messages`` (and, exactly-once, their offsets records) and wait for every
        delivery report; :class:`DeliveryError` when one failed."""
        for msg in messages:
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            kwargs = self._record(msg, topic, partition, offset)
            where = f"{self.alias}/{topic}/{partition}/{offset}"

            def report(err: Any, sent: Any, where: str = where) -> None:
                batch.on_delivery(err, sent, where)

            refreshed = False
            while True:
                try:
                    self._producer.produce(topic, on_delivery=report, **kwargs)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    self._producer.poll(0.1)
                except KafkaException as exc:  # e.g. MSG_SIZE_TOO_LARGE: refused locally
                    error = error_of(exc)
                    if not refreshed and error is not None and error.code() == _UNKNOWN_PARTITION:
                        # A partition the target grew since the producer last read Metadata.
                        refreshed = True
                        with contextlib.suppress(KafkaException):
                            self._producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
                        continue
                    self._producer.flush()  # nothing half-reported; the batch is not committed
                    raise DeliveryError(
                        f"{where}: expected the target producer to take the record, "
                        f"found {exc}; nothing of the batch was committed"
                    ) from None
            batch.pending += 1
            key = (topic, partition)
            next_offsets[key] = max(next_offsets.get(key, 0), offset + 1)
            first_offsets.setdefault(key, offset)
        if self._store is not None:  # the positions, in the same transaction
            for (topic, partition), next_offset in sorted(next_offsets.items()):
                where = f"{self._store.topic} for {topic}/{partition}"

                def stored(err: Any, sent: Any, where: str = where) -> None:
                    batch.on_delivery(err, sent, where)

                self._producer.produce(
                    on_delivery=stored, **self._store.record(topic, partition, next_offset)
                )
                batch.pending += 1
        # The whole batch, acknowledged or failed: flush() serves the delivery reports, and
        # librdkafka fails a record after message.timeout.ms at the latest. The lag is kept
        # fresh meanwhile: a target that stalls the batch shows on every owned partition,
        # also those whose first fetch answered after this batch was consumed.
        while self._producer.flush(LAG_INTERVAL_S) > 0:
            self._update_lag()
        if batch.errors or batch.pending:
            shown = "; ".join(e for e in batch.errors if e)
            raise DeliveryError(
                f"{self.alias}: expected the target to acknowledge all {len(messages)} records "
                f"of the batch, found {len(batch.errors)} delivery errors ({shown}); "
                "nothing of the batch was committed"
            )
        if self._store is not None:  # the offsets records are not mirrored records
            batch.records.pop(self._store.topic, None)
            batch.sizes.pop(self._store.topic, None)

    def _rewind(self, first_offsets: dict[tuple[str, int], int]) -> None:
        """After an aborted transaction: back to the batch's first offsets, so the next
        ``consume()`` returns the batch again."""
        for (topic, partition), offset in sorted(first_offsets.items()):
            if (topic, partition) in self._owned:
                self._consumer.seek(KafkaTopicPartition(topic, partition, offset))

    def _commit_informational(self, offsets: list[Any]) -> None:
        """Exactly-once: the source group's commit after the transaction, for ``sluice mirror
        lag`` only (the positions are the target's); a failure is logged, never retried."""
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.info("%s: informational source commit failed: %s", self.alias, exc)

    def _record(self, msg: Any, topic: str, partition: int, offset: int) -> dict[str, Any]:
        """The produce() arguments that copy ``msg`` with its lineage."""
        headers = msg.headers()
        has_lineage = any(k == LINEAGE_HEADER and v is not None for k, v in headers or ())
        if not has_lineage:
            lineage = origin(headers, self.alias, topic, partition, offset)
            headers = [*(headers or ()), (LINEAGE_HEADER, lineage.encode())]
        else:
            try:
                origin(headers, self.alias, topic, partition, offset)
            except LineageError as exc:  # someone else's header: keep it, as it is
                log.warning("%s/%s/%d/%d: %s", self.alias, topic, partition, offset, exc)
        kwargs: dict[str, Any] = {"key": msg.key(), "value": msg.value(), "headers": headers}
        ts_type, ts = msg.timestamp()
        if ts_type != TIMESTAMP_NOT_AVAILABLE:
            kwargs["timestamp"] = ts
        target_count = self._topics.counts.get(topic) if self._topics is not None else None
        if target_count == self._source_counts.get(topic) and partition < (target_count or 0):
            kwargs["partition"] = partition
        return kwargs

    def _commit(self, offsets: list[Any]) -> bool:
        """Commit ``offsets``; False when a rebalance refused it (duplicates, not loss);
        :class:`CommitError` after ``commit.timeout.ms`` of retriable errors."""
        deadline = time.monotonic() + self.config.commit_timeout_ms / 1000
        backoff = 0.1
        while True:
            error: Any = None
            try:
                result = self._consumer.commit(offsets=offsets, asynchronous=False)
                failed = [tp for tp in result or () if tp.error is not None]
                if not failed:
                    return True
                error = failed[0].error
            except KafkaException as exc:
                error = error_of(exc)
                if error is None:
                    raise CommitError(f"{self.alias}: commit failed: {exc}") from None
            if error.code() in _REFUSED_BY_REBALANCE:
                self.metrics.commits_refused.labels(self.alias).inc()
                log.warning(
                    "%s: commit refused by a rebalance (%s); the next owner mirrors this "
                    "batch again", self.alias, error.name(),
                )  # fmt: skip
                return False
            if not is_retriable(error):
                raise CommitError(f"{self.alias}: expected the commit to succeed, found {error}")
            if time.monotonic() + backoff > deadline:
                raise CommitError(
                    f"{self.alias}: expected a commit within commit.timeout.ms="
                    f"{self.config.commit_timeout_ms}, found {error} until then"
                )
            log.info("%s: commit failed (%s), retrying", self.alias, error.name())
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    # -- the group -------------------------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if self._txn is not None:
            # The target's committed positions, not the group's: assign() from this callback
            # sets where each partition starts (the rest: the group's offset, else the reset).
            for tp in partitions:
                stored = self._stored.get((tp.topic, tp.partition))
                if stored is not None:
                    tp.offset = stored
                    self._next[(tp.topic, tp.partition)] = stored
            consumer.assign(partitions)
        self._owned.update((tp.topic, tp.partition) for tp in partitions)
        self.metrics.assigned.labels(self.alias).set(len(self._owned))
        log.info("%s: assigned %s", self.alias, _names(partitions))
        try:  # the committed offsets, for the lag until this process commits its own
            for tp in consumer.committed(partitions, timeout=METADATA_TIMEOUT_S):
                if tp.error is None and tp.offset >= 0:
                    self._next.setdefault((tp.topic, tp.partition), tp.offset)
        except KafkaException as exc:
            log.warning("%s: committed offsets unknown for now: %s", self.alias, exc)

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        # Called inside consume(): every record of these partitions that was produced is
        # acknowledged and committed already (or the loop is failing and commits nothing).
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._owned.discard(key)
            self._next.pop(key, None)
            self.metrics.drop_lag(self.alias, tp.topic, tp.partition)
        self.metrics.assigned.labels(self.alias).set(len(self._owned))
        if partitions:
            log.info("%s: revoked %s", self.alias, _names(partitions))

    def _refresh_topics(self) -> None:
        """Re-read the source's topics and partition counts; create the missing target topics
        and grow the smaller ones; resubscribe on change."""
        try:
            metadata = self._consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("%s: cannot list topics (will retry): %s", self.alias, exc)
            return
        wanted: dict[str, int] = {}
        for name, t in metadata.topics.items():
            if not self.config.mirrors_topic(name):
                continue
            if t.error is None and t.partitions:
                wanted[name] = len(t.partitions)
            elif name in self._subscribed:  # a passing error (a leader moving): keep it
                wanted[name] = self._source_counts[name]
        self._source_counts.update(wanted)
        assert self._topics is not None
        before = dict(self._topics.counts)
        ready = self._topics.ensure(wanted)
        for topic in sorted(ready):
            if topic in before and self._topics.counts[topic] != before[topic]:
                # librdkafka refuses a record for a partition beyond the count it knows
                # (_UNKNOWN_PARTITION, at once): show the producer the grown topic first.
                try:
                    self._producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
                except KafkaException as exc:
                    log.warning("%s: producer metadata of %s: %s", self.alias, topic, exc)
        names = sorted(ready)
        if names == self._subscribed:
            return
        if names:
            self._consumer.subscribe(
                names, on_assign=self._on_assign, on_revoke=self._on_revoke,
                on_lost=self._on_revoke,
            )  # fmt: skip
        else:
            self._consumer.unsubscribe()
        log.info("%s: mirroring %d topics: %s", self.alias, len(names), ", ".join(names) or "-")
        self._subscribed = names

    def _update_lag(self) -> None:
        """``sluice_mirror_lag`` of the owned partitions: the cached high watermark (from the
        last fetch response; no request) minus the committed offset — the log start when
        nothing is committed yet and ``auto.offset.reset`` is earliest, else unknown."""
        for topic, partition in sorted(self._owned):
            low, high = self._consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), cached=True
            )
            if high < 0:
                continue  # no fetch answered yet
            done = self._next.get((topic, partition))
            if done is None:
                if not (self._reset_earliest and low >= 0):
                    continue
                done = low
            self.metrics.set_lag(self.alias, topic, partition, max(0, high - done))

    def _close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()  # leaves the group; commits nothing (auto commit off)
            except Exception as exc:  # closing must not hide the loop's own error
                log.warning("%s: closing the consumer: %s", self.alias, exc)
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None
        self._admins = []
        for topic, partition in self._owned:
            self.metrics.drop_lag(self.alias, topic, partition)
        self._owned.clear()
        self.metrics.assigned.labels(self.alias).set(0)


def _names(partitions: Iterable[Any]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions) or "-"


class Mirror:
    """One mirror process: a :class:`ClusterMirror` thread per source cluster and the metrics
    endpoint. ``start()``, then ``wait()`` (blocks; the exit status), ``stop()`` from any
    thread or a signal handler. A loop that fails stops the others (they finish and commit
    their batch in flight) and makes ``wait()`` return 1."""

    def __init__(self, config: MirrorConfig, metrics: MirrorMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or MirrorMetrics()
        self.stop_event = threading.Event()
        self.loops = [
            ClusterMirror(config, s, self.metrics, self.stop_event) for s in config.sources
        ]
        self.errors: dict[str, BaseException] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> Mirror:
        if self.config.metrics_port is not None:
            self.metrics.serve(self.config.metrics_host or "127.0.0.1", self.config.metrics_port)
        for loop in self.loops:
            thread = threading.Thread(
                target=self._run_loop, args=(loop,), name=f"sluice-mirror-{loop.alias}"
            )
            thread.start()
            self._threads.append(thread)
        log.info(
            "mirroring %s into %s (%s) as group %s%s",
            ",".join(s.alias for s in self.config.sources), self.config.target_alias,
            self.config.target_bootstrap_servers, self.config.group_id,
            ", exactly once" if self.config.exactly_once else "",
        )  # fmt: skip
        return self

    def _run_loop(self, loop: ClusterMirror) -> None:
        try:
            loop.run()
        except BaseException as exc:  # recorded and reported by wait(); the others stop
            self.errors[loop.alias] = exc
            if isinstance(exc, MirrorError):  # its message names the cluster
                log.error("%s", exc)
            else:
                log.error("%s: unexpected error", loop.alias, exc_info=exc)
            self.stop_event.set()

    def stop(self) -> None:
        """Ask every loop to finish its batch in flight, commit and close. Signal-safe."""
        self.stop_event.set()

    def wait(self, timeout: float | None = None) -> int:
        """Block until every loop ended (or ``timeout``); 0 after a clean stop, 1 after a
        failure; -1 if still running at ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            # Short joins so the main thread keeps handling signals.
            while thread.is_alive():
                if deadline is not None and time.monotonic() > deadline:
                    return -1
                thread.join(0.2)
        self.metrics.close()
        total = sum(loop.mirrored for loop in self.loops)
        log.info("stopped after mirroring %d records", total)
        return 1 if self.errors else 0


# -- lag ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """One source partition as the group sees it: ``committed`` is None before the first
    commit, when ``lag`` counts from ``log_start`` (the mirror starts at the earliest offset)."""

    cluster: str
    topic: str
    partition: int
    committed: int | None
    log_start: int
    end: int

    @property
    def lag(self) -> int:
        start = self.committed if self.committed is not None else self.log_start
        return max(0, self.end - start)


def mirror_lag(config: MirrorConfig, timeout_s: float = 15.0) -> list[PartitionLag]:
    """Every mirrored partition of every source cluster: the group's committed offset (an
    OffsetFetch to that cluster's group coordinator) against the log's bounds (ListOffsets),
    as ``kafka-consumer-groups --describe`` shows them. Raises :class:`MirrorError` when a
    cluster does not answer."""
    rows: list[PartitionLag] = []
    for source in config.sources:
        consumer = Consumer(
            {
                **config.source_client_config(source),
                "group.id": config.group_id,
                "enable.auto.commit": False,
            }
        )
        try:
            metadata = consumer.list_topics(timeout=timeout_s)
            partitions = [
                KafkaTopicPartition(name, p)
                for name, t in sorted(metadata.topics.items())
                if t.error is None and config.mirrors_topic(name)
                for p in sorted(t.partitions)
            ]
            committed = {
                (tp.topic, tp.partition): tp.offset
                for tp in (consumer.committed(partitions, timeout=timeout_s) if partitions else ())
            }
            for tp in partitions:
                low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
                offset = committed.get((tp.topic, tp.partition), -1)
                rows.append(
                    PartitionLag(
                        source.alias,
                        tp.topic,
                        tp.partition,
                        offset if offset >= 0 else None,
                        low,
                        high,
                    )  # fmt: skip
                )
        except KafkaException as exc:
            raise MirrorError(
                f"{source.alias} ({source.bootstrap_servers}): expected topics, committed "
                f"offsets and watermarks, found {exc}"
            ) from None
        finally:
            consumer.close()
    return rows


def format_lag(rows: Sequence[PartitionLag]) -> str:
    """The ``sluice mirror lag`` table (committed ``-`` before the group's first commit)."""
    header = (
        f"{'CLUSTER':<16} {'TOPIC':<32} {'PARTITION':>9} {'COMMITTED':>12} {'END':>12} {'LAG':>10}"
    )
    lines = [header]
    for r in rows:
        shown = "-" if r.committed is None else str(r.committed)
        lines.append(
            f"{r.cluster:<16} {r.topic:<32} {r.partition:>9} {shown:>12} {r.end:>12} {r.lag:>10}"
        )
    lines.append(f"total lag: {sum(r.lag for r in rows)}")
    return "\n".join(lines)
