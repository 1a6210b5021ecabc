"""The paper's consumer: a group coordinated through ZooKeeper, with no master (§3.2, Alg. 1).

    with ZookeeperConsumerConnector({"zookeeper.connect": "zk:2181/chroot", "group.id": "g",
                                     "bootstrap.servers": "broker:9092"}) as connector:
        streams = connector.create_message_streams({"clicks": 2})
        for message in streams["clicks"][0]:     # blocks; ends at shutdown()
            ...

**Registries** (Kafka 0.8's layout; the znode classes and payloads are in
``sluice.pipeline.consumer.registry``)::

    /consumers/<group>/ids/<consumer id>      ephemeral   subscription {topic: streams}
    /consumers/<group>/owners/<topic>/<p>     ephemeral   owning thread id "<consumer id>-<i>"
    /consumers/<group>/offsets/<topic>/<p>    persistent  next offset to consume
    /brokers/ids, /brokers/topics/<topic>     watched when present (cluster mode)

**Members.** As in Kafka 0.8, the assignor deals partitions to consumer *threads*: a consumer
that reads topic T with n streams is n members ``<consumer id>-0`` .. ``-<n-1>`` subscribed to
T, and the partitions a member gets are delivered by that stream. Every consumer reads the same
registries, sorts the same ids and runs the same pure assignor
(``sluice.pipeline.consumer.assignors``; range
by default, as the paper), so all compute the same assignment without talking to each other.

**Rebalance (Algorithm 1)**, run on startup and whenever a watch fires on the consumer registry
(children of ``ids``), the broker registry or a subscribed topic's ``/brokers/topics`` znode,
or when the partition counts in the broker's metadata change (standalone brokers do not
register in ZooKeeper, so their counts are polled; see ``topic.metadata.refresh.interval.ms``):

1. Stop delivering (bump the generation: queued messages become stale), commit the consumed
   offsets of the owned partitions (if ``auto.commit.enable``), delete our ownership znodes.
2. Read the consumer registry (re-arming the children watch) and each topic's partition count
   (``/brokers/topics/<t>`` when it exists, re-arming an exists-watch, else broker Metadata).
3. Compute the assignment; our share is what our threads got.
4. Create all our ownership znodes in one ZooKeeper multi (all or none). If one exists —
   another consumer has not released it yet, the notifications reach consumers at slightly
   different times — we own nothing, back off (randomised, growing) and go back to step 1,
   at most ``rebalance.max.retries`` times. A round that fails them all is retried as a whole
   after a backoff (Kafka 0.8 gave up and logged; an idle consumer beside orphaned partitions
   helps nobody).
5. Read each partition's offset from the offset registry; a partition without one (a new
   group) starts at the log start or end per ``auto.offset.reset`` and that offset is written
   at once, so a restart resumes where the group started and not at the new end.
6. Assign exactly the owned partitions, at those offsets, to the fetcher's Kafka consumer.

**ZooKeeper trouble.** A lost *connection* keeps the session and our znodes, but kazoo drops
its watches: once reconnected, the consumer re-reads the registries (re-arming the watches)
and rebalances only if members, subscriptions, partition counts or brokers changed meanwhile.
A lost *session* deletes our znodes: the consumer stops delivering at once (others may own
our partitions already), registers again under the new session and rebalances.

**Sticky.** The sticky assignor needs every member's previous partitions, and every consumer
must see the same ones. Reading the owners znodes would not do: consumers release at different
moments, so each would see a different subset. Instead a consumer writes what it acquired into
its own ids znode (``"owned"``) after each successful rebalance, and everyone reads
"previous" from the consumer registry it reads anyway. A consumer that failed to acquire keeps
its last ``owned``, so the group's view of "previous" only changes when someone succeeds.

**Delivery.** A message counts as consumed when a stream's ``__next__`` returns it; the offset
committed is then the next one. Queued messages carry the generation they were fetched in, and
``__next__`` checks it and advances the consumed offset under the same lock under which a
rebalance bumps the generation and snapshots the offsets it commits. So a message returned
before a rebalance is covered by the commit made on release, and a message not yet returned
is dropped and fetched again from the committed offset by whoever owns the partition next:
a rebalance neither repeats nor skips messages. A consumer that dies without ``shutdown()``
repeats, at its successor, what it consumed after its last commit (the paper's §3.3).
Commits are a multi conditional on our ownership znodes existing, and are refused once our
ZooKeeper session has changed (the znodes were then someone else's or no one's): a consumer
that lost its session cannot move a partition's offset under its new owner.

**Threads.** kazoo's threads run the watch callbacks, which only raise a flag; one rebalance
thread runs rebalances (serialised; requests arriving meanwhile coalesce into one more) and
periodic commits; one fetcher thread owns the confluent-kafka ``Consumer`` (``assign()`` only,
offsets live in ZooKeeper) and feeds one bounded queue per (topic, stream); a second handle
answers the rebalance thread's Metadata and ListOffsets requests. ``shutdown()``
stops the threads, commits, deletes our ephemeral znodes and closes both clients; the streams
then end. ``ZookeeperConsumerConnector`` is thread-safe; each ``KafkaStream`` is meant to be
read by one thread at a time.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, overload

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.assignors import Assignor, get_assignor
from sluice.pipeline.consumer.registry import (
    BrokerIdsZNode,
    ConsumerIdsZNode,
    ConsumerIdZNode,
    ConsumerRegistration,
    CorruptZnodeError,
    OffsetZNode,
    OwnersTopicZNode,
    OwnerZNode,
    TopicZNode,
    thread_id,
)

__all__ = [
    "ConsumerConfig",
    "ConsumerConfigError",
    "ConsumerRebalanceFailedError",
    "ConsumerStats",
    "ConsumerTimeoutError",
    "ConsumerTimeoutException",
    "KafkaStream",
    "MessageAndMetadata",
    "ZookeeperConsumerConnector",
    "create_java_consumer_connector",
]

log = logging.getLogger(__name__)

# Failures of one rebalance attempt that a later attempt may not see: ZooKeeper or the broker
# unreachable, a session being re-established.
_RETRIABLE = (KazooException, KazooTimeoutError, KafkaException)


# --------------------------------------------------------------------------------------------
# Errors, configuration, messages
# --------------------------------------------------------------------------------------------


class ConsumerConfigError(ValueError):
    """A configuration key is unknown, missing or has a bad value."""


class ConsumerTimeoutError(Exception):
    """No message arrived on a stream within ``consumer.timeout.ms`` (Kafka 0.8's
    ``ConsumerTimeoutException``). The stream stays usable: call ``next()`` again."""


ConsumerTimeoutException = ConsumerTimeoutError


class ConsumerRebalanceFailedError(Exception):
    """Every attempt of the first rebalance ran into ownership conflicts or errors."""


# auto.offset.reset: Kafka 0.8's names and the later ones, to librdkafka's.
_OFFSET_RESETS = {
    "smallest": "earliest",
    "earliest": "earliest",
    "largest": "latest",
    "latest": "latest",
}


def _default_consumer_id(group: str) -> str:
    # Kafka 0.8: groupId_hostname-timestampMs-first 8 characters of a random UUID.
    return f"{group}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ConsumerConfig:
    """The connector's settings, under Kafka 0.8's key names (``from_properties``).

    ``bootstrap.servers`` (or 0.8's ``metadata.broker.list``) is where the fetcher connects:
    Kafka 0.8 found brokers in ``/brokers/ids``, which Sluice's standalone broker does not
    write. Keys starting with ``kafka.`` are passed, without the prefix, to the fetcher's
    confluent-kafka ``Consumer``.
    """

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

    _INTS = (
        "rebalance.max.retries",
        "rebalance.backoff.ms",
        "auto.commit.interval.ms",
        "consumer.timeout.ms",
        "zookeeper.session.timeout.ms",
        "zookeeper.connection.timeout.ms",
        "queued.max.messages",
        "fetch.wait.max.ms",
        "topic.metadata.refresh.interval.ms",
    )

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ConsumerConfig:
        """Parse Kafka-style properties (values may be strings, as read from a file)."""
        settings: dict[str, Any] = {}
        kafka: dict[str, str] = {}
        known = {"zookeeper.connect", "group.id", "bootstrap.servers", "metadata.broker.list"}
        known |= {"consumer.id", "partition.assignment.strategy", "auto.commit.enable"}
        known |= {"auto.offset.reset", *cls._INTS}
        for key, value in props.items():
            if key.startswith("kafka."):
                kafka[key[len("kafka.") :]] = str(value)
            elif key not in known:
                raise ConsumerConfigError(f"unknown consumer config key {key!r}")
        for key in ("zookeeper.connect", "group.id"):
            if not str(props.get(key, "")).strip():
                raise ConsumerConfigError(f"{key} is required")
        servers = props.get("bootstrap.servers", props.get("metadata.broker.list", ""))
        if not str(servers).strip():
            raise ConsumerConfigError("bootstrap.servers (or metadata.broker.list) is required")
        group = str(props["group.id"])
        for key in cls._INTS:
            if key in props:
                try:
                    settings[key.replace(".", "_")] = int(str(props[key]))
                except ValueError as e:
                    raise ConsumerConfigError(
                        f"{key}: expected an integer, found {props[key]!r}"
                    ) from e
        if "auto.commit.enable" in props:
            flag = str(props["auto.commit.enable"]).strip().lower()
            if flag not in {"true", "false"}:
                raise ConsumerConfigError(
                    f"auto.commit.enable: expected true/false, found {flag!r}"
                )
            settings["auto_commit_enable"] = flag == "true"
        reset = str(props.get("auto.offset.reset", "largest")).strip().lower()
        if reset not in _OFFSET_RESETS:
            raise ConsumerConfigError(
                "auto.offset.reset: expected smallest/largest (or earliest/latest), "
                f"found {reset!r}"
            )
        strategy = str(props.get("partition.assignment.strategy", "range")).strip().lower()
        get_assignor(strategy)  # raises UnknownAssignorError early
        config = cls(
            zookeeper_connect=str(props["zookeeper.connect"]),
            group_id=group,
            bootstrap_servers=str(servers),
            consumer_id=str(props.get("consumer.id") or _default_consumer_id(group)),
            partition_assignment_strategy=strategy,
            auto_offset_reset=reset,
            kafka=kafka,
            **settings,
        )
        if config.rebalance_max_retries < 1:
            raise ConsumerConfigError("rebalance.max.retries: expected >= 1")
        if config.queued_max_messages < 1:
            raise ConsumerConfigError("queued.max.messages: expected >= 1")
        return config


@dataclass(frozen=True, slots=True)
class MessageAndMetadata:
    """One consumed message (Kafka 0.8's ``MessageAndMetadata``). ``timestamp`` is in ms."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass
class ConsumerStats:
    """Counters for monitoring and tests (written by the rebalance and kazoo threads)."""

    rebalances: int = 0  # successful rebalances
    rebalance_attempts: int = 0
    ownership_conflicts: int = 0  # attempts that found a partition still owned by another
    failed_rounds: int = 0  # rounds that used up rebalance.max.retries
    commits: int = 0  # offset-registry writes that succeeded (one per multi)
    sessions_lost: int = 0  # ZooKeeper sessions that expired under us


# --------------------------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------------------------

# A queue holds (generation, message) pairs, and None once the connector has shut down.
_Item = tuple[int, "MessageAndMetadata"] | None
# What a rebalance's outcome depends on: members and subscriptions, partition counts, brokers.
_View = tuple[tuple[tuple[str, tuple[tuple[str, int], ...]], ...], tuple[tuple[str, int], ...], Any]


@dataclass
class _Owned:
    """One owned partition: its stream, and offsets. Guarded by the connector's ``_lock``."""

    stream: int
    start: int  # where the fetcher starts in this generation
    consumed: int  # offset of the next message to hand out
    committed: int  # last value in the offset registry


class KafkaStream:
    """A blocking iterator over the messages of the partitions dealt to one consumer thread.

    ``next()`` blocks until a message arrives; raises :class:`ConsumerTimeoutError` after
    ``consumer.timeout.ms`` without one (when set); ends (``StopIteration``) once the connector
    has shut down.
    """

    def __init__(self, connector: ZookeeperConsumerConnector, topic: str, index: int) -> None:
        self.topic = topic
        self.index = index
        self._connector = connector
        self._queue: queue.Queue[_Item] = queue.Queue(connector.config.queued_max_messages)

    def __repr__(self) -> str:
        return f"KafkaStream({self.topic!r}, {self.index}, {self._connector.consumer_id!r})"

    def __iter__(self) -> KafkaStream:
        return self

    def __next__(self) -> MessageAndMetadata:
        return self._connector._next_message(self)


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class ZookeeperConsumerConnector:
    """One member of a consumer group coordinated through ZooKeeper (see the module docstring).

    Connects to ZooKeeper at construction; joins the group in :meth:`create_message_streams`
    (once per connector, as in Kafka 0.8); leaves it in :meth:`shutdown`. Thread-safe.
    """

    def __init__(self, config: ConsumerConfig | Mapping[str, object]) -> None:
        if not isinstance(config, ConsumerConfig):
            config = ConsumerConfig.from_properties(config)
        self.config = config
        self.consumer_id = config.consumer_id
        self.group = config.group_id
        self.stats = ConsumerStats()
        self._assignor: Assignor = get_assignor(config.partition_assignment_strategy)
        self._reset = _OFFSET_RESETS[config.auto_offset_reset]

        # Lock order: _zk_lock (ZooKeeper writes: rebalance, commit) before _lock (delivery).
        self._zk_lock = threading.RLock()
        self._lock = threading.Lock()
        self._generation = 0
        self._owned: dict[TopicPartition, _Owned] = {}
        self._owner_session: int | None = None  # the session our ownership znodes belong to
        # The ownership znodes we created (in _owner_session), whether or not the attempt that
        # created them got as far as fetching: _release deletes exactly these.
        self._claimed: set[TopicPartition] = set()
        # Released partitions whose offsets are not committed yet (ZooKeeper was unreachable).
        self._unreleased: dict[TopicPartition, tuple[_Owned, int]] = {}
        # Set while an ownership write may or may not have been applied (its reply was lost):
        # the next release then looks for znodes of our session that we do not know about.
        self._ownership_uncertain = False

        self._cond = threading.Condition()  # guards the request flags and _closing
        self._rebalance_requested = False
        self._closing = False
        self._stopping = threading.Event()  # wakes backoff sleeps and the fetcher
        self._closed = threading.Event()  # streams end once set
        self._fetch_wakeup = threading.Event()
        self._first_rebalance = threading.Event()
        self._first_error: BaseException | None = None
        self._register_needed = False
        self._retry_round_at: float | None = None

        self._subscription: dict[str, int] = {}
        self._streams: dict[tuple[str, int], KafkaStream] = {}
        self._published_owned: dict[str, list[TopicPartition]] = {}
        self._recheck_requested = False
        self._last_view: _View | None = None  # what the last successful rebalance saw
        self._threads: list[threading.Thread] = []
        # Two librdkafka handles. The fetcher thread alone uses ``_kafka`` (assign, consume);
        # the rebalance thread uses ``_metadata`` (Metadata, ListOffsets). With one handle,
        # list_topics() from another thread never returned while the fetcher looped in
        # consume() (confluent-kafka 2.16: each consume call starves the other caller).
        self._kafka: Consumer | None = None
        self._metadata: Consumer | None = None

        self._zk = KazooClient(
            hosts=config.zookeeper_connect,
            timeout=config.zookeeper_session_timeout_ms / 1000,
        )
        try:
            self._zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000)
        except BaseException:
            self._zk.stop()
            self._zk.close()
            raise
        self._zk.add_listener(self._on_session_state)

    # ---------------------------------------------------------------- public API

    @overload
    def create_message_streams(
        self, topic_count: Mapping[str, int]
    ) -> dict[str, list[KafkaStream]]: ...

    @overload
    def create_message_streams(
        self, topic_count: str, num_streams: int = 1
    ) -> list[KafkaStream]: ...

    def create_message_streams(
        self, topic_count: Mapping[str, int] | str, num_streams: int = 1
    ) -> dict[str, list[KafkaStream]] | list[KafkaStream]:
        """Join the group and return ``{topic: [n streams]}`` (or, given ``(topic, n)``, the
        list of n streams). Returns after the first rebalance; raises
        :class:`ConsumerRebalanceFailedError` (and shuts the connector down) if it failed."""
        single = isinstance(topic_count, str)
        counts = {topic_count: num_streams} if isinstance(topic_count, str) else dict(topic_count)
        if not counts or any(n < 1 for n in counts.values()):
            raise ValueError(f"expected at least one topic with >= 1 stream, found {counts}")
        with self._cond:
            if self._closing:
                raise RuntimeError("the connector has been shut down")
            if self._subscription:
                raise RuntimeError("create_message_streams may be called once per connector")
            self._subscription = counts
        try:
            self._join(counts)
        except BaseException:
            self.shutdown()
            raise
        streams = {t: [self._streams[(t, i)] for i in range(n)] for t, n in counts.items()}
        return streams[next(iter(counts))] if single else streams

    def _join(self, counts: Mapping[str, int]) -> None:
        for topic, n in sorted(counts.items()):
            for i in range(n):
                self._streams[(topic, i)] = KafkaStream(self, topic, i)
        self._kafka = Consumer(self._kafka_config("fetcher"))
        self._metadata = Consumer(self._kafka_config("metadata"))
        # Connect and learn the leaders now, before the fetcher thread owns the handle: the
        # first assign() then fetches at once instead of after a metadata round of ~0.5 s.
        try:
            self._kafka.list_topics(timeout=10.0)
        except KafkaException as e:  # only a warm-up: the fetcher retries on its own
            log.warning("%s: no broker metadata yet: %s", self.consumer_id, e)
        self._register()
        for name, target in (("rebalance", self._rebalance_loop), ("fetcher", self._fetch_loop)):
            thread = threading.Thread(
                target=target, name=f"sluice-zk-{name}-{self.consumer_id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        self._request_rebalance("startup")
        self._first_rebalance.wait()
        if self._first_error is not None:
            raise self._first_error

    def commit_offsets(self) -> None:
        """Write the consumed offsets of the owned partitions to the offset registry now."""
        with self._zk_lock:
            with self._lock:
                snapshot = {tp: (o, o.consumed) for tp, o in self._owned.items()}
            self._commit(snapshot)

    def owned_partitions(self) -> dict[TopicPartition, int]:
        """The partitions this consumer owns now, each with its stream index."""
        with self._lock:
            return {tp: o.stream for tp, o in sorted(self._owned.items())}

    def shutdown(self) -> None:
        """Leave the group: stop the threads, commit (if ``auto.commit.enable``), delete our
        ephemeral znodes, close the clients, end the streams. Idempotent."""
        with self._cond:
            already, self._closing = self._closing, True
            self._cond.notify_all()
        if already:
            self._closed.wait()
            return
        self._stopping.set()
        self._first_rebalance.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        try:
            with self._zk_lock:
                self._release("shutdown")
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(ConsumerIdZNode.path(self.group, self.consumer_id))
        except _RETRIABLE as e:  # ZooKeeper is gone: the ephemerals go with our session
            log.warning("%s: leaving the group cleanly failed: %r", self.consumer_id, e)
        finally:
            self._zk.stop()
            self._zk.close()
            for client in (self._kafka, self._metadata):
                if client is not None:
                    client.close()
            self._closed.set()
            for stream in self._streams.values():
                _drain(stream._queue)
                stream._queue.put_nowait(None)

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # ---------------------------------------------------------------- delivery

    def _next_message(self, stream: KafkaStream) -> MessageAndMetadata:
        timeout_ms = self.config.consumer_timeout_ms
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while True:
            if self._closed.is_set():
                raise StopIteration
            wait = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            try:
                item = stream._queue.get(timeout=max(wait, 0.0))
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise ConsumerTimeoutError(
                        f"no message on {stream!r} within {timeout_ms} ms"
                    ) from None
                continue
            if item is None:
                stream._queue.put_nowait(None)  # keep ending on later calls
                raise StopIteration
            generation, message = item
            tp = TopicPartition(message.topic, message.partition)
            with self._lock:
                owned = self._owned.get(tp)
                # A message fetched before the last release, or below what we handed out, is
                # stale: drop it (whoever owns the partition refetches it from the commit).
                if (
                    generation != self._generation
                    or owned is None
                    or message.offset < owned.consumed
                ):
                    continue
                owned.consumed = message.offset + 1
            return message

    def _fetch_loop(self) -> None:
        """The fetcher thread: apply each new generation's assignment, route messages."""
        assert self._kafka is not None
        kafka = self._kafka
        applied = -1
        streams: dict[TopicPartition, KafkaStream] = {}
        wait = self.config.fetch_wait_max_ms / 1000
        while not self._stopping.is_set():
            with self._lock:
                plan = None
                if self._generation != applied:
                    applied = self._generation
                    plan = {tp: (o.stream, o.start) for tp, o in self._owned.items()}
            if plan is not None:
                streams = {tp: self._streams[(tp.topic, s)] for tp, (s, _) in plan.items()}
                parts = [
                    KafkaTopicPartition(tp.topic, tp.partition, o) for tp, (_, o) in plan.items()
                ]
                try:
                    if parts:
                        kafka.assign(parts)
                    else:
                        kafka.unassign()
                except KafkaException as e:  # cannot happen with a live handle; retry anyway
                    log.warning("%s: assign failed: %s", self.consumer_id, e)
                    applied, streams = -1, {}
                    self._stopping.wait(wait)
                    continue
            if not streams:
                self._fetch_wakeup.wait(wait)
                self._fetch_wakeup.clear()
                continue
            try:
                batch = kafka.consume(num_messages=500, timeout=wait)
            except KafkaException as e:
                log.warning("%s: fetch failed: %s", self.consumer_id, e)
                self._stopping.wait(wait)
                continue
            for m in batch:
                error = m.error()
                if error is not None:
                    log.warning("%s: fetch error: %s", self.consumer_id, error)
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                stream = streams.get(TopicPartition(str(topic), int(partition or 0)))
                if stream is None or offset is None:
                    continue
                ts_type, ts = m.timestamp()
                message = MessageAndMetadata(
                    topic=str(topic),
                    partition=int(partition or 0),
                    offset=offset,
                    key=m.key(),
                    value=m.value(),
                    timestamp=None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=tuple(m.headers() or ()),  # type: ignore[arg-type]
                )
                if not self._enqueue(stream, applied, message):
                    break  # a rebalance or shutdown made the rest of the batch stale

    def _enqueue(self, stream: KafkaStream, generation: int, message: MessageAndMetadata) -> bool:
        while True:
            try:
                stream._queue.put((generation, message), timeout=0.1)
                return True
            except queue.Full:
                # Reading _generation without the lock is fine: a stale read costs one loop.
                if self._stopping.is_set() or self._generation != generation:
                    return False

    def _kafka_config(self, role: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.config.bootstrap_servers,
            # Required by librdkafka, never used: we only assign(), and offsets live in ZooKeeper.
            "group.id": f"sluice-zk-{self.group}",
            "client.id": f"{self.consumer_id}-{role}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Used when a committed offset is out of range (retention deleted it).
            "auto.offset.reset": self._reset,
            "fetch.wait.max.ms": self.config.fetch_wait_max_ms,
            "log.connection.close": False,
            "logger": log,
            **self.config.kafka,
        }

    # ---------------------------------------------------------------- watches and the loop

    def _request_rebalance(self, reason: str) -> None:
        with self._cond:
            if not self._closing:
                log.debug("%s: rebalance requested (%s)", self.consumer_id, reason)
                self._rebalance_requested = True
                self._cond.notify_all()

    def _request_recheck(self) -> None:
        with self._cond:
            self._recheck_requested = True
            self._cond.notify_all()

    def _on_watch(self, event: Any) -> None:
        # On kazoo's callback thread: never block here, just ask the rebalance thread.
        if event.type == EventType.NONE:
            # kazoo drops every watch when the connection drops (it fires them with NONE);
            # the state listener asks for a re-check once we are connected again.
            return
        self._request_rebalance(f"{event.type} {event.path}")

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self.stats.sessions_lost += 1
            # The session expired: our ephemeral znodes are gone and others may own our
            # partitions already. Stop handing out messages now; re-register and rebalance.
            with self._lock:
                self._generation += 1
                self._owned = {}
            self._fetch_wakeup.set()
            self._register_needed = True
            self._request_rebalance("session lost")
        elif state == KazooState.CONNECTED:
            # Back after a disconnection: the session (and our znodes) survived but kazoo
            # dropped our watches. Re-arm them, and rebalance only if something changed.
            self._request_recheck()

    def _rebalance_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000
        refresh = self.config.topic_metadata_refresh_interval_ms / 1000
        now = time.monotonic()
        next_commit = now + interval if self.config.auto_commit_enable else float("inf")
        next_refresh = now + refresh
        while True:
            with self._cond:
                while not (self._rebalance_requested or self._recheck_requested or self._closing):
                    due = min(next_commit, next_refresh, self._retry_round_at or float("inf"))
                    if due <= time.monotonic():
                        break
                    self._cond.wait(due - time.monotonic())
                if self._closing:
                    return
                requested, self._rebalance_requested = self._rebalance_requested, False
                recheck, self._recheck_requested = self._recheck_requested, False
            now = time.monotonic()
            if self._retry_round_at is not None and now >= self._retry_round_at:
                requested, self._retry_round_at = True, None
            if now >= next_refresh:
                # Standalone brokers do not register topics in ZooKeeper: poll their counts.
                next_refresh, recheck = now + refresh, True
            try:
                if requested or (recheck and self._view_changed()):
                    self._synced_rebalance()
                if now >= next_commit:
                    next_commit = now + interval
                    self.commit_offsets()
            except _RETRIABLE as e:
                log.warning("%s: %r (will retry)", self.consumer_id, e)
                if recheck:  # e.g. still disconnected: look again a little later
                    self._retry_round_at = now + self._backoff(0)
            except Exception:  # never let the thread die: the group would lose a member
                log.exception("%s: unexpected error in the rebalance thread", self.consumer_id)

    def _view_changed(self) -> bool:
        """Re-read the registries (re-arming the watches); did anything change since the last
        successful rebalance?"""
        with self._zk_lock:
            return self._read_view()[2] != self._last_view

    # ---------------------------------------------------------------- Algorithm 1

    def _synced_rebalance(self) -> None:
        """Up to ``rebalance.max.retries`` attempts of Algorithm 1, with backoff between."""
        retries = self.config.rebalance_max_retries
        for attempt in range(retries):
            if self._stopping.is_set():
                return
            self.stats.rebalance_attempts += 1
            try:
                with self._zk_lock:
                    done = self._rebalance()
            except _RETRIABLE as e:
                log.warning("%s: rebalance attempt %d failed: %r", self.consumer_id, attempt, e)
                done = False
            except Exception:  # e.g. a corrupt registration: retrying may not help, but may
                log.exception("%s: rebalance attempt %d failed", self.consumer_id, attempt)
                done = False
            if done:
                self.stats.rebalances += 1
                self._first_rebalance.set()
                return
            if attempt + 1 < retries:
                self._stopping.wait(self._backoff(attempt))
        self.stats.failed_rounds += 1
        log.warning("%s: rebalance failed %d times; retrying later", self.consumer_id, retries)
        if not self._first_rebalance.is_set():
            self._first_error = ConsumerRebalanceFailedError(
                f"{self.consumer_id} could not rebalance after {retries} attempts"
            )
            self._first_rebalance.set()
        self._retry_round_at = time.monotonic() + self._backoff(retries)

    def _backoff(self, attempt: int) -> float:
        # Randomised so that two consumers that collided do not collide again in lockstep;
        # growing (capped at 8x) so that a slow releaser gets more time on each retry.
        base = self.config.rebalance_backoff_ms / 1000
        return float(base * min(2**attempt, 8) * random.uniform(0.5, 1.5))

    def _rebalance(self) -> bool:
        """One attempt; True when we own our share (possibly nothing) and fetch it."""
        if self._register_needed:
            self._register()
        # 1. Release everything we own (committing first).
        self._release("rebalance")
        # 2. Read the consumer registry and the partition counts, re-arming the watches.
        registrations, counts, view = self._read_view()
        if self.consumer_id not in registrations:
            # Our ephemeral znode is gone (session expired and not yet noticed): re-register.
            self._register_needed = True
            return False
        # 3. Everyone computes the same assignment from the same sorted inputs.
        members: dict[str, list[str]] = {}
        previous: dict[str, list[TopicPartition]] = {}
        for cid, registration in registrations.items():
            for topic, n in registration.subscription.items():
                for i in range(n):
                    members.setdefault(thread_id(cid, i), []).append(topic)
            previous.update(registration.owned)
        assignment = self._assignor(members, counts, previous)
        mine = {
            tp: i
            for i in range(max(self._subscription.values()))
            for tp in assignment.get(thread_id(self.consumer_id, i), [])
        }
        # 4. Claim all of it at once, or nothing.
        if mine and not self._claim(mine):
            return False
        # 5. Where to start each partition.
        starts = self._starting_offsets(sorted(mine))
        # 6. Fetch.
        with self._lock:
            self._generation += 1
            self._owned = {
                tp: _Owned(stream=mine[tp], start=start, consumed=start, committed=start)
                for tp, start in starts.items()
            }
        self._fetch_wakeup.set()
        self._last_view = view
        self._publish_owned(mine)
        log.info(
            "%s: owns %s", self.consumer_id, [f"{t}-{p}" for t, p in sorted(mine)] or "nothing"
        )
        return True

    def _release(self, why: str) -> None:
        """Stop delivering, commit the consumed offsets, delete our ownership znodes.

        Raises a kazoo error if ZooKeeper cannot be reached: what is left to commit and to
        delete is kept for the next attempt (forgetting it would orphan our znodes, which
        nobody else may delete, and lose the offsets).
        """
        with self._lock:
            self._generation += 1
            owned, self._owned = self._owned, {}
            for tp, o in owned.items():
                self._unreleased[tp] = (o, o.consumed)
        self._fetch_wakeup.set()
        for stream in self._streams.values():
            _drain(stream._queue)  # everything queued is stale now
        session = self._session_id()
        if session is None:
            raise ConnectionLoss(f"cannot release while disconnected ({why})")
        if session != self._owner_session:
            # Our ownership znodes, and with them the right to commit, went with the old
            # session; whoever owns the partitions now resumes from the last commit.
            self._unreleased, self._claimed, self._ownership_uncertain = {}, set(), False
            return
        if self._unreleased and self.config.auto_commit_enable:
            self._commit(self._unreleased)
        self._unreleased = {}
        if self._ownership_uncertain:
            self._delete_orphans()
        if not self._claimed:
            return
        paths = [OwnerZNode.path(self.group, tp) for tp in sorted(self._claimed)]
        self._ownership_uncertain = True  # until the reply arrives
        txn = self._zk.transaction()
        for path in paths:
            txn.delete(path)
        if any(isinstance(r, Exception) for r in txn.commit()):
            for path in paths:  # one was gone already; delete the others one by one
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(path)
        self._ownership_uncertain = False
        log.debug("%s: released %d partitions (%s)", self.consumer_id, len(paths), why)
        self._claimed = set()

    def _delete_orphans(self) -> None:
        """Delete ownership znodes of our session that we do not hold (a lost reply)."""
        session = self._session_id()
        for topic in sorted(self._subscription):
            parent = OwnersTopicZNode.path(self.group, topic)
            try:
                children = self._zk.get_children(parent)
            except NoNodeError:
                continue
            for child in children:
                with contextlib.suppress(NoNodeError):
                    _, stat = self._zk.get(f"{parent}/{child}")
                    if stat.ephemeralOwner == session:
                        log.info("%s: deleting orphan %s/%s", self.consumer_id, topic, child)
                        self._zk.delete(f"{parent}/{child}")
        self._ownership_uncertain = False

    def _claim(self, mine: Mapping[TopicPartition, int]) -> bool:
        session = self._session_id()
        for topic in sorted({tp.topic for tp in mine}):
            self._zk.ensure_path(OwnersTopicZNode.path(self.group, topic))
        order = sorted(mine)
        txn = self._zk.transaction()
        for tp in order:
            owner = OwnerZNode.encode(thread_id(self.consumer_id, mine[tp]))
            txn.create(OwnerZNode.path(self.group, tp), owner, ephemeral=True)
        self._ownership_uncertain = True  # until the reply arrives
        results = txn.commit()
        self._ownership_uncertain = False
        failures = [
            (tp, r)
            for tp, r in zip(order, results, strict=True)
            if isinstance(r, Exception)
            # The ops a failed multi did not run: they report these, not their own outcome.
            and not isinstance(r, RolledBackError | RuntimeInconsistency)
        ]
        if not failures:
            self._owner_session, self._claimed = session, set(mine)
            return True
        for tp, error in failures:
            if not isinstance(error, NodeExistsError):
                raise error
            self.stats.ownership_conflicts += 1
            log.info("%s: %s-%d is still owned by another consumer", self.consumer_id, *tp)
        return False

    def _starting_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's offset in the offset registry, written first where missing."""
        assert self._metadata is not None
        result: dict[TopicPartition, int] = {}
        for tp in partitions:
            path = OffsetZNode.path(self.group, tp)
            try:
                data, _ = self._zk.get(path)
                result[tp] = OffsetZNode.decode(self.group, tp, data)
                continue
            except NoNodeError:
                pass
            low, high = self._metadata.get_watermark_offsets(
                KafkaTopicPartition(tp.topic, tp.partition), timeout=10.0
            )
            offset = int(low if self._reset == "earliest" else high)
            try:
                self._zk.create(path, OffsetZNode.encode(offset), makepath=True)
            except NodeExistsError:  # a previous owner committed after all; trust it
                data, _ = self._zk.get(path)
                offset = OffsetZNode.decode(self.group, tp, data)
            result[tp] = offset
        return result

    def _commit(self, snapshot: Mapping[TopicPartition, tuple[_Owned, int]]) -> None:
        """Write changed offsets, each conditional on our ownership znode still existing."""
        changed = {tp: (o, c) for tp, (o, c) in snapshot.items() if c != o.committed}
        if not changed:
            return
        session = self._session_id()
        if session is None:
            raise ConnectionLoss("cannot commit offsets while disconnected from ZooKeeper")
        if session != self._owner_session:
            log.warning(
                "%s: session changed; not committing %d offsets", self.consumer_id, len(changed)
            )
            return
        txn = self._zk.transaction()
        for tp, (_, consumed) in sorted(changed.items()):
            txn.check(OwnerZNode.path(self.group, tp), 0)
            txn.set_data(OffsetZNode.path(self.group, tp), OffsetZNode.encode(consumed))
        if any(isinstance(r, Exception) for r in txn.commit()):
            # Some ownership znode is gone; commit the rest one by one.
            for tp, (owned, consumed) in sorted(changed.items()):
                txn = self._zk.transaction()
                txn.check(OwnerZNode.path(self.group, tp), 0)
                txn.set_data(OffsetZNode.path(self.group, tp), OffsetZNode.encode(consumed))
                if not any(isinstance(r, Exception) for r in txn.commit()):
                    with self._lock:
                        owned.committed = consumed
                    self.stats.commits += 1
            return
        with self._lock:
            for owned, consumed in changed.values():
                owned.committed = consumed
        self.stats.commits += 1

    # ---------------------------------------------------------------- registry reads/writes

    def _session_id(self) -> int | None:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else None

    def _registration(self) -> ConsumerRegistration:
        return ConsumerRegistration(
            subscription=dict(self._subscription),
            timestamp_ms=int(time.time() * 1000),
            owned=dict(self._published_owned),
        )

    def _register(self) -> None:
        """Create our ephemeral ids znode; wait out one left by a dead session of the same id."""
        path = ConsumerIdZNode.path(self.group, self.consumer_id)
        deadline = time.monotonic() + 2 * self.config.zookeeper_session_timeout_ms / 1000
        while True:
            data = ConsumerIdZNode.encode(self.consumer_id, self._registration())
            try:
                self._zk.create(path, data, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self._session_id():
                    self._zk.set(path, data)
                    break
                if time.monotonic() > deadline:
                    raise
                self._stopping.wait(0.2)
        self._register_needed = False

    def _publish_owned(self, mine: Mapping[TopicPartition, int]) -> None:
        owned: dict[str, list[TopicPartition]] = {}
        for tp, stream in sorted(mine.items()):
            owned.setdefault(thread_id(self.consumer_id, stream), []).append(tp)
        if owned == self._published_owned:
            return
        self._published_owned = owned
        path = ConsumerIdZNode.path(self.group, self.consumer_id)
        try:
            self._zk.set(path, ConsumerIdZNode.encode(self.consumer_id, self._registration()))
        except NoNodeError:  # our session expired meanwhile; the next rebalance re-registers
            self._register_needed = True

    def _read_view(self) -> tuple[dict[str, ConsumerRegistration], dict[str, int], _View]:
        """The registries' content that the assignment depends on, watches re-armed."""
        registrations = self._read_consumers()
        brokers = self._watch_brokers()
        topics = sorted({t for r in registrations.values() for t in r.subscription})
        counts = self._partition_counts(topics)
        members = tuple(
            (c, tuple(sorted(r.subscription.items()))) for c, r in registrations.items()
        )
        return registrations, counts, (members, tuple(sorted(counts.items())), brokers)

    def _read_consumers(self) -> dict[str, ConsumerRegistration]:
        ids_path = ConsumerIdsZNode.path(self.group)
        registrations: dict[str, ConsumerRegistration] = {}
        for cid in sorted(self._zk.get_children(ids_path, watch=self._on_watch)):
            try:
                data, _ = self._zk.get(f"{ids_path}/{cid}")
                registrations[cid] = ConsumerIdZNode.decode(self.group, cid, data)
            except NoNodeError:
                continue  # left meanwhile; the watch we just set fires for it
            except CorruptZnodeError as e:
                # Every consumer reads the same bytes and skips the same member, so the
                # assignment stays the same everywhere; that member gets nothing.
                log.warning("%s: skipping a consumer: %s", self.consumer_id, e)
        return registrations

    def _watch_brokers(self) -> tuple[str, ...] | None:
        # The paper rebalances when brokers come or go. /brokers/ids exists in cluster mode
        # only; the exists-watch fires when it is created, the children watch on changes.
        if self._zk.exists(BrokerIdsZNode.path, watch=self._on_watch) is None:
            return None
        try:
            return tuple(sorted(self._zk.get_children(BrokerIdsZNode.path, watch=self._on_watch)))
        except NoNodeError:
            return None

    def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        """Each topic's partition count: ``/brokers/topics/<t>`` if present, else Metadata.

        An exists-watch is left on every topic znode: it fires when the znode is created,
        changed (partitions added) or deleted, so cluster mode's topic registry triggers a
        rebalance with no change here.
        """
        assert self._metadata is not None
        counts: dict[str, int] = {}
        from_metadata: list[str] = []
        for topic in topics:
            path = TopicZNode.path(topic)
            if self._zk.exists(path, watch=self._on_watch) is None:
                from_metadata.append(topic)
                continue
            try:
                data, _ = self._zk.get(path)
            except NoNodeError:
                from_metadata.append(topic)
                continue
            counts[topic] = len(TopicZNode.decode(topic, data))
        if from_metadata:
            metadata = self._metadata.list_topics(timeout=10.0)
            for topic in from_metadata:
                found = metadata.topics.get(topic)
                ok = found is not None and found.error is None
                counts[topic] = len(found.partitions) if ok else 0
        return counts


def _drain(q: queue.Queue[_Item]) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


def create_java_consumer_connector(
    config: ConsumerConfig | Mapping[str, object],
) -> ZookeeperConsumerConnector:
    """Kafka 0.8's ``Consumer.createJavaConsumerConnector``: a connected, unjoined connector."""
    return ZookeeperConsumerConnector(config)
