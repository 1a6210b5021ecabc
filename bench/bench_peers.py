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

How long, and how often (so a figure can be judged):

* Every timed phase lasts at least ``PHASE_SECONDS`` (3 s quick, 10 s full). The message count
  of each system and way is scaled to that system's rate: a calibration write of
  ``probe_count`` messages (not reported) gives the rate, and the count is what that rate
  writes in the phase's time, with a margin (``scaled_count``; ``--full`` never writes fewer
  than the paper's 1 M, or 100 k at batch 1 for RabbitMQ and ActiveMQ). A run that still
  ends early raises the count of the runs after it. A read lasts at least
  as long: the Kafka-protocol systems read the topic again from the start until it has
  (``Driver.consume``'s ``min_seconds``); RabbitMQ and ActiveMQ remove what they deliver and
  read once.
* Each produce, storage and consume figure is measured ``REPEATS`` (3) times and reported as the
  median with every run kept (``runs``: min/median/max). The systems take turns within each
  repetition — every system's batch 1, then every system's batch 50, ... — so a change in
  the machine's load falls on all of them, and the load average is noted with each repetition.
* Each repetition writes a topic/queue of its own; a memory-only broker (Tansu) deletes it once
  read, so its memory holds one topic at a time.

The client settings (identical for Sluice and Tansu) go to ``peers.json`` (``client``), which
the report quotes. Every number goes to ``Results``; the structured records (series included) to
``build/bench/peers.json`` for ``bench/plots.py``.

Standalone: ``python -m bench.bench_peers [--full] [--systems sluice,tansu,rabbitmq,activemq]``;
``sluice-uvloop`` (the same broker under uvloop, ``bench.uvloop_broker``) may be added.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.bench_broker import load_average
from bench.peers import MESSAGE, Driver, Read, Sampler, disk_usage
from bench.results import OUT_DIR, REPEATS, Results, median

SYSTEMS = ("sluice", "tansu", "rabbitmq", "activemq")  # the default selection, in order
KNOWN = (*SYSTEMS, "sluice-uvloop")
KAFKA_PROTOCOL = ("sluice", "sluice-uvloop", "tansu")
SETTLE = 3.0  # seconds before measuring disk usage: KahaDB checkpoints every 2 s
PHASE_SECONDS = {True: 3.0, False: 10.0}  # quick, full: the shortest timed phase
MARGIN = 1.5  # a scaled count aims this much beyond the phase's time: a probe is noisy
MAX_COUNT = 20_000_000  # 4 GB of payload: a bound on what a calibration gone wrong can ask


def probe_count(system: str, mode: str) -> int:
    """Messages of the calibration write that measures ``system``'s rate in ``mode``."""
    if system in KAFKA_PROTOCOL:
        return 5_000 if mode == "batch 1" else 50_000
    return 500 if mode == "batch 1" else 5_000


def floor_count(system: str, mode: str, quick: bool) -> int:
    """The fewest messages a measured write may have: the probe's count, and in ``--full``
    the paper's 1 M (100 k at batch 1 on RabbitMQ and ActiveMQ, which acknowledge each
    message: hundreds of msg/s here)."""
    if quick:
        return probe_count(system, mode)
    if system not in KAFKA_PROTOCOL and mode == "batch 1":
        return 100_000
    return 1_000_000


def scaled_count(rate: float, seconds: float, floor: int, ceiling: int = MAX_COUNT) -> int:
    """Messages that take at least ``seconds`` at ``rate`` msg/s (times ``MARGIN``, rounded up
    to a thousand), within ``floor`` .. ``ceiling``."""
    if not math.isfinite(rate) or rate <= 0:
        return floor
    wanted = math.ceil(rate * seconds * MARGIN / 1000) * 1000
    return max(floor, min(ceiling, wanted))


def select(text: str) -> tuple[str, ...]:
    """``"sluice,tansu"`` -> ``("sluice", "tansu")``; ``ValueError`` naming an unknown one."""
    chosen = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in KNOWN]
    if unknown or not chosen:
        raise ValueError(
            f"unknown systems {unknown or text!r}; expected some of {', '.join(KNOWN)}"
        )
    return chosen


def slug(mode: str) -> str:
    return "bench-" + mode.replace(" ", "-")


@contextmanager
def started(system: str) -> Iterator[tuple[Driver, Any, str]]:
    """(driver, server, version) for ``system``; the server is stopped on the way out."""
    server: Any
    driver: Driver
    if system in ("sluice", "sluice-uvloop"):
        from bench.bench_broker import ensure_uvloop
        from bench.peers.kafka import KafkaDriver, SluiceServer

        loop = "uvloop" if system == "sluice-uvloop" else "asyncio"
        server = SluiceServer(loop)
        server.start()
        version = "this tree" + (f", uvloop {ensure_uvloop()}" if loop == "uvloop" else "")
        driver = KafkaDriver(system, server.bootstrap)
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
        raise ValueError(f"unknown system {system!r}; expected one of {KNOWN}")
    try:
        yield driver, server, version
    finally:
        server.stop()


