"""The replicated cluster as users run it: three broker processes, one ZooKeeper, every topic
with replication factor 3 and ``min.insync.replicas=2``, measured from outside by
confluent-kafka (librdkafka) clients over loopback.

The cluster is :class:`sluice.testing.cluster.BrokerCluster` (``python -m sluice broker start``
three times, each a process of its own, with the test suite's timeouts: ZooKeeper session
``zookeeper.session.timeout.ms`` and ``replica.lag.time.max.ms`` as in ``CLUSTER_OVERRIDES``)
on a ZooKeeper of its own (:class:`sluice.testing.zookeeper.ZooKeeperServer`, Debian's). Every
message is ``VALUE`` (100) bytes. What is measured, each row in ``build/bench/results.json``:

* ``cluster_latency`` — one message at a time to one partition (produce, then wait for its
  acknowledgement), ``acks=all`` and ``acks=1``: p50 and p99 of the send-to-ack times.
* ``cluster_throughput`` — ``acks=all`` against ``acks=1`` in the same run, each way of batching
  of the peers benchmark (``bench.peers.kafka``: batch 1, batch 50, librdkafka's default
  batching) on a new one-partition topic; ``THROUGHPUT_RUNS`` pairs taken in turns, msg/s and
  the ratio all/1 as the median of the pairs (every run kept).
* ``cluster_partitions`` — one message to every partition of a topic of 300, 1,500 and 4,000
  partitions (quick mode times one round after the first at 4,000, whose topics' creation
  alone once took 101 s; in topics of at most ``MAX_PARTITIONS_PER_TOPIC``,
  1,000 — the benchmark's topic size, kept so the figures compare with earlier runs; the
  broker has no such limit), ``acks=all``, the round timed until every
  message is acknowledged; the first round (connections, metadata) apart from the median of the
  rest; the three brokers' CPU time (user + system, from ``/proc``) per round after the first,
  which the machine's load changes far less than the round's time; and the topics' creation:
  one CreateTopics until every broker shows every partition with a leader and three replicas in
  sync.
* ``cluster_transactions`` — transactions per second at 1 and 100 batches per transaction (a
  batch is ``BATCH`` messages produced and flushed), and the median time of a transaction of
  one message (begin, produce, commit).
* ``cluster_rebalance`` — two consumers of a six-partition topic settled in a group (range
  assignor, librdkafka's defaults otherwise); a third subscribes; the time from its
  ``subscribe()`` until all three hold an assignment given after it (their ``on_assign``),
  covering every partition once. The third then leaves, the two settle again, and it repeats.
* ``cluster_failover`` — every one of those 300 and 1,500 partitions has taken an ``acks=all``
  write; the controller is killed with SIGKILL; from that moment, every partition not yet
  acknowledged is written again (one message each, librdkafka's own retries within
  ``message.timeout.ms``) until each has acknowledged a write produced after the kill: the time
  of the last acknowledgement. With the test suite's 4 s ZooKeeper session (the clusters
  above), and at 1,500 partitions again on a cluster of its own with the issue's 18 s session
  (``LONG_SESSION_MS``, Kafka's default): the controller's death is noticed only when its
  session expires, so the session bounds the failover from below.

Bounds: every loop stops at its count or its time limit (``Sizes.limit``, seconds per
measurement), whichever comes first, and is never waited for beyond it. The latencies and the
rounds keep what finished in time, with a note of how many; any other measurement that hits its
limit is recorded as NaN with a note "did not finish in N s" (and how far it got).

The first cluster runs everything at 300 partitions; each larger partition count gets a
cluster of its own, so a count is measured with no other large topic beside it.

With ``SLUICE_BENCH_PROFILE=1`` the ``acks=all`` latency load runs once more, unmeasured, while
py-spy samples the partition's leader (``profile_latency``; ``bench.bench_profile``'s summary in
``build/bench/profiles/cluster-acks-all-latency.txt``).

Not thread-safe; one run at a time (it starts its own ZooKeeper and brokers on free ports).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench import bench_profile, proc
from bench.bench_broker import load_average
from bench.peers.kafka import PRODUCER, SETTINGS
from bench.results import Results
from sluice.broker.server.topic_admin import MAX_PARTITIONS_PER_TOPIC
from sluice.testing.cluster import CLUSTER_OVERRIDES, METADATA_ERRORS, QUIET, BrokerCluster
from sluice.testing.zookeeper import ZooKeeperServer, new_chroot

VALUE = 100  # bytes per message
BATCH = 10  # messages per transactional batch (produced, then flushed)
REPLICAS = 3
# The cluster's own settings on top of the test suite's (CLUSTER_OVERRIDES).
OVERRIDES = {"min.insync.replicas": "2", "default.replication.factor": str(REPLICAS),
             "num.partitions": "1"}  # fmt: skip
REBALANCE_PARTITIONS = 6
CONSUMER: dict[str, Any] = {"partition.assignment.strategy": "range",
                            "enable.auto.commit": False, "auto.offset.reset": "latest"}  # fmt: skip
THROUGHPUT_RUNS = 3  # pairs of acks=all and acks=1 runs per way of batching
FAILOVER_MESSAGE_TIMEOUT_MS = 5_000  # a write unacknowledged this long is written again
START_TIMEOUT = 60.0  # seconds for three brokers to register under one controller
# The ZooKeeper session of the failover setting (Kafka's default, 18 s); the other
# clusters have the test suite's 4 s (CLUSTER_OVERRIDES).
LONG_SESSION_MS = 18_000
# SLUICE_BENCH_PROFILE=1: after the measured acks=all latency run, py-spy samples the
# partition's leader for PROFILE_SECONDS of the same load (no rows; bench_profile's text in
# build/bench/profiles/cluster-acks-all-latency.txt).
PROFILE_SECONDS = 15.0
SLUG = "cluster-acks-all-latency"


@dataclass(frozen=True)
class Sizes:
    """Counts and bounds of one mode (see the module docstring)."""

    latency_messages: int
    throughput_messages: dict[str, int]  # per way of batching (bench.peers.kafka.SETTINGS)
    partitions: tuple[int, ...]  # the first shares the cluster of the client measurements
    failover: tuple[int, ...]  # partition counts whose cluster loses its controller
    rounds: int  # rounds to every partition, after the first
    transactions: dict[int, int] = field(default_factory=dict)  # batches per txn -> txns
    transaction_latency: int = 30  # one-message transactions timed
    joins: int = 3
    limit: float = 60.0  # seconds per measurement
    # partition counts whose failover is measured again with a LONG_SESSION_MS session
    long_session_failover: tuple[int, ...] = ()
    # rounds after the first at these partition counts, instead of ``rounds``
    rounds_at: dict[int, int] = field(default_factory=dict)


# bench.report's SETUP quotes these counts: change both together.
# Quick mode times 4,000 partitions with one round after the first: the cluster, the topics'
# creation and two rounds add one to two minutes to the group's ~4.
QUICK = Sizes(1_000, {"batch 1": 5_000, "batch 50": 50_000, "default batching": 100_000},
              (300, 1_500, 4_000), (300, 1_500), 5, {1: 100, 100: 5}, 100, 3, 60.0,
              (1_500,), {4_000: 1})  # fmt: skip
FULL = Sizes(10_000, {"batch 1": 20_000, "batch 50": 500_000, "default batching": 1_000_000},
             (300, 1_500, 4_000), (300, 1_500), 10, {1: 500, 100: 20}, 500, 5, 300.0,
             (1_500,))  # fmt: skip


class DidNotFinish(Exception):
    """A measurement reached its time limit; ``done`` says how far it got."""

    def __init__(self, what: str, seconds: float, done: str = "") -> None:
        self.what, self.seconds, self.done = what, seconds, done
        super().__init__(f"{what}: did not finish in {seconds:.0f} s" + (f" ({done})" if done
                                                                          else ""))  # fmt: skip


class Deadline:
    """A time limit of ``seconds`` from now, for one measurement."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.0)

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def check(self, done: str = "") -> None:
        """Raise :class:`DidNotFinish` once the limit has passed."""
        if self.expired():
            raise DidNotFinish(self.what, self.seconds, done)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile by nearest rank (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


def median(values: list[float]) -> float:
    return percentile(values, 50)


# -- the cluster ---------------------------------------------------------------------------


@contextmanager
def started_cluster(
    work: Path, zookeeper: ZooKeeperServer, overrides: dict[str, str] | None = None
) -> Iterator[BrokerCluster]:
    """Three brokers (``overrides``, else ``OVERRIDES``) under a fresh chroot of
    ``zookeeper``; stopped after."""
    connect = zookeeper.connect_string + new_chroot(zookeeper, "sluice-bench")
    cluster = BrokerCluster(work, connect, REPLICAS, overrides or OVERRIDES)
    cluster.start(START_TIMEOUT)
    try:
        yield cluster
    finally:
        cluster.stop()


Partition = tuple[str, int]  # (topic, partition)


def spread(prefix: str, partitions: int) -> dict[str, int]:
    """``partitions`` over topics ``<prefix>-0``, ``<prefix>-1``, … of at most the broker's
    ``MAX_PARTITIONS_PER_TOPIC`` each (the benchmark's topic size; the broker, like Kafka,
    has no such limit)."""
    size = MAX_PARTITIONS_PER_TOPIC
    return {f"{prefix}-{i}": min(size, partitions - start)
            for i, start in enumerate(range(0, partitions, size))}  # fmt: skip


def every_partition(topics: dict[str, int]) -> list[Partition]:
    return [(topic, i) for topic, count in topics.items() for i in range(count)]


def create_topic(cluster: BrokerCluster, name: str, partitions: int, limit: float) -> float:
    """:func:`create_topics` of one topic."""
    return create_topics(cluster, {name: partitions}, limit)


def create_topics(cluster: BrokerCluster, topics: dict[str, int], limit: float) -> float:
    """Seconds from one CreateTopics (``topics``: name -> partitions) until every running broker
    shows every partition with a leader and ``REPLICAS`` replicas in sync;
    :class:`DidNotFinish` after ``limit``."""
    total = sum(topics.values())
    deadline = Deadline(f"creating {', '.join(topics)} ({total:,} partitions)", limit)
    started = time.perf_counter()
    # The broker answers once every new partition has a leader: at 4,000 partitions on a
    # loaded machine, longer than librdkafka's default request timeout (60 s).
    futures = cluster.admin().create_topics(
        [NewTopic(name, count, REPLICAS) for name, count in topics.items()],
        operation_timeout=limit, request_timeout=limit + 5)  # fmt: skip
    for future in futures.values():
        try:
            future.result(timeout=deadline.left())
        except (TimeoutError, KafkaException) as e:
            timed_out = (isinstance(e, TimeoutError) or e.args[0].code() in
                         (KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT))  # fmt: skip
            if not timed_out:
                raise
            raise DidNotFinish(deadline.what, limit, "CreateTopics unanswered") from None
    while (missing := _not_in_sync(cluster, topics)) > 0:
        deadline.check(f"{missing:,} partitions without a leader and a full ISR")
        time.sleep(0.2)
    return time.perf_counter() - started


def _not_in_sync(cluster: BrokerCluster, topics: dict[str, int]) -> int:
    """Partitions of ``topics`` some running broker shows without a leader or a full ISR (all
    of them when a Metadata request fails: a broker may be between states)."""
    total = sum(topics.values())
    worst = 0
    try:
        for _, md in cluster.views():
            ready = 0
            for name in topics:
                t = md.topics.get(name)
                if t is not None and t.error is None:
                    ready += sum(1 for p in t.partitions.values()
                                 if p.leader >= 0 and len(p.isrs) == REPLICAS)  # fmt: skip
            worst = max(worst, total - ready)
    except METADATA_ERRORS:
        return total
    return worst


def producer(cluster: BrokerCluster, acks: str, extra: dict[str, Any]) -> Producer:
    """A producer with the peers benchmark's settings (``PRODUCER``), ``acks`` and ``extra``."""
    return Producer({"bootstrap.servers": cluster.bootstrap, **PRODUCER, **QUIET, "acks": acks,
                     **extra})  # fmt: skip


class Acks:
    """Delivery reports of one producer: acknowledged partitions with their times, failures."""

    def __init__(self) -> None:
        self.acked: dict[Partition, float] = {}
        self.count = 0
        self.errors: list[str] = []

    def __call__(self, err: Any, msg: Any) -> None:
        if err is None:
            self.count += 1
            self.acked[msg.topic(), msg.partition()] = time.perf_counter()
        else:
            self.errors.append(str(err))

    def wait(self, p: Producer, expected: int, deadline: Deadline) -> None:
        """Serve ``p``'s callbacks until ``expected`` reports (acks and errors) came."""
        while self.count + len(self.errors) < expected:
            deadline.check(f"{self.count:,} of {expected:,} acknowledged")
            p.poll(min(0.05, deadline.left()))


def send(p: Producer, topic: str, partition: int, on_delivery: Acks) -> None:
    """One ``VALUE``-byte message, waiting for room in the producer's queue."""
    while True:
        try:
            p.produce(topic, b"x" * VALUE, partition=partition, on_delivery=on_delivery)
            return
        except BufferError:
            p.poll(0.01)


# -- measurements --------------------------------------------------------------------------


def latencies(cluster: BrokerCluster, topic: str, acks: str, count: int,
              limit: float) -> list[float]:  # fmt: skip
    """Milliseconds from produce to acknowledgement of ``count`` messages, one at a time, after
    one warm-up message; fewer when ``limit`` seconds pass first."""
    p = producer(cluster, acks, SETTINGS["batch 1"])
    deadline = Deadline(f"latency, acks={acks}", limit)
    warm = Acks()
    send(p, topic, 0, warm)
    warm.wait(p, 1, deadline)
    out: list[float] = []
    while len(out) < count and not deadline.expired():
        acks_ = Acks()
        started = time.perf_counter()
        send(p, topic, 0, acks_)
        try:
            acks_.wait(p, 1, deadline)
        except DidNotFinish:
            break
        if acks_.errors:
            raise RuntimeError(f"{topic}: a message failed: {acks_.errors[0]}")
        out.append((time.perf_counter() - started) * 1000)
    return out


def throughput(cluster: BrokerCluster, topic: str, acks: str, way: str, count: int,
               limit: float) -> float:  # fmt: skip
    """msg/s of ``count`` messages written the ``way`` of ``SETTINGS`` until every one is
    acknowledged; :class:`DidNotFinish` after ``limit`` seconds."""
    p = producer(cluster, acks, SETTINGS[way])
    deadline = Deadline(f"throughput, acks={acks}, {way}", limit)
    warm = Acks()
    send(p, topic, 0, warm)
    warm.wait(p, 1, deadline)
    reports = Acks()
    started = time.perf_counter()
    for i in range(count):
        send(p, topic, 0, reports)
        if i % 1000 == 0:
            deadline.check(f"{i:,} of {count:,} sent")
            p.poll(0)
    reports.wait(p, count, deadline)
    if reports.errors:
        raise RuntimeError(f"{topic}: {len(reports.errors)} messages failed: {reports.errors[0]}")
    return count / (time.perf_counter() - started)


def cpu_seconds(cluster: BrokerCluster) -> float:
    """User + system CPU seconds the running brokers have used (``/proc/<pid>/stat``)."""
    total = 0.0
    for b in cluster.brokers.values():
        if b.running and b.pid is not None:
            total += proc.cpu_seconds(b.pid)
    return total


def rounds(cluster: BrokerCluster, targets: list[Partition], count: int,
           limit: float, cpu: list[float] | None = None) -> list[float]:  # fmt: skip
    """Milliseconds of ``count + 1`` rounds of one ``acks=all`` message to every partition of
    ``targets`` (default batching), each until every message is acknowledged; the first is the
    warm-up. Fewer when ``limit`` seconds pass first; :class:`DidNotFinish` when not even the
    first round finished. ``cpu``: where the brokers' CPU milliseconds of each round go."""
    p = producer(cluster, "all", SETTINGS["default batching"])
    deadline = Deadline(f"one message to each of {len(targets):,} partitions", limit)
    out: list[float] = []
    for _ in range(count + 1):
        reports = Acks()
        started, used = time.perf_counter(), cpu_seconds(cluster)
        for topic, i in targets:
            send(p, topic, i, reports)
        try:
            reports.wait(p, len(targets), deadline)
        except DidNotFinish:
            if not out:
                raise
            break
        if reports.errors:
            raise RuntimeError(f"{len(reports.errors)} messages failed: {reports.errors[0]}")
        out.append((time.perf_counter() - started) * 1000)
        if cpu is not None:
            cpu.append((cpu_seconds(cluster) - used) * 1000)
    return out


def transactions_per_second(cluster: BrokerCluster, topic: str, per_txn: int, txns: int,
                            limit: float) -> float:  # fmt: skip
    """Transactions/s of ``txns`` transactions of ``per_txn`` batches of ``BATCH`` messages,
    each batch flushed; :class:`DidNotFinish` after ``limit`` seconds."""
    deadline = Deadline(f"transactions of {per_txn} batches", limit)
    p = _transactional(cluster, f"bench-cluster-{per_txn}", deadline)
    started = time.perf_counter()
    for t in range(txns):
        deadline.check(f"{t} of {txns} transactions committed")
        p.begin_transaction()
        for _ in range(per_txn):
            for _ in range(BATCH):
                send(p, topic, 0, Acks())
            if p.flush(deadline.left()):
                raise DidNotFinish(deadline.what, limit, f"{t} of {txns} committed")
        _commit(p, deadline, f"{t} of {txns} committed")
    return txns / (time.perf_counter() - started)


def transaction_latencies(cluster: BrokerCluster, topic: str, count: int,
                          limit: float) -> list[float]:  # fmt: skip
    """Milliseconds of ``count`` transactions of one message (begin, produce, commit), after a
    warm-up one; fewer when ``limit`` seconds pass first."""
    deadline = Deadline("one-message transactions", limit)
    p = _transactional(cluster, "bench-cluster-latency", deadline)
    out: list[float] = []
    for i in range(count + 1):
        if deadline.expired():
            break
        started = time.perf_counter()
        p.begin_transaction()
        send(p, topic, 0, Acks())
        try:
            _commit(p, deadline, f"{len(out)} timed")
        except DidNotFinish:
            break
        if i > 0:
            out.append((time.perf_counter() - started) * 1000)
    return out


def _commit(p: Producer, deadline: Deadline, done: str) -> None:
    """Commit the open transaction within what is left of ``deadline``; a commit that times
    out is :class:`DidNotFinish`."""
    try:
        p.commit_transaction(max(deadline.left(), 0.001))
    except KafkaException:
        if deadline.expired():
            raise DidNotFinish(deadline.what, deadline.seconds, done) from None
        raise


def _transactional(cluster: BrokerCluster, txn_id: str, deadline: Deadline) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, **QUIET, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0,
                  "transactional.id": txn_id})  # fmt: skip
    p.init_transactions(max(deadline.left(), 0.001))
    return p


