"""Prometheus metrics of one broker (prometheus-client), on their own registry, under Sluice's
names and, beside them, the names Kafka's JMX exporter gives Kafka's MBeans — what the common
Kafka Grafana dashboards (Strimzi's, Confluent's jmx-monitoring-stacks, Grafana's "Kafka
Overview") query. Both sets, rather than Kafka's alone, so that existing Sluice dashboards and
alerts keep working.

Sluice's name → Kafka's (labels)::

    sluice_messages_in_total    kafka_server_brokertopicmetrics_messagesin_total    (topic)
    sluice_bytes_in_total       kafka_server_brokertopicmetrics_bytesin_total       (topic)
    sluice_bytes_out_total      kafka_server_brokertopicmetrics_bytesout_total      (topic)
    sluice_requests_total       kafka_network_requestmetrics_requests_total         (request)
    sluice_request_seconds      kafka_network_requestmetrics_totaltimems (ms)       (request)
    sluice_log_size_bytes       kafka_log_log_size                       (topic, partition)
    sluice_log_end_offset       kafka_log_log_logendoffset               (topic, partition)
    -                           kafka_log_log_logstartoffset             (topic, partition)
    -                           kafka_server_replicamanager_underreplicatedpartitions
    -                           kafka_server_replicamanager_partitioncount
    -                           kafka_server_replicamanager_leadercount
    -                           kafka_server_replicamanager_isrshrinks_total
    -                           kafka_server_replicamanager_isrexpands_total
    -                           kafka_server_delayedfetchmetrics_expirespersec_total (fetchertype)
    -                           sluice_delayed_fetches_completed_total             (fetchertype)
    -                           kafka_controller_kafkacontroller_activecontrollercount
    -                           kafka_controller_kafkacontroller_offlinepartitionscount

Sluice's request counters are labelled ``api`` with the API's snake-case name (``produce``);
Kafka's are labelled ``request`` with Kafka's request name (``Produce``, ``ListOffsets``).
``kafka_network_requestmetrics_totaltimems`` is a histogram in milliseconds (the JMX exporter
turns Kafka's Histogram MBean into a summary of quantiles; a Prometheus histogram carries the
same and aggregates across brokers). The replica and controller gauges are read at scrape time
from the replica manager and the cluster view once :meth:`BrokerMetrics.track` has been given
them; as in Kafka, only the active controller reports ``offlinepartitionscount`` and
``activecontrollercount`` 1.

Where the numbers live: not in prometheus-client's ``Counter``/``Histogram`` (each ``inc`` takes
a lock and goes through two method calls; the four of them per request were 11% of a
batch-of-1 producer's broker CPU under py-spy), but in plain Python integers and floats that
``record_*`` add to, one small list per topic and per API; ``_TrafficCollector`` turns them into
the same families, names, labels, values and ``_created`` samples at scrape time. A produced
batch now costs 0.45 µs of metrics (a dict lookup, two bisections, a few additions) where the
``Counter`` and ``Histogram`` children cost 3.7 µs.

Thread-safety: ``record_*`` must be called from one thread, the broker's event loop (an
addition to a list item is a read-modify-write, not atomic across threads). Scrapes run on
prometheus-client's HTTP thread: they copy each dict (one C call, atomic under the GIL) and
read each list item once, so a scrape sees every count as it was at some moment of the scrape,
as with prometheus-client's own metrics (whose buckets and sum are separate locks too). The
other collectors read the logs and the replica manager from the scraping thread without locks,
as single attribute reads.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator

import prometheus_client.metrics
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.log.log import Log
from sluice.broker.protocol.apis import APIS, ApiKey
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.common.topic_partition import TopicPartition

#: Sluice's API label (``ApiKey`` name, lower case) → Kafka's request name.
KAFKA_REQUEST_NAMES = {key.name.lower(): APIS[key].name for key in ApiKey}

# Upper bounds of the request-time buckets, +Inf last (as prometheus-client appends it). The two
# sets are the same times, but each is kept in its own unit and searched on its own: ``s <=
# 0.0005`` and ``s * 1000 <= 0.5`` can disagree in floating point, and the buckets must stay
# what prometheus-client's ``Histogram.observe`` made them.
_SECONDS_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, math.inf)
_MS_BUCKETS = (0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 30000, math.inf)
_go_float: Callable[[float], str] = floatToGoString  # how prometheus-client writes ``le``
_SECONDS_LE = tuple(_go_float(b) for b in _SECONDS_BUCKETS)
_MS_LE = tuple(_go_float(b) for b in _MS_BUCKETS)
_N_BUCKETS = len(_SECONDS_BUCKETS)
# The layout of a request-time list (``BrokerMetrics._api`` values): the bucket counts of the
# seconds histogram, those of the milliseconds histogram, then the two sums.
_MS_AT = _N_BUCKETS
_SECONDS_SUM = 2 * _N_BUCKETS
_MS_SUM = _SECONDS_SUM + 1


class _LogCollector(Collector):
    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self._logs = logs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "sluice_log_size_bytes", "Bytes on disk per partition", labels=labels
        )
        end = GaugeMetricFamily(
            "sluice_log_end_offset", "Log end offset per partition", labels=labels
        )
        k_size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes (Kafka)", labels=labels)
        k_end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "Log end offset (Kafka)", labels=labels
        )
        k_start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "Log start offset (Kafka)", labels=labels
        )
        for tp, log in self._logs().items():
            values = [tp.topic, str(tp.partition)]
            size.add_metric(values, log.size_bytes)
            end.add_metric(values, log.log_end_offset)
            k_size.add_metric(values, log.size_bytes)
            k_end.add_metric(values, log.log_end_offset)
            k_start.add_metric(values, log.log_start_offset)
        yield from (size, end, k_size, k_end, k_start)


class _ReplicaCollector(Collector):
    """Kafka's ReplicaManager and KafkaController gauges, read at scrape time."""

    def __init__(self, replicas: ReplicaManager, cluster: ClusterView, broker_id: int) -> None:
        self._replicas = replicas
        self._cluster = cluster
        self._broker_id = broker_id

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        replicas = self._replicas
        partitions = list(replicas.partitions.values())

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        yield gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            replicas.under_replicated(),
        )
        yield gauge(
            "kafka_server_replicamanager_partitioncount",
            "Replicas on this broker", len(partitions),
        )  # fmt: skip
        yield gauge(
            "kafka_server_replicamanager_leadercount",
            "Partitions led by this broker",
            sum(1 for p in partitions if p.role is Role.LEADER),
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks written by this broker as leader", value=replicas.isr_shrinks,
        )  # fmt: skip
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions written by this broker as leader", value=replicas.isr_expands,
        )  # fmt: skip
        # Kafka's DelayedFetchMetrics (fetcherType=follower): followers' fetches that waited
        # here and expired at their max wait; beside it, Sluice's count of those an append
        # (or another change) completed — what makes acks=all take milliseconds.
        expired = CounterMetricFamily(
            "kafka_server_delayedfetchmetrics_expirespersec",
            "Follower fetches that waited here and expired at their max wait",
            labels=["fetchertype"],
        )
        expired.add_metric(["follower"], replicas.follower_fetches_expired)
        yield expired
        completed = CounterMetricFamily(
            "sluice_delayed_fetches_completed",
            "Follower fetches that waited here and were completed by a change (an append)",
            labels=["fetchertype"],
        )
        completed.add_metric(["follower"], replicas.follower_fetches_woken)
        yield completed
        active = self._cluster.controller_id() == self._broker_id
        yield gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller", 1 if active else 0,
        )  # fmt: skip
        offline = 0
        if active:
            for name, info in self._cluster.topics().items():
                for p in range(info.partitions):
                    state = self._cluster.partition_state(name, p)
                    offline += state is not None and state.leader < 0
        yield gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (reported by the active controller)", offline,
        )  # fmt: skip


