"""The nightly load of the same rows as one topic and as many small ones: does cost grow with
partitions or with rows?

A load reads its topics' partitions and writes one Parquet file per topic and date; the paper's
deployment has hundreds of topics, most of them small. So the same ``SHAPE_ROWS`` records are
loaded as two **shapes** (``SHAPES``, the broker ``bench.bench_load`` started): one topic of
``NARROW_PARTITIONS`` partitions (narrow) and ``WIDE_TOPICS`` topics of ``WIDE_PARTITIONS``
partitions (wide), each value ``VALUE_BYTES`` bytes (an 8-byte counter, then a fixed pad), spread
round-robin over the shape's partitions. Two measurements, each of its own experiment:

**Warm** (experiment ``nightly_load_shapes``, local mode, in the Spark session of
``bench.bench_load``'s main measurement, after it; the wide shape is 800 partitions of 100
rows). The load packs small ranges into tasks (``rowsPerTask``) and writes one file per topic
and date per task, so the wide shape should cost about what the narrow one does. Both shapes'
records are produced first (``run_shapes`` creates the topics);
then each shape is loaded once unmeasured (the main measurement ran the narrow shape's code in
the Python workers but never the packed reader's, so the first wide load would pay that alone),
then ``SHAPE_PAIRS`` pairs of loads, each into a fresh table, alternating which shape goes
first. The rows: each shape's whole-load, read+write and plan seconds (the median of the
pairs, with their spread), its warm-up load's seconds, its Parquet file count, the ratio wide
/ narrow (the median of the pairs' ratios; the goal: at most 1.5, with at most one file per
topic and date), the CPU seconds each kind of process used during each measured load
(``cpu_seconds``: the driver, Spark's JVM, PySpark's Python workers, the broker, and all of
them; medians of the pairs) — on two cores a load that needs more than two CPU seconds a
second of its run waits for the CPU, whatever is made parallel — and how long one ``mkdir`` of
a new directory takes on the bench's disk before the warm-ups and after the pairs (the wide
shape's tasks make two per file, ``topic=`` and ``date=``, and create the file). It varies
with the filesystem and from minute to minute: 0.02 to 1 ms of kernel CPU on this machine's
ext4, which has no journal, so the kernel may skip inodes deleted in the last minute or more,
one by one, when it allocates a new one (``recently_deleted()`` under ``find_inode_bit``,
seen with ``perf`` when a ``mkdir`` took 0.35–0.85 ms, minutes after test and bench runs had
deleted their files). Before the warm-ups the bench waits (``_settle_disk``, at most
``SETTLE_LIMIT_S``) until a new directory is cheap; the rows give the wait.

**As cron runs it** (experiment ``nightly_load_shapes_cron``, after the warm one, with no Spark
session left in the bench's process): each load is a ``sluice load --config FILE`` command of
its own, as a nightly job runs it — a new Python driver, a new Spark JVM (``local[*]``: the
machine's two cores) and new Python workers each time, the shape's topics named in the file, a
fresh warehouse per load. One unmeasured command of each shape (the first after the warm
measurement pays for files its JVM reads cold), then ``CRON_PAIRS`` pairs alternating which
shape goes first. The rows: each shape's seconds from starting the command to its exit, and its
plan and read+write phases (from the run report the command writes,
``<warehouse>/_reports/<run_id>.json``); the ratios wide / narrow of the command and of its
read+write phase (medians of the pairs' ratios, with their spread). The issue that set the 1.5×
goal measured this way (the read+write phase of ``sluice load``: 39.9 s against 3.4 s); here the
start of Spark and of its Python workers, paid by both shapes alike, is in both figures, so
what the wide shape costs per topic, partition and file weighs less than in the warm
measurement, which is the stricter of the two.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import proc
from bench.bench_broker import REPO
from bench.results import Results

SHAPE_ROWS = 80_000
NARROW_PARTITIONS = 8
WIDE_TOPICS = 200
WIDE_PARTITIONS = 4
VALUE_BYTES = 200  # as the main measurement's values (bench.bench_load)
SHAPES: dict[str, list[tuple[str, int]]] = {
    "narrow": [("shape_narrow", NARROW_PARTITIONS)],
    "wide": [(f"shape_wide_{i:03d}", WIDE_PARTITIONS) for i in range(WIDE_TOPICS)],
}
"""Each shape's topics, with their partition counts."""
SHAPE_PAIRS = 7  # run_shapes' measured pairs of loads
CRON_PAIRS = 3  # run_shapes_cron's measured pairs of commands (each ~8 s on this machine)
CRON_TIMEOUT_S = 600.0  # one sluice load command, Spark's start included


