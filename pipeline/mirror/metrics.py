"""Prometheus metrics of one mirror process (prometheus-client), on their own registry.

========================================  ==================  ==================================
metric                                    labels              meaning
========================================  ==================  ==================================
sluice_mirror_records_total               source, topic       records the target acknowledged
sluice_mirror_bytes_total                 source, topic       their key + value bytes
sluice_mirror_lag                         source, topic,      source high watermark − the
                                          partition           group's committed offset
sluice_mirror_batches_total               source              batches committed
sluice_mirror_commits_refused_total       source              commits a rebalance refused (their
                                                              batch is mirrored again: duplicates)
sluice_mirror_assigned_partitions         source              partitions this process owns
sluice_mirror_transactions_aborted_total  source              exactly-once mode: batches whose
                                                              transaction was aborted (mirrored
                                                              again in a new one: no duplicate)
========================================  ==================  ==================================

``sluice_mirror_lag`` has a series only for the partitions this process owns now (a revoked
partition's series is removed; a partition added at the source gets one once the group assigns
it), so summing it over every process of the group gives the group's lag. It is refreshed from
the consumer's cached watermarks before each batch is mirrored, and about once a second when
idle or waiting for a batch's acknowledgements — so a target that stalls a batch shows as lag
on every owned partition, also those fetched after the batch; a partition without a committed
offset counts from its log start (``auto.offset.reset=earliest``).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

__all__ = ["MirrorMetrics"]


class MirrorMetrics:
    """The mirror's metrics; every method is thread-safe (prometheus-client locks)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.records = Counter(
            "sluice_mirror_records",
            "Records mirrored (acknowledged by the target)",
            ["source", "topic"],
            registry=self.registry,
        )
        self.bytes = Counter(
            "sluice_mirror_bytes",
            "Key and value bytes mirrored (acknowledged by the target)",
            ["source", "topic"],
            registry=self.registry,
        )
        self.lag = Gauge(
            "sluice_mirror_lag",
            "Source high watermark minus the mirror group's committed offset",
            ["source", "topic", "partition"],
            registry=self.registry,
        )
        self.batches = Counter(
            "sluice_mirror_batches", "Batches mirrored and committed", ["source"],
            registry=self.registry,
        )  # fmt: skip
        self.commits_refused = Counter(
            "sluice_mirror_commits_refused",
            "Commits refused by a rebalance (that batch will be mirrored again)",
            ["source"],
            registry=self.registry,
        )
        self.transactions_aborted = Counter(
            "sluice_mirror_transactions_aborted",
            "Exactly-once mode: batch transactions aborted (the batch is mirrored again)",
            ["source"],
            registry=self.registry,
        )
        self.assigned = Gauge(
            "sluice_mirror_assigned_partitions", "Source partitions this process owns",
            ["source"], registry=self.registry,
        )  # fmt: skip
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def record_delivered(self, source: str, topic: str, records: int, size: int) -> None:
        self.records.labels(source, topic).inc(records)
        self.bytes.labels(source, topic).inc(size)

    def set_lag(self, source: str, topic: str, partition: int, lag: int) -> None:
        self.lag.labels(source, topic, str(partition)).set(lag)

    def drop_lag(self, source: str, topic: str, partition: int) -> None:
        with contextlib.suppress(KeyError):  # never set
            self.lag.remove(source, topic, str(partition))

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` over HTTP on ``host:port`` from a daemon thread."""
        self._server, self._thread = start_http_server(port, host, registry=self.registry)

    def close(self) -> None:
        """Stop the HTTP server (if serving) and release its socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
