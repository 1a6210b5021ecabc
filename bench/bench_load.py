"""The nightly load against Spark itself, on a fair baseline, in local mode and on a cluster.

The load: N messages over 8 partitions, each value 200 incompressible bytes (a counter and
random bytes: no two equal, nothing for Parquet's dictionary or codec to fold away), fetched and
written as Parquet by topic and date by one Spark task per split (the load's Camus-style path,
``sluice.pipeline.load.split_writer``: the split reader, then pyarrow's Parquet writer in the
same Python worker), verified and published atomically by the driver.

The baseline: the same Spark session writing rows of the same columns (``key`` null, ``value``
200 incompressible bytes from ``randstr``, ``topic``, ``partition``, ``offset``,
a timestamp that moves with the row, ``timestampType``, ``headers`` null, ``date``),
generated in the JVM (``spark.range``), partitioned the same way — Spark's own write with no
source to read. The ratio (baseline seconds / load seconds) is the row ``{"experiment":
"nightly_load", "system": "sluice/in-memory", "unit": "ratio"}``, comparable across runs.
Both tables' Parquet bytes are recorded: comparable sizes are what make the ratio fair (a
constant value dictionary-encodes to almost nothing and made the old baseline 2.4× faster).
Before either is timed, a small baseline write warms the JVM, so neither side pays for the
other's warm-up (the load still pays for its Python workers' start: that is its own cost).

Two runs of that measurement (``measure``), one after the other against the same broker and
topic, each into its own warehouse:

* **local mode** — ``local[2]``, in this process;
* **a two-worker standalone cluster** — ``sluice.testing.spark_cluster.SparkCluster``: a master
  and two workers of one core each (executors of ``EXECUTOR_MEMORY``, the full JIT), every one
  a JVM of its own, sharing this machine's disk; the driver is a process of its own
  (``python -m bench.bench_load <spec.json>``, as the cluster tests run the load), which writes
  its figures to a JSON file this process reads. Its rows are the local ones' systems with
  ``CLUSTER`` appended (``sluice on standalone-2-workers``, ``sluice/in-memory on
  standalone-2-workers``...). Without Java the cluster run is left out, with a note.

Both have two task slots, so the split tasks' time (fetch and Parquet write, summed over the
splits) is divided by two; the rest of read+write is Spark scheduling the tasks and starting
its Python workers. With ``SLUICE_BENCH_PROFILE=1`` (and ``py-spy`` installed) the local run's
Spark Python workers are sampled during the load and the profile's top lines become rows of
the system ``profile`` (unit ``%``: share of the workers' samples, own time);
``SLUICE_BENCH_PROFILE=<file>`` also keeps py-spy's raw samples there (for a flame graph). The
machine's load average at the start of each run is a note (the machine is shared).

**Iceberg** (``table.format=iceberg``, rows of ``nightly_load``, local mode, right after the
main measurement): the same ``count`` rows of topic ``load`` loaded into an Iceberg table (the
embedded SQLite catalog, ``day(timestamp)``, one conditional catalog commit) and into a fresh
Parquet-format table again, twice each, in the order Iceberg, Parquet, Parquet, Iceberg
(``PAIRED_ORDER``), after one unmeasured Iceberg load (the main measurement already ran the
Parquet format's code in the Python workers) — all with the JVM and the workers warm. The rows:
each format's rows/s and phases (the mean of its two loads), the Iceberg table's Parquet bytes,
and two ratios of seconds (higher is better for Iceberg): ``sluice iceberg/parquet`` (the
paired Parquet load's seconds / the Iceberg load's; the goal is at least 0.9) and ``sluice
iceberg/in-memory`` (the main measurement's Spark baseline seconds / the Iceberg load's; the
goal is at least 1.0). Spark writing an Iceberg table itself needs Iceberg's Spark runtime,
which cannot be fetched here, so Spark's side is its plain Parquet write of the same rows.

**Shapes** (experiment ``nightly_load_shapes``, local mode, the same session after the main
measurement): the same ``SHAPE_ROWS`` rows as one topic of 8 partitions (narrow) and as
``WIDE_TOPICS`` topics of 4 partitions (wide: 800 partitions of 100 rows). The load packs small
ranges into tasks (``rowsPerTask``) and writes one file per topic and date per task, so the
wide shape should cost about what the narrow one does. Both shapes' records are produced first;
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
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import proc
from bench.bench_broker import REPO, start_broker
from bench.results import Results

PARTITIONS = 8
VALUE_BYTES = 200
WARM_UP_ROWS = 200_000
SLOTS = 2  # task slots in both runs: local[2], or two workers of one core
_POOL_BYTES = 1 << 24  # random bytes the values are cut from; far larger than a Parquet page

CLUSTER = " on standalone-2-workers"  # appended to the cluster run's systems
CLUSTER_WORKERS = 2
WORKER_MEMORY = "1g"  # what each worker offers executors
EXECUTOR_MEMORY = "768m"  # a 128 MB Parquet row group buffered per task fits with room to spare
CLUSTER_TIMEOUT = 1800.0  # the cluster driver's whole run (full: 10 M rows twice)
PROFILE = "profile"  # the system of the profile's rows
PAIRED_ORDER = ("iceberg", "parquet", "parquet", "iceberg")  # run_iceberg's loads, in order
SHAPE_ROWS = 80_000
WIDE_TOPICS = 200
WIDE_PARTITIONS = 4
SHAPE_PAIRS = 7  # run_shapes' measured pairs of loads


def produce_incompressible(bootstrap: str, topic: str, count: int) -> None:
    """``count`` distinct ``VALUE_BYTES`` values (an 8-byte counter, then random bytes at a
    moving position in a 16 MiB random pool), no key, round-robin over the partitions."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1 << 20}
    )
    pool = os.urandom(_POOL_BYTES + VALUE_BYTES)
    tail = VALUE_BYTES - 8
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for i in range(count):
        at = (i * 7919) % _POOL_BYTES
        value = i.to_bytes(8, "big") + pool[at : at + tail]
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(300)
    if failed:
        raise RuntimeError(f"{len(failed)} messages failed: {failed[0]}")