class Member:
    """One consumer of the rebalance measurement: its current partitions and when it was last
    given them (``on_assign``)."""

    def __init__(self, cluster: BrokerCluster, topic: str, group: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                  **QUIET, **CONSUMER})  # fmt: skip
        self.partitions: set[int] = set()
        self.assigned_at = -math.inf
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _c: Any, partitions: list[Any]) -> None:
        self.partitions = {tp.partition for tp in partitions}
        self.assigned_at = time.perf_counter()

    def _revoke(self, _c: Any, _partitions: list[Any]) -> None:
        self.partitions = set()


def settle(members: list[Member], since: float, partitions: int, deadline: Deadline) -> float:
    """Poll every member until each was given a non-empty assignment after ``since`` and
    together they hold every partition once; the time of the last assignment."""

    def settled() -> bool:
        held = [p for m in members for p in m.partitions]
        return (all(m.assigned_at > since and m.partitions for m in members)
                and sorted(held) == list(range(partitions)))  # fmt: skip

    while not settled():
        deadline.check(f"{sum(m.assigned_at > since for m in members)} of {len(members)} "
                       "members assigned")  # fmt: skip
        for m in members:
            m.consumer.poll(0.02)
    return max(m.assigned_at for m in members)


def rebalances(cluster: BrokerCluster, topic: str, joins: int, limit: float) -> list[float]:
    """Seconds from a third consumer's ``subscribe()`` until all three are assigned, ``joins``
    times (the third leaving and the two settling again in between)."""
    deadline = Deadline("rebalance on a join", limit)
    group = "bench-cluster-rebalance"
    members = [Member(cluster, topic, group) for _ in range(2)]
    out = []
    try:
        settle(members, -math.inf, REBALANCE_PARTITIONS, deadline)
        for _ in range(joins):
            joined = time.perf_counter()
            third = Member(cluster, topic, group)
            try:
                last = settle([*members, third], joined, REBALANCE_PARTITIONS, deadline)
                out.append(last - joined)
            finally:
                left = time.perf_counter()
                third.consumer.close()
            settle(members, left, REBALANCE_PARTITIONS, deadline)
    finally:
        for m in members:
            m.consumer.close()
    return out


