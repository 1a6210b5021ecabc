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

Thread-safety: the counters are prometheus-client's (thread-safe); the collectors read the
logs and the replica manager from the scraping thread without locks, as single attribute reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.log.log import Log
from sluice.broker.protocol.apis import APIS, ApiKey
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.common.topic_partition import TopicPartition

#: Sluice's API label (``ApiKey`` name, lower case) → Kafka's request name.
KAFKA_REQUEST_NAMES = {key.name.lower(): APIS[key].name for key in ApiKey}

_MS_BUCKETS = (0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 30000)


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


class BrokerMetrics:
    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.bytes_in = Counter("sluice_bytes_in", "Record bytes appended", ["topic"], registry=reg)
        self.messages_in = Counter(
            "sluice_messages_in", "Records appended", ["topic"], registry=reg
        )
        self.bytes_out = Counter(
            "sluice_bytes_out", "Record bytes sent to consumers", ["topic"], registry=reg
        )
        self.requests = Counter("sluice_requests", "Requests handled", ["api"], registry=reg)
        self.latency = Histogram(
            "sluice_request_seconds",
            "Request handling time (a delayed fetch includes its wait)",
            ["api"],
            registry=reg,
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30),
        )
        prefix = "kafka_server_brokertopicmetrics_"
        self.k_bytes_in = Counter(f"{prefix}bytesin", "Bytes in (Kafka)", ["topic"], registry=reg)
        self.k_messages_in = Counter(
            f"{prefix}messagesin", "Messages in (Kafka)", ["topic"], registry=reg
        )
        self.k_bytes_out = Counter(
            f"{prefix}bytesout", "Bytes out (Kafka)", ["topic"], registry=reg
        )
        self.k_requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests (Kafka)", ["request"], registry=reg
        )
        self.k_total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Request total time in ms (Kafka)",
            ["request"],
            registry=reg,
            buckets=_MS_BUCKETS,
        )
        self.registry.register(_LogCollector(logs))
        # labels() costs a lock and a dict lookup per call; the hot path keeps the children.
        self._in: dict[str, tuple[Any, ...]] = {}
        self._out: dict[str, tuple[Any, ...]] = {}
        self._api: dict[str, tuple[Any, ...]] = {}
        self._tracked = False

    def track(self, replicas: ReplicaManager, cluster: ClusterView, broker_id: int) -> None:
        """Report the replica manager's and the controller's gauges (once; later calls are
        ignored)."""
        if not self._tracked:
            self._tracked = True
            self.registry.register(_ReplicaCollector(replicas, cluster, broker_id))

    def record_append(self, topic: str, size: int, records: int) -> None:
        children = self._in.get(topic)
        if children is None:
            children = (
                self.bytes_in.labels(topic), self.messages_in.labels(topic),
                self.k_bytes_in.labels(topic), self.k_messages_in.labels(topic),
            )  # fmt: skip
            self._in[topic] = children
        children[0].inc(size)
        children[1].inc(records)
        children[2].inc(size)
        children[3].inc(records)

    def record_bytes_out(self, topic: str, size: int) -> None:
        children = self._out.get(topic)
        if children is None:
            children = (self.bytes_out.labels(topic), self.k_bytes_out.labels(topic))
            self._out[topic] = children
        children[0].inc(size)
        children[1].inc(size)

    def record_request(self, api: str, seconds: float) -> None:
        children = self._api.get(api)
        if children is None:
            kafka_name = KAFKA_REQUEST_NAMES.get(api, api)
            children = (
                self.requests.labels(api), self.latency.labels(api),
                self.k_requests.labels(kafka_name), self.k_total_time.labels(kafka_name),
            )  # fmt: skip
            self._api[api] = children
        children[0].inc()
        children[1].observe(seconds)
        children[2].inc()
        children[3].observe(seconds * 1000)
