"""Prometheus metrics of one broker (prometheus-client), on their own registry.

``sluice_bytes_in_total`` / ``sluice_bytes_out_total`` and ``sluice_messages_in_total``
(per topic), ``sluice_requests_total`` and ``sluice_request_seconds`` (per API),
``sluice_log_size_bytes`` and ``sluice_log_end_offset`` (per partition, read at scrape time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice.broker.log.log import Log
from sluice.common.topic_partition import TopicPartition


class _LogCollector(Collector):
    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self._logs = logs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        size = GaugeMetricFamily(
            "sluice_log_size_bytes", "Bytes on disk per partition", labels=["topic", "partition"]
        )
        end = GaugeMetricFamily(
            "sluice_log_end_offset", "Log end offset per partition", labels=["topic", "partition"]
        )
        for tp, log in self._logs().items():
            labels = [tp.topic, str(tp.partition)]
            size.add_metric(labels, log.size_bytes)
            end.add_metric(labels, log.log_end_offset)
        yield size
        yield end


class BrokerMetrics:
    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self.registry = CollectorRegistry()
        self.bytes_in = Counter(
            "sluice_bytes_in", "Record bytes appended", ["topic"], registry=self.registry
        )
        self.messages_in = Counter(
            "sluice_messages_in", "Records appended", ["topic"], registry=self.registry
        )
        self.bytes_out = Counter(
            "sluice_bytes_out", "Record bytes sent to consumers", ["topic"], registry=self.registry
        )
        self.requests = Counter(
            "sluice_requests", "Requests handled", ["api"], registry=self.registry
        )
        self.latency = Histogram(
            "sluice_request_seconds",
            "Request handling time (a delayed fetch includes its wait)",
            ["api"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30),
        )
        self.registry.register(_LogCollector(logs))
        # labels() costs a lock and a dict lookup per call; the hot path keeps the children.
        self._in: dict[str, tuple[Any, Any]] = {}
        self._api: dict[str, tuple[Any, Any]] = {}

    def record_append(self, topic: str, size: int, records: int) -> None:
        children = self._in.get(topic)
        if children is None:
            children = (self.bytes_in.labels(topic), self.messages_in.labels(topic))
            self._in[topic] = children
        children[0].inc(size)
        children[1].inc(records)

    def record_request(self, api: str, seconds: float) -> None:
        children = self._api.get(api)
        if children is None:
            children = (self.requests.labels(api), self.latency.labels(api))
            self._api[api] = children
        children[0].inc()
        children[1].observe(seconds)
