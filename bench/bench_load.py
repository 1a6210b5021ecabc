"""The nightly load against Spark itself, on a fair baseline.

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

Also recorded: the load's phases and its split tasks' time (fetch and Parquet write, summed
over the splits, over the two task slots of ``local[2]``; the rest of read+write is Spark
scheduling the tasks and starting its Python workers). With ``SLUICE_BENCH_PROFILE=1`` (and
``py-spy`` installed) the Spark Python workers are sampled during the load and the profile's top
lines become notes; ``SLUICE_BENCH_PROFILE=<file>`` also keeps py-spy's raw samples there (for
a flame graph).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_broker import start_broker
from bench.results import Results

PARTITIONS = 8
VALUE_BYTES = 200
WARM_UP_ROWS = 200_000
_POOL_BYTES = 1 << 24  # random bytes the values are cut from; far larger than a Parquet page


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
        if self.proc is not None:
            self.proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
            self.proc.wait(timeout=60)

    def top(self, n: int = 12) -> list[str]:
        """The ``n`` lines with the most own samples in the Spark Python processes, as
        ``pct% function (file:line)``, percentages of those processes' samples."""
        if not self.out.exists():
            log = self.out.with_suffix(".log")
            said = log.read_text().strip().splitlines()[-1:] if log.exists() else []
            return [f"no profile: py-spy said {said[0] if said else 'nothing'!r}"]
        own: dict[str, int] = {}
        total = 0
        for line in self.out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            # py-spy nests a child's stacks under its parents' "process" frames: the driver's
            # own stacks have one, the JVM's Python children more.
            if not count.isdigit() or len(frames) < 3 or not frames[1].startswith("process "):
                continue
            if frames[-1].startswith("process "):
                continue
            own[frames[-1]] = own.get(frames[-1], 0) + int(count)
            total += int(count)
        ranked = sorted(own.items(), key=lambda kv: -kv[1])[:n]
        return [f"{100 * c / max(total, 1):5.1f}% {name}" for name, c in ranked]


def run(results: Results, quick: bool) -> None:
    from sluice.pipeline.load.run import LoadConfig, build_spark, run_load

    count = 1_000_000 if quick else 10_000_000
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-load-", dir=".")).resolve()
    broker = start_broker(work)
    spark = None
    profiler = None
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("load", PARTITIONS, 1)])["load"].result(timeout=30)
        produce_incompressible(broker.bootstrap, "load", count)
        config = LoadConfig(
            bootstrap_servers=broker.bootstrap, topics=("load",), warehouse=f"file://{work}/wh",
            min_partitions=PARTITIONS,
        )  # fmt: skip
        spark = build_spark(config)
        # Warm the JVM (class loading, codegen, the Parquet writer) for both sides: the
        # baseline runs second and would otherwise get the warm JVM the load paid for.
        warm = baseline_frame(spark, WARM_UP_ROWS, int(time.time() * 1e6))
        warm.write.mode("overwrite").partitionBy("topic", "date").parquet(str(work / "warm"))
        keep = os.environ.get("SLUICE_BENCH_PROFILE", "")
        if keep:
            profiler = _Profiler(Path(keep).resolve() if keep != "1" else work / "profile.txt")
            profiler.start()
        report = run_load(config, spark, progress=lambda _m: None)
        if profiler is not None:
            profiler.stop()
        load_seconds = sum(report.phases.values())
        rows = sum(p.rows for p in report.partitions)
        assert rows == count, (rows, count)
        # The split tasks' own time (fetch + Parquet write), over the two task slots of local[2].
        tasks = sum(p.seconds for p in report.partitions) / 2
        results.add("nightly_load", "sluice", f"{count:,} rows over {PARTITIONS} partitions",
                    rows / load_seconds, "rows/s")  # fmt: skip
        for phase, seconds in report.phases.items():
            results.add("nightly_load", "sluice", f"phase {phase}", seconds, "s")
        results.add("nightly_load", "sluice", "split tasks: fetch+write (summed / 2 slots)",
                    tasks, "s")  # fmt: skip
        results.add("nightly_load", "sluice", "parquet bytes", parquet_bytes(work / "wh"), "B")

        # The same columns and bytes per row written by the same session with no source to
        # read: generated in the JVM, so nothing crosses from Python. Not cached: 10 M rows of
        # 200 B would not fit the driver's heap, and hashing costs far less than writing.
        frame = baseline_frame(spark, count, int(time.time() * 1e6))
        started = time.perf_counter()
        frame.write.mode("overwrite").partitionBy("topic", "date").parquet(str(work / "inmem"))
        in_memory = time.perf_counter() - started
        results.add("nightly_load", "spark in-memory write", f"{count:,} rows",
                    count / in_memory, "rows/s")  # fmt: skip
        results.add("nightly_load", "spark in-memory write", "parquet bytes",
                    parquet_bytes(work / "inmem"), "B")  # fmt: skip
        results.add("nightly_load", "sluice/in-memory", "rows/s", in_memory / load_seconds,
                    "ratio")  # fmt: skip
        results.note("nightly_load", f"{VALUE_BYTES}-byte incompressible values on both sides; "
                     f"the JVM warmed by a {WARM_UP_ROWS:,}-row baseline write first")  # fmt: skip
        if profiler is not None:
            for line in profiler.top():
                results.note("nightly_load", f"profile: {line}")
    finally:
        if profiler is not None and profiler.proc is not None and profiler.proc.poll() is None:
            profiler.proc.kill()
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