def failover(cluster: BrokerCluster, targets: list[Partition], limit: float) -> tuple[int, float]:
    """(the controller killed, seconds from its ``kill -9`` until every partition of
    ``targets`` acknowledged an ``acks=all`` write produced after it); :class:`DidNotFinish`
    after ``limit`` seconds."""
    p = producer(cluster, "all", {**SETTINGS["default batching"],
                                  "message.timeout.ms": FAILOVER_MESSAGE_TIMEOUT_MS})  # fmt: skip
    before = Acks()
    for topic, i in targets:
        send(p, topic, i, before)
    before.wait(p, len(targets), Deadline("every partition written before the kill", limit))
    controller = cluster.controller_id()
    cluster.kill(controller)
    killed = time.perf_counter()
    deadline = Deadline(f"failover of {len(targets):,} partitions", limit)
    pending = set(targets)
    last = killed
    while pending:
        reports = Acks()
        for topic, i in sorted(pending):
            send(p, topic, i, reports)
        try:
            reports.wait(p, len(pending), deadline)
        except DidNotFinish:
            refusing = len(pending) - len(reports.acked)
            raise DidNotFinish(deadline.what, limit, f"{refusing:,} of {len(targets):,} "
                               "partitions still refusing") from None  # fmt: skip
        pending -= set(reports.acked)
        last = max([last, *reports.acked.values()])
    return controller, last - killed


