"""Helpers for the mirror tests: two clusters, a mirror process, traffic, and reading back.

* ``make_chroots`` (``sluice.testing.zookeeper``) makes ZooKeeper chroots (``/live``,
  ``/offline``…) under a test's own chroot, so a live and an offline ``BrokerCluster`` are
  separate clusters on one ZooKeeper, as in ``conf/datacenter/``.
* ``MirrorProcess`` (``sluice.testing.mirror``) runs ``python -m sluice mirror run --config
  <file>`` and stops it with SIGTERM (or kills it with SIGKILL); :func:`mirror_properties`
  writes the config the tests give it.
* :class:`Traffic` produces to a source topic from a thread (acks=all, idempotent) and
  records every acknowledged ``(topic, partition, offset)``.
* ``read_all`` (from ``topic_reader``) reads a whole topic back; :func:`origins` turns
  target records into their lineage origins.
* ``scrape`` (``sluice.testing.prometheus``) reads a Prometheus endpoint into
  ``{(name, labels): value}``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Producer

# The tests import these from here; they live in sluice.testing.
from sluice.testing.cluster import QUIET
from sluice.testing.mirror import MirrorProcess, write_properties
from sluice.testing.net import wait_until
from sluice.testing.prometheus import samples_named, scrape
from sluice.testing.zookeeper import make_chroots
from tests.pipeline.topic_reader import Record

__all__ = [
    "CLUSTER_SETTINGS",
    "MIRROR_CLIENT_SETTINGS",
    "MirrorProcess",
    "Traffic",
    "make_chroots",
    "mirror_properties",
    "origins",
    "produce",
    "samples_named",
    "scrape",
    "wait_until",
    "write_properties",
]

# Every test cluster: a quick first rebalance, no auto-created topics (the mirror creates
# them), one partition per new topic unless told.
CLUSTER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "100",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
}
# The mirror's consumers in tests: a killed mirror's membership expires in 6 s (the broker's
# group.min.session.timeout.ms), heartbeats often, metadata re-read often.
MIRROR_CLIENT_SETTINGS = {
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "500",
    "consumer.topic.metadata.refresh.interval.ms": "1000",
    "consumer.log_level": "3",
    "producer.log_level": "3",
}


def mirror_properties(
    live_bootstrap: str, offline_bootstrap: str, topics: str, group: str, **extra: str
) -> dict[str, str]:
    """A one-source mirror config, alias ``live`` into ``offline``; ``extra`` adds or replaces
    keys (``**{"batch.max.messages": "100"}``)."""
    return {
        "clusters": "live",
        "live.bootstrap.servers": live_bootstrap,
        "target.alias": "offline",
        "target.bootstrap.servers": offline_bootstrap,
        "group.id": group,
        "topics": topics,
        "refresh.topics.interval.ms": "500",
        "batch.max.wait.ms": "100",
        **MIRROR_CLIENT_SETTINGS,
        **extra,
    }


def origins(records: Iterable[Record]) -> list[tuple[str, str, int, int]]:
    """``(cluster, topic, partition, offset)`` of each record's lineage header (all have one)."""
    out = []
    for r in records:
        lineage = r.lineage
        assert lineage is not None, f"{r.topic}/{r.partition}/{r.offset} has no lineage header"
        out.append((lineage.cluster, lineage.topic, lineage.partition, lineage.offset))
    return out


def produce(bootstrap: str, topic: str, records: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Produce ``records`` (dicts of ``produce()`` keyword arguments) with acks=all; return
    the delivered messages in delivery order."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    delivered: list[Any] = []
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        (errors.append(str(err)) if err is not None else delivered.append(msg))

    for record in records:
        producer.produce(topic, on_delivery=report, **record)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:5]
    return delivered


class Traffic(threading.Thread):
    """Produces ``value-<n>`` records to ``topic`` (keys ``k<n % 17>``, round-robin over
    partitions) until :meth:`finish`, with an idempotent acks=all producer; ``acked`` holds
    ``(partition, offset)`` of every acknowledged record."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate_per_s: float = 400.0,
        producer: Any = None,
    ) -> None:
        """``producer``: any object with confluent-kafka's ``produce``/``poll``/``flush``
        (default: a new idempotent acks=all ``Producer`` on ``bootstrap``)."""
        super().__init__(daemon=True, name=f"traffic-{topic}")
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate_per_s
        # ``is None``, not ``or``: a producer with nothing queued has len() 0, so is falsy.
        self.producer = (
            producer
            if producer is not None
            else Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 120000,
                    **QUIET,
                }
            )
        )
        self.acked: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self.sent = 0
        self._stop_event = threading.Event()

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def run(self) -> None:
        n = 0
        while not self._stop_event.is_set():
            try:
                self._send(n)
                n += 1
            except BufferError:
                pass
            self.producer.poll(self.interval)
        self.sent = n

    def finish(self, timeout: float = 120.0) -> set[tuple[int, int]]:
        """Stop producing, wait for every delivery report; the acknowledged positions."""
        self._stop_event.set()
        self.join(10)
        self._drain(timeout)
        return self.acked

    def _send(self, n: int) -> None:
        self.producer.produce(
            self.topic,
            key=f"k{n % 17}".encode(),
            value=f"value-{n}".encode(),
            partition=n % self.partitions,
            on_delivery=self._report,
        )

    def _drain(self, timeout: float) -> None:
        remaining = self.producer.flush(timeout)
        assert remaining == 0, f"{remaining} records never got a delivery report"