def _alternating(pairs: int) -> Iterator[tuple[int, str]]:
    """(pair, shape name) of ``pairs`` pairs of loads, each pair in the other order from the
    one before it (narrow first in pair 0), so neither shape always runs after the other."""
    for pair in range(pairs):
        for name in SHAPES if pair % 2 == 0 else reversed(SHAPES):
            yield pair, name


def _produce_spread(bootstrap: str, partitions: list[tuple[str, int]], count: int) -> None:
    """``count`` ``VALUE_BYTES`` values spread round-robin over ``partitions``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20})
    pad = os.urandom(VALUE_BYTES - 8)
    for i in range(count):
        topic, partition = partitions[i % len(partitions)]
        while True:
            try:
                producer.produce(topic, i.to_bytes(8, "big") + pad, partition=partition)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("shapes: messages left undelivered")


def run_shapes(
    results: Results, spark: Any, bootstrap: str, work: Path, broker_pid: int | None = None
) -> dict[str, Any]:
    """The narrow and the wide shape of ``SHAPE_ROWS`` rows (module doc) against the broker at
    ``bootstrap`` (process ``broker_pid``, for its CPU seconds); returns the figures."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from sluice.pipeline.load.run import LoadConfig, run_load

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, n, 1) for shape in SHAPES.values() for t, n in shape]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
    del admin
    for shape in SHAPES.values():
        _produce_spread(bootstrap, [(t, p) for t, n in shape for p in range(n)], SHAPE_ROWS)

    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in SHAPES}

    def load(name: str, table: str) -> tuple[float, Any, Path]:
        out = work / table
        config = LoadConfig(
            bootstrap_servers=bootstrap, topics=tuple(t for t, _ in SHAPES[name]),
            warehouse=f"file://{out}",
        )  # fmt: skip
        # Every measured load starts from an empty collector: the load pauses the cyclic
        # collector in its own phases, and the collection it put off would otherwise fall into
        # the next load, of the other shape (a full one walks the driver's heap: ~40 ms).
        gc.collect()
        before = cpu_seconds(broker_pid)
        started = time.perf_counter()
        report = run_load(config, spark, progress=lambda _m: None)
        seconds = time.perf_counter() - started
        after = cpu_seconds(broker_pid)
        cpu[name].append({kind: after[kind] - before[kind] for kind in CPU_KINDS})
        if report.total_rows != SHAPE_ROWS:
            raise RuntimeError(f"shape {name}: {report.total_rows} rows, expected {SHAPE_ROWS}")
        return seconds, report, out

    # Settled first, then warmed: an idle minute lets Spark stop its Python workers, and a
    # load that starts new ones pays their imports.
    settled_after, mkdir_before = _settle_disk(work / "mkdir-probe-before")
    warm_up = {name: load(name, f"shape-{name}-warm-up")[0] for name in SHAPES}
    for measured in cpu.values():  # the pairs' only
        measured.clear()
    runs: dict[str, list[tuple[float, Any, Path]]] = {name: [] for name in SHAPES}
    for pair, name in _alternating(SHAPE_PAIRS):
        runs[name].append(load(name, f"shape-{name}-{pair}"))
    figures: dict[str, Any] = {"mkdir_ms": (mkdir_before, _mkdir_ms(work / "mkdir-probe"))}
    for name, shape in SHAPES.items():
        seconds = [s for s, _, _ in runs[name]]
        phases = {
            phase: [r.phases.get(phase, 0.0) for _, r, _ in runs[name]]
            for phase in ("plan", "read+write", "verify", "commit")
        }
        out = runs[name][-1][2]
        files = len(list((out / "events").rglob("topic=*/date=*/*.parquet")))
        partitions = sum(n for _, n in shape)
        label = f"{len(shape)} topics x {shape[0][1]} partitions"
        figures[name] = {"seconds": statistics.median(seconds), "files": files,
                         "phases": {p: statistics.median(v) for p, v in phases.items()},
                         "warm_up": warm_up[name],
                         "cpu": {k: statistics.median(c[k] for c in cpu[name])
                                 for k in CPU_KINDS}}  # fmt: skip
        results.add_runs("nightly_load_shapes", f"sluice {name}", f"{SHAPE_ROWS:,} rows, {label}",
                         seconds, "s")  # fmt: skip
        results.add_runs("nightly_load_shapes", f"sluice {name}", "phase read+write",
                         phases["read+write"], "s")  # fmt: skip
        results.add_runs("nightly_load_shapes", f"sluice {name}", "phase plan", phases["plan"],
                         "s")  # fmt: skip
        results.add("nightly_load_shapes", f"sluice {name}", "first load (unmeasured warm-up)",
                    warm_up[name], "s")  # fmt: skip
        for kind in CPU_KINDS:
            results.add_runs("nightly_load_shapes", f"sluice {name}", f"CPU s: {kind}",
                             [c[kind] for c in cpu[name]], "s")  # fmt: skip
        results.add_runs("nightly_load_shapes", f"sluice {name}", "CPU s: all",
                         [sum(c.values()) for c in cpu[name]], "s")  # fmt: skip
        results.add("nightly_load_shapes", f"sluice {name}",
                    f"parquet files ({partitions} partitions)", files, "files")  # fmt: skip
    ratios = [w[0] / n[0] for n, w in zip(runs["narrow"], runs["wide"], strict=True)]
    figures["ratios"] = ratios
    results.add_runs("nightly_load_shapes", "sluice wide/narrow", "whole load", ratios, "ratio")
    results.add("nightly_load_shapes", "disk", "waited for new directories to be cheap",
                settled_after, "s")  # fmt: skip
    for when, took in zip(("before the warm-ups", "after the pairs"), figures["mkdir_ms"],
                          strict=True):  # fmt: skip
        results.add("nightly_load_shapes", "disk", f"mkdir of a new directory, {when}",
                    took, "ms")  # fmt: skip
    results.note("nightly_load_shapes", f"wide/narrow of each pair: "
                 f"{', '.join(f'{r:.2f}' for r in ratios)}; load average {proc.load_average()} "
                 "(1, 5, 15 min) after the pairs")  # fmt: skip
    return figures