def profile_rounds(cluster: BrokerCluster, targets: list[Partition], seconds: float) -> None:
    """py-spy on the leader of ``targets``' first partition while rounds of one ``acks=all``
    message to every partition of ``targets`` run for ``seconds`` (plus a second each side;
    each broker leads about a third of them); the summary in ``PROFILES``."""
    topic, first = targets[0]
    leader = cluster.partition(topic, first).leader
    pid = cluster.brokers[leader].pid
    assert pid is not None
    timed: list[float] = []

    def load() -> None:
        deadline = time.monotonic() + seconds + 2
        while time.monotonic() < deadline:
            try:
                timed.extend(rounds(cluster, targets, 0, max(deadline - time.monotonic(), 1)))
            except DidNotFinish:
                return

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    time.sleep(1)
    slug = f"cluster-rounds-{len(targets)}"
    bench_profile.PROFILES.mkdir(parents=True, exist_ok=True)
    profile = bench_profile.record(pid, seconds, bench_profile.PROFILES / f"{slug}.folded")
    thread.join(seconds + 120)
    reached = (f"{len(timed):,} rounds, median {median(timed):.0f} ms under the profiler, "
               f"load {load_average()}")  # fmt: skip
    what = (f"broker {leader}, leading about a third, under rounds of one acks=all message to "
            f"each of {len(targets):,} partitions (3 brokers, RF 3)")  # fmt: skip
    text = bench_profile.summary(slug, profile, what, reached)
    (bench_profile.PROFILES / f"{slug}.txt").write_text(text)
    print("\n".join("    " + line for line in text.splitlines()[:3]), flush=True)


