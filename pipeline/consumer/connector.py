"""The paper's consumer: a group coordinated through ZooKeeper, with no master (§3.2, Alg. 1).

    with ZookeeperConsumerConnector({"zookeeper.connect": "zk:2181/chroot", "group.id": "g",
                                     "bootstrap.servers": "broker:9092"}) as connector:
        streams = connector.create_message_streams({"clicks": 2})
        for message in streams["clicks"][0]:     # blocks; ends at shutdown()
            ...

This module holds :class:`ZookeeperConsumerConnector`, the group member: it joins and leaves
the group, turns ZooKeeper's watches and session changes into rebalance requests, and runs the
rebalance thread. The parts it wires together live beside it::

    config.py     ConsumerConfig: the settings, under Kafka 0.8's key names
    registry.py   the consumer registries' znodes (the brokers' are in broker/cluster/zk_data)
    assignors.py  range, roundrobin, sticky: pure functions
    rebalance.py  Rebalancer: Algorithm 1, ownership and offset commits (all ZooKeeper writes)
    owned.py      OwnedPartitions: what we own now, fenced by a generation
    fetcher.py    Fetcher: the thread that fetches the owned partitions
    stream.py     KafkaStream, MessageAndMetadata: what users iterate

**Registries** (Kafka 0.8's layout)::

    /consumers/<group>/ids/<consumer id>      ephemeral   subscription {topic: streams}
    /consumers/<group>/owners/<topic>/<p>     ephemeral   owning thread id "<consumer id>-<i>"
    /consumers/<group>/offsets/<topic>/<p>    persistent  next offset to consume
    /brokers/ids, /brokers/topics/<topic>     watched when present (cluster mode)

**Members.** As in Kafka 0.8, the assignor deals partitions to consumer *threads*: a consumer
that reads topic T with n streams is n members ``<consumer id>-0`` .. ``-<n-1>`` subscribed to
T, and the partitions a member gets are delivered by that stream (range by default, as the
paper).

**When a rebalance runs**: on joining, and whenever a watch fires on the consumer registry
(children of ``ids``), the broker registry or a subscribed topic's ``/brokers/topics`` znode,
or when the partition counts in the broker's metadata change (standalone brokers do not
register in ZooKeeper, so their counts are polled every
``topic.metadata.refresh.interval.ms``); with the sticky assignors, also when another member
publishes a new ``owned`` list (a data watch: the view is re-read, and a rebalance runs only if
it changed). A round that fails all its attempts is retried as a
whole after a backoff; if the first round fails, :meth:`create_message_streams
<ZookeeperConsumerConnector.create_message_streams>` raises
:class:`ConsumerRebalanceFailedError`.

**ZooKeeper trouble.** A lost *connection* keeps the session and our znodes, but kazoo drops
its watches: once reconnected, the consumer re-reads the registries (re-arming the watches)
and rebalances only if members, subscriptions, partition counts or brokers changed meanwhile.
A lost *session* deletes our znodes: the consumer stops delivering at once (others may own
our partitions already), registers again under the new session and rebalances.

**Delivery.** A message counts as consumed when a stream's ``__next__`` returns it; the offset
committed is then the next one. A rebalance neither repeats nor skips messages (the generation
fence of ``owned.py``). A consumer that dies without ``shutdown()`` repeats, at its successor,
what it consumed after its last commit (the paper's §3.3).

**Threads.** kazoo's threads run the watch callbacks, which only raise a flag; one rebalance
thread runs rebalances (serialised; requests arriving meanwhile coalesce into one more) and
periodic commits; one fetcher thread owns the confluent-kafka ``Consumer`` (``assign()`` only,
offsets live in ZooKeeper) and feeds one bounded queue per (topic, stream); a second handle
answers the rebalance thread's Metadata and ListOffsets requests. ``shutdown()`` stops the
threads, commits, deletes our ephemeral znodes and closes both clients; the streams then end.
Lock order: the rebalancer's lock (ZooKeeper writes) before the owned table's (delivery); the
connector's condition (request flags) is never held while taking either.
``ZookeeperConsumerConnector`` is thread-safe; each ``KafkaStream`` is meant to be read by one
thread at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import overload

from confluent_kafka import Consumer, KafkaException
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType, WatchedEvent

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.config import ConsumerConfig, ConsumerConfigError
from sluice.pipeline.consumer.fetcher import Fetcher
from sluice.pipeline.consumer.owned import OwnedPartitions
from sluice.pipeline.consumer.rebalance import (
    RETRIABLE,
    ConsumerRebalanceFailedError,
    ConsumerStats,
    Rebalancer,
    backoff,
)
from sluice.pipeline.consumer.stream import (
    ConsumerTimeoutError,
    ConsumerTimeoutException,
    KafkaStream,
    MessageAndMetadata,
)

# The names below were all defined here before the package was split; they stay importable
# from here (the README and the tests do).
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
        self._owned = OwnedPartitions()

        self._cond = threading.Condition()  # guards the request flags and _closing
        self._rebalance_requested = False
        self._recheck_requested = False
        self._closing = False
        self._stopping = threading.Event()  # wakes backoff sleeps and the fetcher
        self._closed = threading.Event()  # set once shutdown() has finished
        self._first_rebalance = threading.Event()
        self._first_error: BaseException | None = None
        self._retry_round_at: float | None = None  # when to retry a failed round

        # Set by create_message_streams (once).
        self._subscription: dict[str, int] = {}
        self._streams: dict[tuple[str, int], KafkaStream] = {}
        self._clients: list[Consumer] = []
        self._rebalancer: Rebalancer | None = None
        self._fetcher: Fetcher | None = None
        self._threads: list[threading.Thread] = []

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

    def commit_offsets(self) -> None:
        """Write the consumed offsets of the owned partitions to the offset registry now."""
        if self._rebalancer is not None:
            self._rebalancer.commit_owned()

    def owned_partitions(self) -> dict[TopicPartition, int]:
        """The partitions this consumer owns now, each with its stream index."""
        return self._owned.streams()

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
            if self._rebalancer is not None:
                self._rebalancer.leave()
        except RETRIABLE as e:  # ZooKeeper is gone: the ephemerals go with our session
            log.warning("%s: leaving the group cleanly failed: %r", self.consumer_id, e)
        finally:
            self._zk.stop()
            self._zk.close()
            for client in self._clients:
                client.close()
            for stream in self._streams.values():
                stream.end()
            self._closed.set()

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # ---------------------------------------------------------------- joining

    def _join(self, counts: Mapping[str, int]) -> None:
        for topic, n in sorted(counts.items()):
            for i in range(n):
                self._streams[(topic, i)] = KafkaStream(
                    topic,
                    i,
                    self._owned,
                    consumer_id=self.consumer_id,
                    capacity=self.config.queued_max_messages,
                    timeout_ms=self.config.consumer_timeout_ms,
                )
        # Two librdkafka handles: the fetcher thread alone uses the first (assign, consume),
        # the rebalance thread the second (Metadata, ListOffsets); see Rebalancer.
        kafka = Consumer(self.config.kafka_settings("fetcher", log))
        self._clients.append(kafka)
        metadata = Consumer(self.config.kafka_settings("metadata", log))
        self._clients.append(metadata)
        # Connect and learn the leaders now, before the fetcher thread owns the handle: the
        # first assign() then fetches at once instead of after a metadata round of ~0.5 s.
        try:
            kafka.list_topics(timeout=10.0)
        except KafkaException as e:  # only a warm-up: the fetcher retries on its own
            log.warning("%s: no broker metadata yet: %s", self.consumer_id, e)
        self._fetcher = Fetcher(
            kafka,
            self._owned,
            self._streams,
            consumer_id=self.consumer_id,
            wait_ms=self.config.fetch_wait_max_ms,
            stopping=self._stopping,
        )
        self._rebalancer = Rebalancer(
            self._zk,
            self.config,
            counts,
            self._owned,
            self._fetcher,
            metadata,
            self.stats,
            stopping=self._stopping,
            watch=self._on_watch,
        )
        self._rebalancer.register()
        for name, target in (("rebalance", self._rebalance_loop), ("fetcher", self._fetcher.run)):
            thread = threading.Thread(
                target=target, name=f"sluice-zk-{name}-{self.consumer_id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        self._request_rebalance("startup")
        self._first_rebalance.wait()
        if self._first_error is not None:
            raise self._first_error

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

    def _on_watch(self, event: WatchedEvent) -> None:
        # On kazoo's callback thread: never block here, just ask the rebalance thread.
        if event.type == EventType.NONE:
            # kazoo drops every watch when the connection drops (it fires them with NONE);
            # the state listener asks for a re-check once we are connected again.
            return
        if event.type == EventType.CHANGED:
            # A member's registration data (sticky assignors: its published "owned" list):
            # rebalance only if the view the assignment depends on changed.
            self._request_recheck()
            return
        self._request_rebalance(f"{event.type} {event.path}")

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self.stats.sessions_lost += 1
            # The session expired: our ephemeral znodes are gone and others may own our
            # partitions already. Stop handing out messages now; re-register and rebalance.
            self._owned.revoke()  # nothing to commit: the right to commit went with it
            if self._fetcher is not None:
                self._fetcher.wake()
            if self._rebalancer is not None:
                self._rebalancer.register_needed = True
            self._request_rebalance("session lost")
        elif state == KazooState.CONNECTED:
            # Back after a disconnection: the session (and our znodes) survived but kazoo
            # dropped our watches. Re-arm them, and rebalance only if something changed.
            self._request_recheck()

    def _rebalance_loop(self) -> None:
        rebalancer = self._rebalancer
        assert rebalancer is not None  # the thread starts after _join made it
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
                if requested or (recheck and rebalancer.view_changed()):
                    self._rebalance_round(rebalancer)
                if now >= next_commit:
                    next_commit = now + interval
                    rebalancer.commit_owned()
            except RETRIABLE as e:
                log.warning("%s: %r (will retry)", self.consumer_id, e)
                if recheck:  # e.g. still disconnected: look again a little later
                    self._retry_round_at = now + backoff(self.config.rebalance_backoff_ms, 0)
            except Exception:  # never let the thread die: the group would lose a member
                log.exception("%s: unexpected error in the rebalance thread", self.consumer_id)

    def _rebalance_round(self, rebalancer: Rebalancer) -> None:
        """One round of attempts; a failed round is retried after a backoff, and fails the
        join if it was the first."""
        try:
            rebalancer.synced_rebalance()
        except ConsumerRebalanceFailedError as e:
            if not self._first_rebalance.is_set():
                self._first_error = e
                self._first_rebalance.set()
            retries = self.config.rebalance_max_retries
            self._retry_round_at = time.monotonic() + backoff(
                self.config.rebalance_backoff_ms, retries
            )
        else:
            self._first_rebalance.set()


def create_java_consumer_connector(
    config: ConsumerConfig | Mapping[str, object],
) -> ZookeeperConsumerConnector:
    """Kafka 0.8's ``Consumer.createJavaConsumerConnector``: a connected, unjoined connector."""
    return ZookeeperConsumerConnector(config)
