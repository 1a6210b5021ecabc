"""The paper's §5 experiments across systems: Sluice, Tansu, RabbitMQ and ActiveMQ, each on
127.0.0.1 with one producer and one consumer and 200-byte messages.

* ``produce`` (Figure 4): one producer per written way ("batch 1", "batch 50", and librdkafka's
  "default batching" for the Kafka-protocol systems; each driver's ``MODES`` says what the
  words mean for it). Average msg/s from the first send to the last acknowledgement, and
  acknowledged counts sampled every 0.5 s for the throughput-over-time plot.
* ``storage_overhead``: bytes allocated on disk under the broker's data directory for each
  written way (``du`` after, minus before, after a 3 s settle and ``sync``), per message,
  minus the 200-byte payload. Tansu keeps everything in memory: n/a.
* ``consume`` (Figure 5): one consumer reading each written queue/topic from the start at
  about 1,000 messages or 200 KB per request, bounded by a timeout; when the timeout hits,
  the rate reached is reported and the metric says so.
* ``first_message``: from subscribing to the first message, on a 1,000-message topic/queue of
  its own (RabbitMQ and ActiveMQ auto-acknowledge, so reads remove messages). Kafka-protocol
  systems use ``subscribe()`` with a group; if that delivers nothing in time, ``assign()``.

Every number goes to ``Results``; the structured records (series included) to
``build/bench/peers.json`` for ``bench/plots.py``.

Standalone: ``python -m bench.bench_peers [--full] [--systems sluice,tansu,rabbitmq,activemq]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.peers import MESSAGE, Driver, Read, Sampler, disk_usage
from bench.results import OUT_DIR, Results

SYSTEMS = ("sluice", "tansu", "rabbitmq", "activemq")
KAFKA_PROTOCOL = ("sluice", "tansu")
SETTLE = 3.0  # seconds before measuring disk usage: KahaDB checkpoints every 2 s


def counts(system: str, mode: str, quick: bool) -> int:
    """Messages written per mode. ``--full``: 1 M, except batch 1 on RabbitMQ and ActiveMQ,
    which acknowledge each message (100 k: hundreds of msg/s here)."""
    kafka = system in KAFKA_PROTOCOL
    if quick:
        if kafka:
            return 20_000 if mode == "batch 1" else 100_000
        return 2_000 if mode == "batch 1" else 20_000
    if not kafka and mode == "batch 1":
        return 100_000
    return 1_000_000


def slug(mode: str) -> str:
    return "bench-" + mode.replace(" ", "-")


@contextmanager
def started(system: str) -> Iterator[tuple[Driver, Any, str]]:
    """(driver, server, version) for ``system``; the server is stopped on the way out."""
    server: Any
    driver: Driver
    if system == "sluice":
        from bench.peers.kafka import KafkaDriver, SluiceServer

        server = SluiceServer()
        server.start()
        driver, version = KafkaDriver("sluice", server.bootstrap), "this tree"
    elif system == "tansu":
        from bench.peers import tansu
        from bench.peers.kafka import KafkaDriver

        server = tansu.TansuServer()
        server.start()
        driver, version = KafkaDriver("tansu", server.bootstrap), tansu.version()
    elif system == "rabbitmq":
        from bench.peers import rabbitmq

        server = rabbitmq.RabbitMQServer()
        server.start()
        driver, version = rabbitmq.RabbitMQDriver(server), rabbitmq.version()
    elif system == "activemq":
        from bench.peers import activemq

        server = activemq.ActiveMQServer()
        server.start()
        version = f"{activemq.version()}, {activemq.java_version()}"
        driver = activemq.ActiveMQDriver(server)
    else:
        raise ValueError(f"unknown system {system!r}; expected one of {SYSTEMS}")
    try:
        yield driver, server, version
    finally:
        server.stop()


def measure(system: str, results: Results, records: dict[str, Any], quick: bool) -> None:
    timeout = 30.0 if quick else 300.0
    t0 = time.perf_counter()
    with started(system) as (driver, server, version):
        print(f"  {system}: {version}, up in {time.perf_counter() - t0:.1f}s", flush=True)
        records["versions"][system] = version
        records["modes"][system] = driver.MODES
        data_dir = getattr(server, "data_dir", None)
        written: dict[str, int] = {}
        for mode in driver.MODES:
            n = counts(system, mode, quick)
            before = disk_usage(data_dir) if data_dir is not None else 0
            sampler = Sampler()
            seconds = driver.produce(slug(mode), n, mode, sampler)
            written[mode] = n
            results.add("produce", system, f"{mode}, msg/s", n / seconds, "msg/s")
            results.add("produce", system, f"{mode}, MB/s", n * MESSAGE / 1e6 / seconds, "MB/s")
            records["produce"].append({
                "system": system, "mode": mode, "count": n, "seconds": seconds,
                "samples": sampler.samples,
            })  # fmt: skip
            if data_dir is None:
                overhead = math.nan
                results.add("storage_overhead", system, f"{mode}, n/a: memory only", overhead, "B")
            else:
                time.sleep(SETTLE)
                os.sync()
                overhead = (disk_usage(data_dir) - before) / n - MESSAGE
                results.add("storage_overhead", system, f"written {mode}, per message", overhead,
                            "B")  # fmt: skip
            records["storage"].append({"system": system, "mode": mode, "count": n,
                                       "bytes_per_message": overhead})  # fmt: skip
        for mode, n in written.items():
            read = driver.consume(slug(mode), n, timeout)
            metric = f"from {mode} writes, msg/s"
            if not read.complete:
                metric += f" (TIMED OUT: {read.seen:,} of {n:,} in {timeout:.0f}s)"
            results.add("consume", system, metric, read.rate, "msg/s")
            records["consume"].append(_read_record(system, mode, read, timeout))
        first_mode = "batch 50"
        driver.produce("bench-first", 1_000, first_mode, Sampler())
        how, first = driver.first_message("bench-first", timeout)
        value = math.nan if first is None else first * 1000
        results.add("first_message", system, f"after {how}", value, "ms")
        records["first_message"].append({"system": system, "how": how, "ms": value})
    print(f"  {system}: done in {time.perf_counter() - t0:.0f}s", flush=True)


def _read_record(system: str, mode: str, read: Read, timeout: float) -> dict[str, Any]:
    return {
        "system": system, "mode": mode, "wanted": read.wanted, "seen": read.seen,
        "seconds": read.seconds, "rate": read.rate, "complete": read.complete,
        "timeout": timeout, "first_ms": None if read.first is None else read.first * 1000,
    }  # fmt: skip


def run(results: Results, quick: bool, systems: tuple[str, ...] = SYSTEMS) -> None:
    """Run every system in turn; a system that fails is reported and skipped, not fatal."""
    records: dict[str, Any] = {
        "quick": quick, "message_bytes": MESSAGE, "versions": {}, "modes": {},
        "produce": [], "consume": [], "storage": [], "first_message": [], "failed": {},
    }  # fmt: skip
    for system in systems:
        try:
            measure(system, results, records, quick)
        except Exception as e:  # one broken peer must not lose the others' numbers
            print(f"  {system}: FAILED: {e}", flush=True)
            records["failed"][system] = str(e)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "peers.json").write_text(json.dumps(records, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    args = parser.parse_args()
    results = Results()
    started_at = time.time()
    run(results, not args.full, tuple(s for s in args.systems.split(",") if s))
    path = results.save("python -m bench.bench_peers" + (" --full" if args.full else ""))
    from bench import plots

    for png in plots.render(OUT_DIR):
        print(f"plot {png}")
    print(f"wrote {path} in {time.time() - started_at:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