def profile_latency(cluster: BrokerCluster, topic: str, seconds: float) -> None:
    """py-spy on ``topic``'s leader while one ``acks=all`` message at a time is written for
    ``seconds`` (plus a second each side); the summary in ``PROFILES``."""
    leader = cluster.partition(topic, 0).leader
    pid = cluster.brokers[leader].pid
    assert pid is not None
    timed: list[float] = []
    load = threading.Thread(target=lambda: timed.extend(latencies(
        cluster, topic, "all", 10**9, seconds + 2)), daemon=True)  # fmt: skip
    load.start()
    time.sleep(1)
    bench_profile.PROFILES.mkdir(parents=True, exist_ok=True)
    profile = bench_profile.record(pid, seconds, bench_profile.PROFILES / f"{SLUG}.folded")
    load.join(seconds + 10)
    reached = (f"{len(timed):,} messages, p50 {percentile(timed, 50):.2f} ms, p99 "
               f"{percentile(timed, 99):.2f} ms under the profiler")  # fmt: skip
    what = f"broker {leader}, the leader, under acks=all one message at a time (3 brokers, RF 3)"
    text = bench_profile.summary(SLUG, profile, what, reached + f", load {load_average()}")
    (bench_profile.PROFILES / f"{SLUG}.txt").write_text(text)
    print("\n".join("    " + line for line in text.splitlines()[:3]), flush=True)


