"""``BrokerMetrics`` under Kafka's JMX-exporter names, beside Sluice's: the names the common
Kafka Grafana dashboards query, with Kafka's labels and units."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.server.metrics import KAFKA_REQUEST_NAMES, BrokerMetrics


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


# The model: the prometheus-client Counter and Histogram objects BrokerMetrics used before it
# kept plain numbers; the exposition must not change but for the ``_created`` timestamps.
_SECONDS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30)
_MS = (0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 30000)


class _Model:
    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()
        self.bytes_in = Counter("sluice_bytes_in", "Record bytes appended", ["topic"], registry=reg)
        self.messages_in = Counter(
            "sluice_messages_in", "Records appended", ["topic"], registry=reg
        )
        self.bytes_out = Counter(
            "sluice_bytes_out", "Record bytes sent to consumers", ["topic"], registry=reg
        )
        self.requests = Counter("sluice_requests", "Requests handled", ["api"], registry=reg)
        self.latency = Histogram(
            "sluice_request_seconds", "Request handling time (a delayed fetch includes its wait)",
            ["api"], registry=reg, buckets=_SECONDS,
        )  # fmt: skip
        p = "kafka_server_brokertopicmetrics_"
        self.k_bytes_in = Counter(f"{p}bytesin", "Bytes in (Kafka)", ["topic"], registry=reg)
        self.k_messages_in = Counter(
            f"{p}messagesin", "Messages in (Kafka)", ["topic"], registry=reg
        )
        self.k_bytes_out = Counter(f"{p}bytesout", "Bytes out (Kafka)", ["topic"], registry=reg)
        self.k_requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests (Kafka)", ["request"], registry=reg
        )
        self.k_time = Histogram(
            "kafka_network_requestmetrics_totaltimems", "Request total time in ms (Kafka)",
            ["request"], registry=reg, buckets=_MS,
        )  # fmt: skip

    def record_append(self, topic: str, size: int, records: int) -> None:
        for counter in (self.bytes_in, self.k_bytes_in):
            counter.labels(topic).inc(size)
        for counter in (self.messages_in, self.k_messages_in):
            counter.labels(topic).inc(records)

    def record_bytes_out(self, topic: str, size: int) -> None:
        self.bytes_out.labels(topic).inc(size)
        self.k_bytes_out.labels(topic).inc(size)

    def record_request(self, api: str, seconds: float) -> None:
        kafka = KAFKA_REQUEST_NAMES.get(api, api)
        self.requests.labels(api).inc()
        self.latency.labels(api).observe(seconds)
        self.k_requests.labels(kafka).inc()
        self.k_time.labels(kafka).observe(seconds * 1000)


def _exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [re.sub(r"^(\w+_created\{.*\}) \S+$", r"\1 <time>", line) for line in text.splitlines()]


_times = st.one_of(
    st.sampled_from([0.0, 0.0005, 0.001, 0.005, 0.01, 30.0, 30.000001, 1e-9]),
    st.floats(0, 60, allow_nan=False),
)
_calls = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(["a", "b"]),
            st.integers(0, 10**6),
            st.integers(0, 500),
        ),  # fmt: skip
        st.tuples(st.just("out"), st.sampled_from(["a", "c"]), st.integers(0, 10**6)),
        st.tuples(st.just("request"), st.sampled_from(["produce", "fetch", "not_an_api"]), _times),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_calls)
def test_exposition_is_prometheus_clients(calls: list[tuple[Any, ...]]) -> None:
    ours, model = BrokerMetrics(dict), _Model()
    for target in (ours, model):
        for kind, *args in calls:
            {"append": target.record_append, "out": target.record_bytes_out,
             "request": target.record_request}[kind](*args)  # fmt: skip
    model_lines = _exposition(model.registry)
    ours_lines = _exposition(ours.registry)
    # The log collector's (empty) families follow the traffic's in ours.
    assert ours_lines[: len(model_lines)] == model_lines
    assert all(line.startswith("# ") for line in ours_lines[len(model_lines) :])