def parquet_bytes(root: Path) -> int:
    """Bytes of the ``*.parquet`` files under ``root`` (the table's data, not its metadata)."""
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


def baseline_frame(spark: Any, count: int, started_us: int) -> Any:
    """The load's columns, generated in the JVM: ``randstr`` values (``VALUE_BYTES`` random
    alphanumerics: no repeats for Snappy to find, all distinct for the dictionary), a
    timestamp advancing 1 µs per row. ``randstr`` is as incompressible as ``sha2`` output and
    cheaper to make, so the baseline's time is the write's, not the hashing's."""
    from pyspark.sql import functions as F

    return spark.range(0, count, 1, PARTITIONS).select(
        F.lit(None).cast("binary").alias("key"),
        F.expr(f"CAST(randstr({VALUE_BYTES}, 0) AS BINARY)").alias("value"),
        F.lit("load").alias("topic"),
        (F.col("id") % PARTITIONS).cast("int").alias("partition"),
        F.col("id").alias("offset"),
        F.timestamp_micros(F.lit(started_us) + F.col("id")).alias("timestamp"),
        F.lit(0).cast("int").alias("timestampType"),
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        F.lit(time.strftime("%Y-%m-%d", time.gmtime(started_us / 1e6))).alias("date"),
    )


class _Profiler:
    """``py-spy record`` of this process's tree while the load runs: the Spark JVM's Python
    daemons and the workers they fork (the driver itself, waiting on the JVM, is left out of
    ``top``); ``top()`` is the workers' hottest lines by own samples."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.proc = subprocess.Popen(
            [py_spy, "record", "--pid", str(os.getpid()), "--subprocesses", "--rate", "100",
             "--format", "raw", "--output", str(self.out), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=self.out.with_suffix(".log").open("wb"),
        )  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output and exits
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def failure(self) -> str | None:
        """Why there is no profile (py-spy's last words), or None."""
        if self.out.exists():
            return None
        log = self.out.with_suffix(".log")
        said = log.read_text().strip().splitlines()[-1:] if log.exists() else []
        return f"no profile: py-spy said {said[0] if said else 'nothing'!r}"

    def top(self, n: int = 12) -> list[tuple[str, float]]:
        """The ``n`` lines with the most own samples in the Spark Python processes, as
        ``(function (file:line), percent of those processes' samples)``."""
        return top_lines(self.out.read_text() if self.out.exists() else "", n)


def top_lines(raw: str, n: int = 12) -> list[tuple[str, float]]:
    """``_Profiler.top`` of py-spy's ``--format raw`` text (``frame;frame;... count`` lines)."""
    own: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # py-spy nests a child's stacks under its parents' "process" frames: the driver's own
        # stacks have one, the JVM's Python children more.
        if not count.isdigit() or len(frames) < 3 or not frames[1].startswith("process "):
            continue
        if frames[-1].startswith("process "):
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
        total += int(count)
    ranked = sorted(own.items(), key=lambda kv: -kv[1])[:n]
    return [(name, round(100 * c / max(total, 1), 1)) for name, c in ranked]


def load_config(bootstrap: str, out: Path, spark: dict[str, str] | None = None) -> Any:
    """The load of topic ``load`` into ``<out>/wh``; ``spark``: ``spark.*`` settings (with
    ``spark.master``) for a driver of a cluster."""
    from sluice.pipeline.load.run import LoadConfig

    settings = dict(spark or {})
    return LoadConfig(
        bootstrap_servers=bootstrap, topics=("load",), warehouse=f"file://{out}/wh",
        min_partitions=PARTITIONS, spark_master=settings.pop("spark.master", None),
        spark=settings,
    )  # fmt: skip


def measure(spark: Any, config: Any, count: int, out: Path, profile: Path | None) -> dict[str, Any]:
    """Warm the JVM, run the load (profiled into ``profile`` if given), then time the baseline
    into ``<out>/inmem``. The figures, as JSON: rows, phases (s), tasks (the split tasks'
    seconds summed over the splits, per slot), the Parquet bytes of both tables, the
    baseline's seconds, the profile's top lines and why there is none."""
    from sluice.pipeline.load.run import run_load

    # Warm the JVM (class loading, codegen, the Parquet writer) for both sides: the baseline
    # runs second and would otherwise get the warm JVM the load paid for. On a cluster this
    # first job also waits for every executor to register.
    warm = baseline_frame(spark, WARM_UP_ROWS, int(time.time() * 1e6))
    warm.write.mode("overwrite").partitionBy("topic", "date").parquet(str(out / "warm"))
    profiler = _Profiler(profile) if profile is not None else None
    try:
        if profiler is not None:
            profiler.start()
        report = run_load(config, spark, progress=lambda _m: None)
    finally:
        if profiler is not None:
            profiler.stop()
    rows = sum(p.rows for p in report.partitions)
    if rows != count:
        raise RuntimeError(f"the load published {rows:,} rows, expected {count:,}")
    # The same columns and bytes per row written by the same session with no source to read:
    # generated in the JVM, so nothing crosses from Python. Not cached: 10 M rows of 200 B
    # would not fit the driver's heap, and generating costs far less than writing.
    frame = baseline_frame(spark, count, int(time.time() * 1e6))
    started = time.perf_counter()
    frame.write.mode("overwrite").partitionBy("topic", "date").parquet(str(out / "inmem"))
    in_memory = time.perf_counter() - started
    return {
        "rows": rows,
        "phases": dict(report.phases),
        "tasks": sum(p.seconds for p in report.partitions) / SLOTS,
        "load_bytes": parquet_bytes(out / "wh"),
        "baseline_seconds": in_memory,
        "baseline_bytes": parquet_bytes(out / "inmem"),
        "profile": profiler.top() if profiler is not None else [],
        "profile_failure": profiler.failure() if profiler is not None else None,
    }


def record(results: Results, count: int, figures: dict[str, Any], where: str = "") -> None:
    """The rows of one run's ``figures``; ``where`` is appended to every system ("" for local
    mode, ``CLUSTER`` for the cluster)."""
    load_seconds = sum(figures["phases"].values())
    load, base = f"sluice{where}", f"spark in-memory write{where}"
    results.add("nightly_load", load, f"{count:,} rows over {PARTITIONS} partitions",
                figures["rows"] / load_seconds, "rows/s")  # fmt: skip
    for phase, seconds in figures["phases"].items():
        results.add("nightly_load", load, f"phase {phase}", seconds, "s")
    results.add("nightly_load", load, f"split tasks: fetch+write (summed / {SLOTS} slots)",
                figures["tasks"], "s")  # fmt: skip
    results.add("nightly_load", load, "parquet bytes", figures["load_bytes"], "B")
    results.add("nightly_load", base, f"{count:,} rows", count / figures["baseline_seconds"],
                "rows/s")  # fmt: skip
    results.add("nightly_load", base, "parquet bytes", figures["baseline_bytes"], "B")
    results.add("nightly_load", f"sluice/in-memory{where}", "rows/s",
                figures["baseline_seconds"] / load_seconds, "ratio")  # fmt: skip
    for name, percent in figures.get("profile", []):
        results.add("nightly_load", f"{PROFILE}{where}", name, percent, "%")
    if figures.get("profile_failure"):
        results.note("nightly_load", f"{figures['profile_failure']}{where}")


def _load_average() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def run(results: Results, quick: bool) -> None:
    from sluice.pipeline.load.run import build_spark

    count = 1_000_000 if quick else 10_000_000
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-load-", dir=".")).resolve()
    broker = start_broker(work)
    spark = None
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("load", PARTITIONS, 1)])["load"].result(timeout=30)
        del admin  # closed now, not reconnecting (and logging) after the broker stops
        produce_incompressible(broker.bootstrap, "load", count)
        keep = os.environ.get("SLUICE_BENCH_PROFILE", "")
        profile = None if not keep else (Path(keep).resolve() if keep != "1"
                                         else work / "profile.txt")  # fmt: skip
        local = work / "local"
        local.mkdir()
        config = load_config(broker.bootstrap, local)
        results.note("nightly_load", f"{VALUE_BYTES}-byte incompressible values on both sides; "
                     f"the JVM warmed by a {WARM_UP_ROWS:,}-row baseline write first")  # fmt: skip
        results.note("nightly_load", f"load average {_load_average()} (1, 5, 15 min) at the "
                     "start of the local[2] run")  # fmt: skip
        spark = build_spark(config)
        figures = measure(spark, config, count, local, profile)
        record(results, count, figures)
        run_iceberg(results, spark, config, count, local, figures["baseline_seconds"])
        run_shapes(results, spark, broker.bootstrap, work, broker.pid)
        spark.stop()  # the cluster run's driver is a process of its own
        spark = None
        run_cluster(results, broker.bootstrap, count, work)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_iceberg(
    results: Results, spark: Any, config: Any, count: int, out: Path, baseline_seconds: float
) -> dict[str, Any]:
    """The Iceberg load and its paired Parquet load of the same ``count`` rows (module doc),
    each into a fresh warehouse under ``out``, recorded by ``record_iceberg``; returns the
    figures: each load's phases and the Iceberg table's Parquet bytes."""
    from dataclasses import replace

    from sluice.pipeline.load.run import run_load
    from sluice.pipeline.table.iceberg_catalog import IcebergConfig

    figures: dict[str, Any] = {"baseline_seconds": baseline_seconds}
    # The main measurement was a Parquet-format load: its code has run in the Python workers,
    # the Iceberg writer's has not (one run: the first Iceberg load's read+write 1.9 s, the
    # last one's 1.3 s, the Parquet loads' between them 1.5 and 1.4 s). One Iceberg load,
    # not measured, first, so that neither format's first use is among the pairs.
    warm_up = (out / "paired-warm-up").as_uri()
    run_load(replace(config, warehouse=warm_up,
                     iceberg=IcebergConfig.from_properties({}, warm_up)),
             spark, progress=lambda _m: None)  # fmt: skip
    # In the order iceberg, parquet, parquet, iceberg: what the first load after the main
    # measurement pays alone (a Python worker respawned after Spark's idle timeout, the JVM
    # after the baseline's garbage) is paid by each format once. Each phase is the mean of
    # the format's two loads.
    for n, name in enumerate(PAIRED_ORDER):
        warehouse = (out / f"paired-{name}-{n}").as_uri()
        iceberg = IcebergConfig.from_properties({}, warehouse) if name == "iceberg" else None
        report = run_load(replace(config, warehouse=warehouse, iceberg=iceberg), spark,
                          progress=lambda _m: None)  # fmt: skip
        if report.total_rows != count:
            raise RuntimeError(f"the {name} load published {report.total_rows:,} rows, "
                               f"expected {count:,}")  # fmt: skip
        phases = figures.setdefault(f"{name}_phases", {})
        for phase, took in report.phases.items():
            phases[phase] = phases.get(phase, 0.0) + took / PAIRED_ORDER.count(name)
    figures["iceberg_bytes"] = parquet_bytes(out / "paired-iceberg-0")
    record_iceberg(results, count, figures)
    return figures


