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

The same session then loads the shapes of ``bench.bench_load_shapes`` (its own experiments:
``nightly_load_shapes``, warm in this process, and ``nightly_load_shapes_cron``, one
``sluice load`` command per load), before the cluster run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import proc
from bench.bench_broker import REPO, start_broker
from bench.bench_load_shapes import run_shapes, run_shapes_cron
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
        results.note("nightly_load", f"load average {proc.load_average()} (1, 5, 15 min) at the "
                     "start of the local[2] run")  # fmt: skip
        spark = build_spark(config)
        figures = measure(spark, config, count, local, profile)
        record(results, count, figures)
        run_iceberg(results, spark, config, count, local, figures["baseline_seconds"])
        run_shapes(results, spark, broker.bootstrap, work, broker.pid)
        spark.stop()  # the cron loads and the cluster run's driver are processes of their own
        spark = None
        run_shapes_cron(results, broker.bootstrap, work)
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
        results.note("nightly_load", f"load average {proc.load_average()} at the start of the "
                     f"standalone run ({CLUSTER_WORKERS} workers × 1 core, executors of "
                     f"{EXECUTOR_MEMORY})")  # fmt: skip
        log = out / "driver.log"
        status = proc.run_in_session(
            [sys.executable, "-m", "bench.bench_load", str(spec)], log, CLUSTER_TIMEOUT,
            cwd=REPO, env=cluster.driver_env(),
        )  # fmt: skip
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