# -- the group -----------------------------------------------------------------------------


def measure_clients(results: Results, cluster: BrokerCluster, sizes: Sizes) -> None:
    """Latency, throughput, transactions and the rebalance, on one cluster."""
    limit = sizes.limit
    for acks in ("all", "1"):
        topic = f"latency-acks-{acks}"
        create_topic(cluster, topic, 1, limit)
        ms = latencies(cluster, topic, acks, sizes.latency_messages, limit)
        results.add("cluster_latency", f"acks={acks}", "p50", percentile(ms, 50), "ms")
        results.add("cluster_latency", f"acks={acks}", "p99", percentile(ms, 99), "ms")
        if acks == "all" and os.environ.get("SLUICE_BENCH_PROFILE") == "1":
            profile_latency(cluster, topic, PROFILE_SECONDS)
        if len(ms) < sizes.latency_messages:
            results.note("cluster_latency", f"acks={acks}: did not finish in {limit:.0f} s "
                         f"({len(ms)} of {sizes.latency_messages} messages timed)")  # fmt: skip
    for way, count in sizes.throughput_messages.items():
        # acks=all and acks=1 in turns, THROUGHPUT_RUNS times: one pair on a loaded 2-core
        # machine put the ratio anywhere from 0.1 to 0.9; the median of the pairs' ratios is
        # what the row shows, every pair kept.
        rates: dict[str, list[float]] = {"all": [], "1": []}
        for turn in range(THROUGHPUT_RUNS):
            for acks in ("all", "1"):
                topic = f"throughput-{way.replace(' ', '-')}-acks-{acks}-{turn}"
                create_topic(cluster, topic, 1, limit)
                try:
                    rates[acks].append(throughput(cluster, topic, acks, way, count, limit))
                except DidNotFinish as e:
                    rates[acks].append(math.nan)
                    results.note("cluster_throughput", str(e))
        for acks in ("all", "1"):
            results.add_runs("cluster_throughput", f"acks={acks}", way, rates[acks], "msg/s")
        ratios = [a / b for a, b in zip(rates["all"], rates["1"], strict=True)]
        results.add_runs("cluster_throughput", "acks=all/acks=1", way, ratios, "ratio")
    create_topic(cluster, "transactions", 1, limit)
    for per_txn, txns in sizes.transactions.items():
        name = f"{per_txn} batch{'es' if per_txn > 1 else ''} per transaction"
        try:
            rate = transactions_per_second(cluster, "transactions", per_txn, txns, limit)
        except DidNotFinish as e:
            rate = math.nan
            results.note("cluster_transactions", str(e))
        results.add("cluster_transactions", "acks=all", name, rate, "txn/s")
    ms = transaction_latencies(cluster, "transactions", sizes.transaction_latency, limit)
    results.add("cluster_transactions", "acks=all", "one-message transaction, median",
                median(ms), "ms")  # fmt: skip
    if len(ms) < sizes.transaction_latency:
        results.note("cluster_transactions", f"one-message transactions: did not finish in "
                     f"{limit:.0f} s ({len(ms)} of {sizes.transaction_latency} timed)")  # fmt: skip
    create_topic(cluster, "rebalance", REBALANCE_PARTITIONS, limit)
    try:
        joins = rebalances(cluster, "rebalance", sizes.joins, limit)
    except DidNotFinish as e:
        joins = []
        results.note("cluster_rebalance", str(e))
    results.add_runs("cluster_rebalance", "3 consumers, range",
                     "join to all three assigned", joins or [math.nan], "s")  # fmt: skip
    results.note("cluster_rebalance", "consumers: librdkafka's defaults but the range assignor "
                 "(heartbeat.interval.ms=3000: a settled member hears of a join at its next "
                 f"heartbeat); {sizes.joins} joins, median (min–max)")  # fmt: skip