def record_iceberg(results: Results, count: int, figures: dict[str, Any]) -> None:
    """The Iceberg rows of ``run_iceberg``'s ``figures`` (module doc): each load timed as
    ``record`` times the main one, by the sum of its phases."""
    seconds = {}
    for name in ("iceberg", "parquet"):
        system = "sluice iceberg" if name == "iceberg" else "sluice parquet (paired)"
        phases = figures[f"{name}_phases"]
        seconds[name] = sum(phases.values())
        results.add("nightly_load", system, f"{count:,} rows over {PARTITIONS} partitions",
                    count / seconds[name], "rows/s")  # fmt: skip
        for phase, took in phases.items():
            results.add("nightly_load", system, f"phase {phase}", took, "s")
    results.add("nightly_load", "sluice iceberg", "parquet bytes", figures["iceberg_bytes"], "B")
    results.add("nightly_load", "sluice iceberg/parquet", "rows/s",
                seconds["parquet"] / seconds["iceberg"], "ratio")  # fmt: skip
    results.add("nightly_load", "sluice iceberg/in-memory", "rows/s",
                figures["baseline_seconds"] / seconds["iceberg"], "ratio")  # fmt: skip
    results.note("nightly_load", "iceberg: one unmeasured Iceberg load, then Iceberg, Parquet, "
                 "Parquet, Iceberg loads of the same rows (each format the mean of its two), "
                 "after the main run: JVM and Python workers warm for both")  # fmt: skip


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

    shapes = {
        "narrow": [("shape_narrow", PARTITIONS)],
        "wide": [(f"shape_wide_{i:03d}", WIDE_PARTITIONS) for i in range(WIDE_TOPICS)],
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, n, 1) for shape in shapes.values() for t, n in shape]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
    del admin
    for shape in shapes.values():
        _produce_spread(bootstrap, [(t, p) for t, n in shape for p in range(n)], SHAPE_ROWS)

    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in shapes}

    def load(name: str, table: str) -> tuple[float, Any, Path]:
        out = work / table
        config = LoadConfig(
            bootstrap_servers=bootstrap, topics=tuple(t for t, _ in shapes[name]),
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
    warm_up = {name: load(name, f"shape-{name}-warm-up")[0] for name in shapes}
    for measured in cpu.values():  # the pairs' only
        measured.clear()
    runs: dict[str, list[tuple[float, Any, Path]]] = {name: [] for name in shapes}
    for pair in range(SHAPE_PAIRS):
        for name in shapes if pair % 2 == 0 else reversed(shapes):
            runs[name].append(load(name, f"shape-{name}-{pair}"))
    figures: dict[str, Any] = {"mkdir_ms": (mkdir_before, _mkdir_ms(work / "mkdir-probe"))}
    for name, shape in shapes.items():
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
                 f"{', '.join(f'{r:.2f}' for r in ratios)}; load average {_load_average()} "
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


def run_cluster(results: Results, bootstrap: str, count: int, work: Path) -> None:
    """The same measurement on a two-worker standalone cluster under ``work``, its driver a
    process of its own (``driver_main``); the rows' systems end in ``CLUSTER``."""
    from sluice.testing.spark_cluster import SparkCluster, WorkerSpec, spark_cluster_missing

    missing = spark_cluster_missing()
    if missing is not None:
        results.note("nightly_load", f"no standalone cluster run: {missing}")
        return
    out = work / "cluster"
    out.mkdir()
    workers = [WorkerSpec(cores=1, memory=WORKER_MEMORY)] * CLUSTER_WORKERS
    with SparkCluster(workers, root=work) as cluster:
        # The full JIT (jvm_options=""): the JVMs run for long, as a production cluster's do.
        conf = cluster.application_conf(executor_memory=EXECUTOR_MEMORY, jvm_options="")
        spec = out / "spec.json"
        spec.write_text(json.dumps({"bootstrap": bootstrap, "count": count, "out": str(out),
                                    "spark": conf}))  # fmt: skip
        results.note("nightly_load", f"load average {_load_average()} at the start of the "
                     f"standalone run ({CLUSTER_WORKERS} workers × 1 core, executors of "
                     f"{EXECUTOR_MEMORY})")  # fmt: skip
        log = out / "driver.log"
        with log.open("w") as output:  # the child holds its own copy of the descriptor
            driver = subprocess.Popen(
                [sys.executable, "-m", "bench.bench_load", str(spec)],
                cwd=REPO, env=cluster.driver_env(), stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            status = driver.wait(timeout=CLUSTER_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            with contextlib.suppress(ProcessLookupError):  # the driver's JVM with it
                os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        if status != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            said = (
                f"did not finish in {CLUSTER_TIMEOUT:.0f}s"
                if status is None
                else f"exited {status}"
            )
            raise RuntimeError(f"the standalone cluster's driver {said}:\n{tail}")
        figures = json.loads((out / "figures.json").read_text())
    record(results, count, figures, CLUSTER)


def driver_main(argv: list[str]) -> int:
    """The cluster run's driver: ``python -m bench.bench_load <spec.json>`` (``bootstrap``,
    ``count``, ``out``, ``spark``: the cluster's application settings); writes ``measure``'s
    figures to ``<out>/figures.json``."""
    from sluice.pipeline.load.run import build_spark

    if len(argv) != 1:
        print("usage: python -m bench.bench_load SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    out = Path(spec["out"])
    config = load_config(spec["bootstrap"], out, spec["spark"])
    spark = build_spark(config, lambda message: print(message, flush=True))
    try:
        figures = measure(spark, config, int(spec["count"]), out, None)
    finally:
        spark.stop()
    (out / "figures.json").write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(driver_main(sys.argv[1:]))