def _created_enabled() -> bool:
    # prometheus-client's switch (``disable_created_metrics()`` or the environment variable
    # PROMETHEUS_DISABLE_CREATED_SERIES), read at each scrape as its own metrics do.
    return bool(getattr(prometheus_client.metrics, "_use_created", True))


def _cumulative(counts: list[float], start: int, les: tuple[str, ...]) -> list[tuple[str, float]]:
    total = 0.0
    buckets = []
    for i, le in enumerate(les):
        total += counts[start + i]
        buckets.append((le, total))
    return buckets


def _kafka_name(api: str) -> str:
    return KAFKA_REQUEST_NAMES.get(api, api)


class _TrafficCollector(Collector):
    """The per-topic counters and the per-API request counters and histograms, from the plain
    numbers ``BrokerMetrics`` keeps: the families, in the order, under the names and labels,
    of the ``Counter``/``Histogram`` objects they replace."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        m = self._metrics
        # A copy of each dict and of each list in it (each copy one C call, atomic under the
        # GIL): Sluice's and Kafka's names show the same numbers, and an API's buckets, count
        # and sum agree with one another.
        created = m._created.copy() if _created_enabled() else {}
        topic_in = {key: list(numbers) for key, numbers in m._in.copy().items()}
        topic_out = {key: list(numbers) for key, numbers in m._out.copy().items()}
        api = {key: list(numbers) for key, numbers in m._api.copy().items()}
        totals = {key: [sum(numbers[:_N_BUCKETS])] for key, numbers in api.items()}

        def counter(
            name: str, doc: str, label: str, values: dict[str, list[int]] | dict[str, list[float]],
            at: int, kind: str, rename: Callable[[str], str] = str,
        ) -> CounterMetricFamily:  # fmt: skip
            family = CounterMetricFamily(name, doc, labels=[label])
            for key, numbers in values.items():
                when = created.get((kind, key))
                family.add_metric([rename(key)], float(numbers[at]), created=when)
            return family

        def histogram(
            name: str, doc: str, label: str, start: int, les: tuple[str, ...], at_sum: int,
            rename: Callable[[str], str] = str,
        ) -> HistogramMetricFamily:  # fmt: skip
            family = HistogramMetricFamily(name, doc, labels=[label])
            for key, numbers in api.items():
                family.add_metric([rename(key)], _cumulative(numbers, start, les), numbers[at_sum])
                when = created.get(("api", key))
                if when is not None:
                    family.samples.append(Sample(f"{name}_created", {label: rename(key)}, when))
            return family

        yield counter("sluice_bytes_in", "Record bytes appended", "topic", topic_in, 0, "in")
        yield counter("sluice_messages_in", "Records appended", "topic", topic_in, 1, "in")
        yield counter(
            "sluice_bytes_out", "Record bytes sent to consumers", "topic", topic_out, 0, "out"
        )
        yield counter("sluice_requests", "Requests handled", "api", totals, 0, "api")
        yield histogram(
            "sluice_request_seconds",
            "Request handling time (a delayed fetch includes its wait)",
            "api", 0, _SECONDS_LE, _SECONDS_SUM,
        )  # fmt: skip
        prefix = "kafka_server_brokertopicmetrics_"
        yield counter(f"{prefix}bytesin", "Bytes in (Kafka)", "topic", topic_in, 0, "in")
        yield counter(f"{prefix}messagesin", "Messages in (Kafka)", "topic", topic_in, 1, "in")
        yield counter(f"{prefix}bytesout", "Bytes out (Kafka)", "topic", topic_out, 0, "out")
        yield counter(
            "kafka_network_requestmetrics_requests", "Requests (Kafka)", "request", totals, 0,
            "api", _kafka_name,
        )  # fmt: skip
        yield histogram(
            "kafka_network_requestmetrics_totaltimems", "Request total time in ms (Kafka)",
            "request", _MS_AT, _MS_LE, _MS_SUM, _kafka_name,
        )  # fmt: skip


class BrokerMetrics:
    """One broker's metrics: the traffic counters ``record_*`` add to, and the registry that
    serves them with the logs', the replicas' and the controller's gauges.

    Not thread-safe to record: call ``record_*`` from the event loop only (see the module
    docstring); scraping ``registry`` from another thread is safe.
    """

    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self.registry = CollectorRegistry()
        # topic → [record bytes in, records in]; topic → [record bytes out];
        # api → bucket counts of both histograms and their sums (layout at _MS_AT, _SECONDS_SUM).
        # Counts only grow; a key appears on its first use, as a labelled child did.
        self._in: dict[str, list[int]] = {}
        self._out: dict[str, list[int]] = {}
        self._api: dict[str, list[float]] = {}
        #: ("in" | "out" | "api", key) → when the key was first recorded (``_created``).
        self._created: dict[tuple[str, str], float] = {}
        self.registry.register(_TrafficCollector(self))
        self.registry.register(_LogCollector(logs))
        self._tracked = False

    def track(self, replicas: ReplicaManager, cluster: ClusterView, broker_id: int) -> None:
        """Report the replica manager's and the controller's gauges (once; later calls are
        ignored)."""
        if not self._tracked:
            self._tracked = True
            self.registry.register(_ReplicaCollector(replicas, cluster, broker_id))

    def record_append(self, topic: str, size: int, records: int) -> None:
        """Count ``records`` records of ``size`` bytes appended to ``topic``."""
        numbers = self._in.get(topic)
        if numbers is None:
            self._created["in", topic] = time.time()
            numbers = self._in[topic] = [0, 0]
        numbers[0] += size
        numbers[1] += records

    def record_bytes_out(self, topic: str, size: int) -> None:
        """Count ``size`` record bytes of ``topic`` sent to a consumer or follower."""
        numbers = self._out.get(topic)
        if numbers is None:
            self._created["out", topic] = time.time()
            numbers = self._out[topic] = [0]
        numbers[0] += size

    def record_request(self, api: str, seconds: float) -> None:
        """Count one request of ``api`` (snake case, ``produce``) handled in ``seconds``."""
        numbers = self._api.get(api)
        if numbers is None:
            self._created["api", api] = time.time()
            numbers = self._api[api] = [0] * (_SECONDS_SUM + 2)
        ms = seconds * 1000
        numbers[bisect_left(_SECONDS_BUCKETS, seconds)] += 1
        numbers[_MS_AT + bisect_left(_MS_BUCKETS, ms)] += 1
        numbers[_SECONDS_SUM] += seconds
        numbers[_MS_SUM] += ms