@dataclass
class Live:
    """A started system and what was measured of it so far."""

    driver: Driver
    server: Any
    counts: dict[str, int] = field(default_factory=dict)  # mode -> messages per write
    produced: dict[str, list[float]] = field(default_factory=dict)  # mode -> msg/s per run
    overhead: dict[str, list[float]] = field(default_factory=dict)  # mode -> B/msg per run
    reads: dict[str, list[Read]] = field(default_factory=dict)  # mode -> reads per run


def measure(systems: tuple[str, ...], results: Results, records: dict[str, Any],
            quick: bool) -> None:  # fmt: skip
    """Start every system, calibrate, then ``REPEATS`` rounds in which the systems take turns;
    a system that fails is reported, stopped and left out of what follows."""
    seconds = PHASE_SECONDS[quick]
    timeout = max(30.0, seconds * 10) if quick else 300.0
    live: dict[str, Live] = {}
    with ExitStack() as stack:
        for system in systems:
            t0 = time.perf_counter()
            try:
                driver, server, version = stack.enter_context(started(system))
            except Exception as e:  # one broken peer must not lose the others' numbers
                _failed(records, system, e)
                continue
            print(f"  {system}: {version}, up in {time.perf_counter() - t0:.1f}s", flush=True)
            records["versions"][system] = version
            records["modes"][system] = driver.MODES
            live[system] = Live(driver, server)
        for system, mode in _turns(live):
            if system not in live:  # failed meanwhile
                continue
            with _guard(live, records, system):
                run = live[system]
                n = probe_count(system, mode)
                rate = n / run.driver.produce(f"bench-probe-{slug(mode)}", n, mode, Sampler())
                _forget(run, f"bench-probe-{slug(mode)}")
                run.counts[mode] = scaled_count(rate, seconds, floor_count(system, mode, quick))
                print(f"  {system} {mode}: calibrated at {rate:,.0f} msg/s, writing "
                      f"{run.counts[mode]:,} per run", flush=True)  # fmt: skip
        for repeat in range(REPEATS):
            records["load_average"].append(load_average())
            print(f"  repetition {repeat + 1} of {REPEATS}, load average "
                  f"{records['load_average'][-1]}", flush=True)  # fmt: skip
            for system, mode in _turns(live):
                if system not in live or mode not in live[system].counts:
                    continue
                with _guard(live, records, system):
                    _one_run(system, mode, repeat, live[system], records, seconds, timeout)
        for system, run in list(live.items()):
            _report(system, run, results, records, timeout)
            with _guard(live, records, system):
                run.driver.produce("bench-first", 1_000, "batch 50", Sampler())
                how, first = run.driver.first_message("bench-first", timeout)
                value = math.nan if first is None else first * 1000
                results.add("first_message", system, f"after {how}", value, "ms")
                records["first_message"].append({"system": system, "how": how, "ms": value})


def _turns(live: dict[str, Live]) -> list[tuple[str, str]]:
    """(system, mode) in the order they run: every system's first mode, then the second..."""
    modes = list(dict.fromkeys(m for run in live.values() for m in run.driver.MODES))
    return [(s, m) for m in modes for s, run in list(live.items()) if m in run.driver.MODES]


@contextmanager
def _guard(live: dict[str, Live], records: dict[str, Any], system: str) -> Iterator[None]:
    """Run a step of ``system`` (in ``live``); when it fails, report it, stop the system and
    drop it from ``live`` so the others go on."""
    try:
        yield
    except Exception as e:
        _failed(records, system, e)
        run = live.pop(system)
        with contextlib.suppress(Exception):
            run.server.stop()


def _failed(records: dict[str, Any], system: str, error: Exception) -> None:
    print(f"  {system}: FAILED: {error}", flush=True)
    records["failed"][system] = str(error)


def _forget(run: Live, queue: str) -> None:
    """Delete a read topic from a memory-only broker (its memory holds one at a time)."""
    delete = getattr(run.driver, "delete", None)
    if getattr(run.server, "data_dir", None) is None and delete is not None:
        delete(queue)