CPU_KINDS = ("driver", "spark JVM", "spark Python workers", "broker")


def cpu_seconds(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each kind of process of a local-mode load
    (``bench.proc``): this process (the driver), its Java descendants (Spark's JVM), its other
    descendants (PySpark's daemon and Python workers) and the broker process ``broker_pid``
    (with its descendants); a kind with no process is 0. Processes that already ended are not
    counted, so a load's figure is the difference of two calls around it while its processes
    live (PySpark reuses its workers)."""
    table = proc.processes()
    me = os.getpid()
    broker = proc.descendants(table, broker_pid) if broker_pid in table else set()
    figures = dict.fromkeys(CPU_KINDS, 0.0)
    figures["driver"] = table[me].cpu
    for pid in proc.descendants(table, me) - {me} - broker:
        kind = "spark JVM" if table[pid].name == "java" else "spark Python workers"
        figures[kind] += table[pid].cpu
    figures["broker"] = sum(table[pid].cpu for pid in broker)
    return figures


SETTLED_MKDIR_MS = 0.05
"""A ``mkdir`` this fast means no recently deleted inodes in the way (module doc)."""
SETTLE_LIMIT_S = 180.0


def _settle_disk(
    probe: Path, limit_s: float = SETTLE_LIMIT_S, pause_s: float = 5.0
) -> tuple[float, float]:
    """Wait, at most ``limit_s``, until a ``mkdir`` under ``probe`` takes at most
    ``SETTLED_MKDIR_MS`` (a probe of 50 every ``pause_s``; their directories are kept);
    return (seconds waited, the last probe's ms). On this VM's unjournaled ext4, a new file or
    directory may skip recently deleted inodes one by one (``_mkdir_ms``), at times for minutes
    after earlier runs deleted their files: a cost the wide shape's 600 new inodes a load pay
    and the narrow one's ten do not, and a journaled disk does not have. Not settled after
    ``limit_s``: the pairs run anyway, and the rows say so."""
    started = time.monotonic()
    for attempt in itertools.count():
        took = _mkdir_ms(probe / f"attempt-{attempt}", 50, remove=False)
        waited = time.monotonic() - started
        if took <= SETTLED_MKDIR_MS or waited + pause_s > limit_s:
            return waited, took
        time.sleep(pause_s)
    raise AssertionError("unreachable")  # pragma: no cover


def _mkdir_ms(probe: Path, count: int = 200, *, remove: bool = True) -> float:
    """Milliseconds per ``mkdir`` of a new directory under ``probe`` (the median of the
    ``count`` timed; created as ``topic=``/``date=`` pairs as the load makes them), removed
    after unless ``remove=False``: on an ext4 without a journal (this VM's disk) an inode
    deleted in the last minute or more may be skipped, one by one, when the next is allocated,
    so a probe that deletes its directories just before the pairs could slow their loads."""
    took = []
    try:
        for i in range(count // 2):
            for path in (probe / f"topic=t{i}", probe / f"topic=t{i}" / "date=2026-01-01"):
                started = time.perf_counter()
                path.mkdir(parents=True)
                took.append(time.perf_counter() - started)
    finally:
        if remove:
            shutil.rmtree(probe, ignore_errors=True)
    return statistics.median(took) * 1000


def run_shapes_cron(results: Results, bootstrap: str, work: Path) -> dict[str, Any]:
    """Each shape (``SHAPES``, produced by ``run_shapes``) loaded by ``sluice load`` commands of
    their own against the broker at ``bootstrap`` (module doc), each into a new warehouse under
    ``work``; records the rows (``record_cron``) and returns their figures."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in SHAPES}

    def load(name: str, warehouse: Path) -> dict[str, Any]:
        config = warehouse.with_suffix(".properties")
        config.write_text(
            f"kafka.bootstrap.servers={bootstrap}\n"
            f"topics={','.join(topic for topic, _ in SHAPES[name])}\n"
            f"warehouse.path={warehouse}\ntable=events\n"
        )
        log = warehouse.with_suffix(".log")
        started = time.perf_counter()
        status = proc.run_in_session(
            [sys.executable, "-m", "sluice", "load", "--config", str(config)], log,
            CRON_TIMEOUT_S, cwd=REPO,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        if status != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            said = (
                f"did not finish in {CRON_TIMEOUT_S:.0f}s" if status is None else f"exited {status}"
            )
            raise RuntimeError(f"cron shape {name}: sluice load {said}:\n{tail}")
        [report] = (warehouse / "_reports").glob("*.json")
        figures = json.loads(report.read_text())
        if figures["total_rows"] != SHAPE_ROWS:
            raise RuntimeError(
                f"cron shape {name}: {figures['total_rows']} rows, expected {SHAPE_ROWS}"
            )
        files = len(list(warehouse.glob("events/load=*/topic=*/date=*/*.parquet")))
        return {"seconds": seconds, "phases": figures["phases"], "files": files}

    warm_up = {name: load(name, work / f"cron-{name}-warm-up")["seconds"] for name in SHAPES}
    for pair, name in _alternating(CRON_PAIRS):
        runs[name].append(load(name, work / f"cron-{name}-{pair}"))
    figures = {"runs": runs, "warm_up": warm_up, "load_average": proc.load_average()}
    record_cron(results, figures)
    return figures


def record_cron(results: Results, figures: dict[str, Any]) -> None:
    """The rows of ``run_shapes_cron``'s ``figures``: per shape its commands' seconds, plan
    and read+write phases, the warm-up command's seconds and the last command's Parquet files;
    the ratios wide / narrow of each pair (the command, its read+write phase)."""
    experiment, runs = "nightly_load_shapes_cron", figures["runs"]
    command = f"{SHAPE_ROWS:,} rows: sluice load"  # the shapes' topics are in the module doc
    for name in SHAPES:
        system = f"sluice {name}, one command a load"
        results.add_runs(experiment, system, command, [r["seconds"] for r in runs[name]], "s")
        for phase in ("plan", "read+write"):
            results.add_runs(experiment, system, f"phase {phase}",
                             [r["phases"][phase] for r in runs[name]], "s")  # fmt: skip
        results.add(experiment, system, "first command (unmeasured warm-up)",
                    figures["warm_up"][name], "s")  # fmt: skip
        results.add(experiment, system, "parquet files (the last command's)",
                    runs[name][-1]["files"], "files")  # fmt: skip
    pairs = list(zip(runs["narrow"], runs["wide"], strict=True))
    ratios = {
        command: [w["seconds"] / n["seconds"] for n, w in pairs],
        "phase read+write": [w["phases"]["read+write"] / n["phases"]["read+write"]
                             for n, w in pairs],
    }  # fmt: skip
    for metric, values in ratios.items():
        results.add_runs(experiment, "sluice wide/narrow, one command a load", metric, values,
                         "ratio")  # fmt: skip
    results.note(experiment, "wide/narrow of each pair (command; read+write): " + ", ".join(
        f"{c:.2f}; {p:.2f}" for c, p in zip(ratios[command], ratios["phase read+write"],
                                             strict=True)
    ) + f"; load average {figures['load_average']} (1, 5, 15 min) after the pairs")  # fmt: skip