def measure_partitions(results: Results, cluster: BrokerCluster, partitions: int,
                       sizes: Sizes) -> None:  # fmt: skip
    """Topic creation and rounds at ``partitions``; then the failover, when its mode has it."""
    system, topics = f"{partitions:,} partitions", spread(f"wide-{partitions}", partitions)
    targets = every_partition(topics)
    creation, round_ms, cpu_ms = math.nan, [math.nan], [math.nan]
    if len(topics) > 1:
        results.note("cluster_partitions", f"{system} in {len(topics)} topics of at most "
                     f"{MAX_PARTITIONS_PER_TOPIC:,} (the benchmark's topic size)")  # fmt: skip
    count = sizes.rounds_at.get(partitions, sizes.rounds)
    if count != sizes.rounds:
        results.note("cluster_partitions", f"{system}: {count} round"
                     f"{'s' if count != 1 else ''} after the first in this mode")  # fmt: skip
    try:
        creation = create_topics(cluster, topics, sizes.limit * 2)
        cpu_ms = []
        round_ms = rounds(cluster, targets, count, sizes.limit, cpu_ms)
        if os.environ.get("SLUICE_BENCH_PROFILE") == "1":
            profile_rounds(cluster, targets, PROFILE_SECONDS)
    except DidNotFinish as e:
        results.note("cluster_partitions", str(e))
    results.add("cluster_partitions", system, "topic creation", creation, "s")
    results.add("cluster_partitions", system, "first round", round_ms[0], "ms")
    results.add_runs("cluster_partitions", system, "round, median of the rest",
                     round_ms[1:] or [math.nan], "ms")  # fmt: skip
    results.add_runs("cluster_partitions", system, "brokers' CPU per round, median of the rest",
                     cpu_ms[1:] or [math.nan], "ms")  # fmt: skip
    if math.isfinite(round_ms[0]) and len(round_ms) <= count:
        results.note("cluster_partitions", f"{system}: {len(round_ms) - 1} of {count} "
                     f"rounds after the first within {sizes.limit:.0f} s")  # fmt: skip
    if partitions in sizes.failover and math.isfinite(creation):
        measure_failover(results, cluster, targets, _session_s(CLUSTER_OVERRIDES), sizes)