def _one_run(system: str, mode: str, repeat: int, run: Live, records: dict[str, Any],
             seconds: float, timeout: float) -> None:  # fmt: skip
    """Write ``run.counts[mode]`` messages to a queue of this repetition's own, measure the
    disk it took, read it back for at least ``seconds``."""
    n = run.counts[mode]
    queue = f"{slug(mode)}-r{repeat + 1}"
    data_dir = getattr(run.server, "data_dir", None)
    before = disk_usage(data_dir) if data_dir is not None else 0
    sampler = Sampler()
    took = run.driver.produce(queue, n, mode, sampler)
    run.produced.setdefault(mode, []).append(n / took)
    if took < seconds:  # the probe was slow: the next runs write what this rate needs
        run.counts[mode] = max(n, scaled_count(n / took, seconds, n))
    records["produce"].append({
        "system": system, "mode": mode, "repeat": repeat, "count": n, "seconds": took,
        "samples": sampler.samples,
    })  # fmt: skip
    if data_dir is None:
        run.overhead.setdefault(mode, []).append(math.nan)
    else:
        time.sleep(SETTLE)
        os.sync()
        run.overhead.setdefault(mode, []).append((disk_usage(data_dir) - before) / n - MESSAGE)
    read = run.driver.consume(queue, n, timeout, seconds)
    run.reads.setdefault(mode, []).append(read)
    print(f"  {system} {mode} #{repeat + 1}: wrote {n:,} in {took:.1f}s ({n / took:,.0f} msg/s), "
          f"read {read.seen:,} in {read.seconds:.1f}s ({read.rate:,.0f} msg/s, "
          f"{read.passes} passes)", flush=True)  # fmt: skip
    _forget(run, queue)


def _report(system: str, run: Live, results: Results, records: dict[str, Any],
            timeout: float) -> None:  # fmt: skip
    """The rows of ``system``: each figure the median of its runs, with the runs."""
    for mode, rates in run.produced.items():
        results.add_runs("produce", system, f"{mode}, msg/s", rates, "msg/s")
        results.add_runs("produce", system, f"{mode}, MB/s", [r * MESSAGE / 1e6 for r in rates],
                         "MB/s")  # fmt: skip
    for mode, overheads in run.overhead.items():
        if all(math.isnan(v) for v in overheads):
            results.add("storage_overhead", system, f"{mode}, n/a: memory only", math.nan, "B")
            value = math.nan
        else:
            results.add_runs("storage_overhead", system, f"written {mode}, per message",
                             overheads, "B")  # fmt: skip
            value = median(overheads)
        records["storage"].append({"system": system, "mode": mode, "count": run.counts[mode],
                                   "bytes_per_message": value, "runs": overheads})  # fmt: skip
    for mode, reads in run.reads.items():
        metric = f"from {mode} writes, msg/s"
        short = [r for r in reads if not r.complete]
        if short:
            metric += (f" (TIMED OUT: {short[0].seen:,} of {short[0].wanted:,} in "
                       f"{timeout:.0f}s)")  # fmt: skip
        rates = [r.rate for r in reads]
        results.add_runs("consume", system, metric, rates, "msg/s")
        records["consume"].append(_read_record(system, mode, reads, timeout))


def _read_record(system: str, mode: str, reads: list[Read], timeout: float) -> dict[str, Any]:
    """The consume record of ``system`` and ``mode``: the median run's figures, every rate."""
    rates = [r.rate for r in reads]
    mid = sorted(reads, key=lambda r: r.rate)[len(reads) // 2]
    return {
        "system": system, "mode": mode, "wanted": mid.wanted, "seen": mid.seen,
        "seconds": mid.seconds, "rate": median(rates), "runs": sorted(rates),
        "passes": mid.passes, "complete": all(r.complete for r in reads), "timeout": timeout,
        "first_ms": None if mid.first is None else mid.first * 1000,
    }  # fmt: skip


def run(results: Results, quick: bool, systems: tuple[str, ...] = SYSTEMS) -> None:
    """Measure ``systems`` (see the module docstring); a system that fails is reported and
    left out, not fatal. The load averages go to the notes, the client settings to
    ``peers.json``."""
    records: dict[str, Any] = {
        "quick": quick, "message_bytes": MESSAGE, "versions": {}, "modes": {},
        "phase_seconds": PHASE_SECONDS[quick], "repeats": REPEATS, "load_average": [],
        "produce": [], "consume": [], "storage": [], "first_message": [], "failed": {},
    }  # fmt: skip
    if any(s in KAFKA_PROTOCOL for s in systems):
        from bench.peers.kafka import client_settings

        records["client"] = client_settings()
    t0 = time.perf_counter()
    measure(systems, results, records, quick)
    print(f"  peers: done in {time.perf_counter() - t0:.0f}s", flush=True)
    # One note for the section (the report prints the notes of all four experiments together);
    # the client settings are in peers.json, which the report quotes.
    results.note("produce", f"produce, storage and consume: median of {REPEATS} runs "
                 f"(min–max), systems taking turns, each timed phase at least "
                 f"{PHASE_SECONDS[quick]:.0f} s; load average "
                 f"{', '.join(records['load_average'])} at the start of each round")  # fmt: skip
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "peers.json").write_text(json.dumps(records, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument(
        "--systems",
        type=select,
        default=SYSTEMS,
        help=f"some of {', '.join(KNOWN)} (default: {', '.join(SYSTEMS)})",
    )
    args = parser.parse_args()
    results = Results()
    started_at = time.time()
    run(results, not args.full, args.systems)
    path = results.save("python -m bench.bench_peers" + (" --full" if args.full else ""))
    from bench import plots

    for png in plots.render(OUT_DIR):
        print(f"plot {png}")
    print(f"wrote {path} in {time.time() - started_at:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
