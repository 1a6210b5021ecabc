"""Helpers for the mirror tests: two clusters, a mirror process, traffic, and reading back.

* :func:`make_chroots` makes ZooKeeper chroots (``/live``, ``/offline``…) under a test's own
  chroot, so a live and an offline :class:`BrokerCluster` are separate clusters on one
  ZooKeeper, as in ``conf/datacenter/``.
* :class:`MirrorProcess` runs ``python -m sluice.cli.mirror_command run --config <file>`` and stops
  it
  with SIGTERM (or kills it with SIGKILL).
* :class:`Traffic` produces to a source topic from a thread (acks=all, idempotent) and
  records every acknowledged ``(topic, partition, offset)``.
* :func:`read_all` (from ``topic_reader``) reads a whole topic back; :func:`origins` turns
  target records into their lineage origins.
* :func:`scrape` reads a Prometheus endpoint into ``{(name, labels): value}``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from tests.broker.cluster.cluster_fixture import QUIET
from tests.conftest import kazoo_client
from tests.net import free_port, signal_and_wait, wait_for_port
from tests.pipeline.topic_reader import Record

REPO = Path(__file__).resolve().parents[2]

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


def make_chroots(connect: str, *names: str) -> tuple[str, ...]:
    """Create ``<chroot>/<name>`` for each name under ``connect`` (a connect string with a
    chroot); return their connect strings — one cluster each."""
    client = kazoo_client(connect)
    try:
        for name in names:
            client.ensure_path(f"/{name}")
    finally:
        client.stop()
        client.close()
    return tuple(f"{connect}/{name}" for name in names)


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


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


class MirrorProcess:
    """``sluice mirror run`` as a subprocess, its output in ``<base_dir>/mirror.out``."""

    def __init__(self, base_dir: Path, props: Mapping[str, str], name: str = "mirror") -> None:
        self.base_dir = base_dir
        base_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_port = free_port()
        self.config = write_properties(
            base_dir / f"{name}.properties",
            {**props, "metrics.listener": f"http://127.0.0.1:{self.metrics_port}"},
        )
        self.output_path = base_dir / f"{name}.out"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> MirrorProcess:
        env = dict(os.environ)
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(REPO / ".hypothesis"))
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sluice", "mirror", "run", "--config", str(self.config)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while not wait_for_port("127.0.0.1", self.metrics_port, 0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the mirror did not start:\n{self.output_tail()}")
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; the exit status (SIGKILL after ``timeout``)."""
        return signal_and_wait(self.proc, signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        return signal_and_wait(self.proc, signal.SIGKILL, 30)

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return scrape(self.metrics_port)

    def output_tail(self, lines: int = 40) -> str:
        try:
            text = self.output_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample ``http://127.0.0.1:<port>/metrics`` serves, by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode("utf-8")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def samples_named(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> dict[frozenset[tuple[str, str]], float]:
    """The samples called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return {lbl: v for (n, lbl), v in samples.items() if n == name and want <= lbl}


def origins(records: Iterable[Record]) -> list[tuple[str, str, int, int]]:
    """``(cluster, topic, partition, offset)`` of each record's lineage header (all have one)."""
    out = []
    for r in records:
        lineage = r.lineage
        assert lineage is not None, f"{r.topic}/{r.partition}/{r.offset} has no lineage header"
        out.append((lineage.cluster, lineage.topic, lineage.partition, lineage.offset))
    return out


def wait_until(predicate: Callable[[], Any], timeout: float, message: str) -> Any:
    """Poll ``predicate`` every 0.2 s until it returns something truthy; fail at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {message}"
        time.sleep(0.2)


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