def _session_s(overrides: dict[str, str]) -> int:
    return int(overrides["zookeeper.session.timeout.ms"]) // 1000


def measure_failover(results: Results, cluster: BrokerCluster, targets: list[Partition],
                     session_s: int, sizes: Sizes) -> None:  # fmt: skip
    """The failover of ``targets`` on ``cluster``, whose ZooKeeper session is ``session_s``."""
    system = f"{len(targets):,} partitions, {session_s} s session"
    seconds = math.nan
    try:
        controller, seconds = failover(cluster, targets, sizes.limit * 2)
        results.note("cluster_failover", f"{system}: broker {controller} was the controller")
    except DidNotFinish as e:
        results.note("cluster_failover", f"{system}: {e}")
    results.add("cluster_failover", system, "until every partition takes acks=all writes",
                seconds, "s")  # fmt: skip


def measure_long_session_failover(results: Results, work: Path, zookeeper: ZooKeeperServer,
                                  partitions: int, sizes: Sizes) -> None:  # fmt: skip
    """The failover at ``partitions`` on a cluster of its own with a ``LONG_SESSION_MS``
    ZooKeeper session (the issue's setting)."""
    topics = spread(f"failover-{partitions}", partitions)
    overrides = {**OVERRIDES, "zookeeper.session.timeout.ms": str(LONG_SESSION_MS)}
    with started_cluster(work, zookeeper, overrides) as cluster:
        try:
            create_topics(cluster, topics, sizes.limit * 2)
        except DidNotFinish as e:
            results.note("cluster_failover", str(e))
            return
        measure_failover(results, cluster, every_partition(topics), LONG_SESSION_MS // 1000,
                         sizes)  # fmt: skip


def run(
    results: Results, quick: bool, *, sizes: Sizes | None = None, work_parent: Path = Path("."),
    zookeeper: ZooKeeperServer | None = None,
) -> None:  # fmt: skip
    """Every row of the group (see the module); ``sizes`` overrides the mode's, ``work_parent``
    is where the ZooKeeper's and brokers' directories go (removed at the end); ``zookeeper``: a
    running server to use (a chroot of its own per cluster) instead of starting one."""
    sizes = sizes or (QUICK if quick else FULL)
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-cluster-", dir=work_parent))
    own = zookeeper is None
    zookeeper = zookeeper or ZooKeeperServer(work / "zookeeper").start()
    load = [load_average()]
    try:
        with started_cluster(work / "cluster-0", zookeeper) as cluster:
            measure_clients(results, cluster, sizes)
            measure_partitions(results, cluster, sizes.partitions[0], sizes)
        load.append(load_average())
        for partitions in sizes.partitions[1:]:
            with started_cluster(work / f"cluster-{partitions}", zookeeper) as cluster:
                measure_partitions(results, cluster, partitions, sizes)
            load.append(load_average())
        for partitions in sizes.long_session_failover:
            measure_long_session_failover(results, work / f"failover-{partitions}", zookeeper,
                                          partitions, sizes)  # fmt: skip
            load.append(load_average())
    finally:
        if own:
            zookeeper.stop()
        shutil.rmtree(work, ignore_errors=True)
    session = int(CLUSTER_OVERRIDES["zookeeper.session.timeout.ms"])
    lag = int(CLUSTER_OVERRIDES["replica.lag.time.max.ms"])
    setting = (f"{REPLICAS} broker processes, one ZooKeeper, RF {REPLICAS}, "
               f"min.insync.replicas={OVERRIDES['min.insync.replicas']}, "
               f"zookeeper.session.timeout.ms={session}, replica.lag.time.max.ms={lag}; "
               f"confluent-kafka {confluent_kafka.__version__}; {VALUE}-byte messages; "
               f"load average {' / '.join(load)}")  # fmt: skip
    results.note("cluster_latency", setting)  # once: the report prints a group's notes together
