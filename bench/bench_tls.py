"""The fetch path over TLS against plaintext: what losing zero-copy costs.

Python's ``ssl`` module cannot ``sendfile``: a TLS listener reads each fetched slice of a
segment into memory and writes it through the TLS connection (encrypting it on the way),
where a plaintext listener hands the file to the kernel (``os.sendfile``) and never touches the
bytes. Kafka pays the same price (its TLS transport copies through the JVM heap).

Two standalone brokers, started alike except for their one listener — ``PLAINTEXT`` and
``SSL`` (the test CA's server certificate, TLS 1.3 as negotiated by librdkafka) — each hold the
same topic: ``COUNT`` messages (200 k quick, 1 M full) of ``VALUE`` (1,000) random bytes in
one partition (created by the first write), written with the same producer settings. A
consumer (confluent-kafka, the same settings for both but ``security.protocol``) reads the
whole partition from offset 0 by ``assign()``; the listeners take turns, ``REPEATS`` rounds,
after one untimed warm-up read of each (connections made, the segment in the page cache).

Rows (experiment ``tls_fetch``), medians of the rounds with min/max kept:

* MB/s of values read through each listener, and TLS/plaintext per round;
* the broker's CPU time per GB read (user + system, from ``/proc/<pid>/stat`` before and
  after each read): what TLS costs the broker, and the figure the machine's other load
  disturbs least.

Standalone: ``python -m bench.run --only tls [--full]``.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench import proc
from bench.bench_broker import load_average
from bench.results import REPEATS, Results, median
from sluice.testing.broker import BrokerProcess
from sluice.testing.certificates import Certificates, make_certificates

VALUE = 1_000  # bytes per message value
COUNTS = {True: 200_000, False: 1_000_000}  # quick, full
TOPIC = "bench-tls"
KEY_PASSWORD = "bench-tls-key"
# The consumer's settings, identical for both listeners but security.protocol.
CONSUMER: dict[str, Any] = {
    "group.id": "bench-tls",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
}
TIMEOUT = 300.0


class ReadShortError(RuntimeError):
    """A read ended (end of partition) before every message was delivered."""


def _broker(work: Path, protocol: str, certs: Certificates) -> BrokerProcess:
    overrides = {"num.partitions": "1"}
    probe = None
    if protocol == "SSL":
        overrides |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server),
            "ssl.key.password": certs.key_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
        }
        probe = ssl.create_default_context(cafile=str(certs.ca))
    broker = BrokerProcess(
        work / protocol.lower(), overrides, log_level="warning", protocol=protocol,
        probe_tls=probe,
    )  # fmt: skip
    return broker.start()


def _client(protocol: str, certs: Certificates) -> dict[str, Any]:
    if protocol == "SSL":
        return {"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)}
    return {"security.protocol": "plaintext"}


def _fill(bootstrap: str, client: dict[str, Any], count: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000,
         "compression.type": "none", **client}
    )  # fmt: skip
    payload = os.urandom(VALUE)
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for _ in range(count):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) or failed:
        raise RuntimeError(f"filling {TOPIC}: {len(failed)} failed, some undelivered")


def _read(bootstrap: str, client: dict[str, Any], count: int, pid: int) -> tuple[float, float]:
    """(seconds, broker CPU seconds) to read ``count`` messages from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER, **client})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got = 0
        cpu = proc.cpu_seconds(pid)
        start = time.perf_counter()
        deadline = start + TIMEOUT
        while got < count and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is None:
                    got += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    if got < count:
                        raise ReadShortError(f"read {got} of {count} messages, then the end")
                else:
                    raise RuntimeError(f"consume: {error}")
        elapsed = time.perf_counter() - start
        used = proc.cpu_seconds(pid) - cpu
    finally:
        consumer.close()
    if got < count:
        raise ReadShortError(f"read {got} of {count} messages in {TIMEOUT:.0f} s")
    return elapsed, used


def run(results: Results, quick: bool) -> None:
    count = COUNTS[quick]
    megabytes = count * VALUE / 1e6
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-tls-"))
    brokers: dict[str, BrokerProcess] = {}
    try:
        certs = make_certificates(work / "pki", KEY_PASSWORD)
        for protocol in ("PLAINTEXT", "SSL"):
            broker = brokers[protocol] = _broker(work, protocol, certs)
            client = _client(protocol, certs)
            _fill(broker.bootstrap, client, count)
            assert broker.proc is not None
            _read(broker.bootstrap, client, count, broker.proc.pid)  # warm-up, untimed
        rates: dict[str, list[float]] = {"PLAINTEXT": [], "SSL": []}
        cpu_per_gb: dict[str, list[float]] = {"PLAINTEXT": [], "SSL": []}
        ratios: list[float] = []
        loads = []
        for _ in range(REPEATS):
            loads.append(load_average())
            for protocol, broker in brokers.items():
                assert broker.proc is not None
                seconds, cpu = _read(
                    broker.bootstrap, _client(protocol, certs), count, broker.proc.pid
                )
                rates[protocol].append(megabytes / seconds)
                cpu_per_gb[protocol].append(cpu / (megabytes / 1000))
            ratios.append(rates["SSL"][-1] / rates["PLAINTEXT"][-1])
        exp = "tls_fetch"
        for protocol, name in (
            ("PLAINTEXT", "plaintext (sendfile)"),
            ("SSL", "TLS (read + write)"),
        ):
            results.add_runs(exp, name, "consume MB/s", rates[protocol], "MB/s")
            results.add_runs(exp, name, "broker CPU s per GB read", cpu_per_gb[protocol], "s/GB")
        results.add_runs(exp, "TLS/plaintext", "consume MB/s", ratios, "ratio")
        cost = median(cpu_per_gb["SSL"]) / max(median(cpu_per_gb["PLAINTEXT"]), 1e-9)
        results.add(exp, "TLS/plaintext", "broker CPU per GB", cost, "ratio")
        results.note(
            exp,
            f"{count:,} messages of {VALUE} B in one partition per broker; one confluent-kafka "
            f"consumer from offset 0, identical settings but security.protocol; medians of "
            f"{REPEATS} rounds taking turns; load averages {', '.join(loads)}",
        )
    finally:
        for broker in brokers.values():
            if broker.running:
                broker.stop()
        shutil.rmtree(work, ignore_errors=True)
