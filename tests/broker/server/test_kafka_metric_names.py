"""``BrokerMetrics`` under Kafka's JMX-exporter names, beside Sluice's: the names the common
Kafka Grafana dashboards query, with Kafka's labels and units."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.server.metrics import BrokerMetrics


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_topic_and_request_metrics_carry_kafka_names() -> None:
    metrics = BrokerMetrics(dict)
    metrics.record_append("t", 100, 3)
    metrics.record_bytes_out("t", 40)
    metrics.record_request("list_offsets", 0.002)
    samples = _samples(metrics)
    topic = frozenset({("topic", "t")})
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == 3
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", topic)] == 100
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", topic)] == 40
    assert samples[("sluice_messages_in_total", topic)] == 3  # Sluice's names stay
    request = frozenset({("request", "ListOffsets")})
    assert samples[("kafka_network_requestmetrics_requests_total", request)] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_count", request)] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_sum", request)] == 2.0  # ms
    assert samples[("sluice_request_seconds_count", frozenset({("api", "list_offsets")}))] == 1


def test_replica_and_controller_gauges(tmp_path: Path) -> None:
    cluster = SingleBrokerCluster(
        LocalMetadataStore(tmp_path, 0), 0, listener_host="127.0.0.1", listener_port=9092
    )
    replicas = ReplicaManager(0, cluster, lambda *_: None, lambda *_: None)  # type: ignore[arg-type,return-value]
    metrics = BrokerMetrics(dict)
    metrics.track(replicas, cluster, 0)
    replicas.isr_shrinks, replicas.isr_expands = 2, 1
    samples = _samples(metrics)
    none: frozenset[tuple[str, str]] = frozenset()
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", none)] == 0
    assert samples[("kafka_server_replicamanager_isrshrinks_total", none)] == 2
    assert samples[("kafka_server_replicamanager_isrexpands_total", none)] == 1
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", none)] == 1
    assert samples[("kafka_controller_kafkacontroller_offlinepartitionscount", none)] == 0
