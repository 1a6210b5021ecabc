"""The nightly load against Spark itself: rows/s of a load of N 200-byte messages over 8
partitions (fetch through the ``sluice`` source, Parquet by topic and date, atomic publish),
against the same Spark session writing the same rows, generated in the JVM, to Parquet
— a ratio within one run — and the load's time split by phase (fetch time summed over the
splits; the rest of read+write is Arrow conversion and the Parquet write)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from bench.bench_broker import produce, start_broker
from bench.results import Results

PARTITIONS = 8


def run(results: Results, quick: bool) -> None:
    from sluice.pipeline.load.run import LoadConfig, build_spark, run_load

    count = 1_000_000 if quick else 10_000_000
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-load-", dir=".")).resolve()
    broker = start_broker(work)
    spark = None
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("load", PARTITIONS, 1)])["load"].result(timeout=30)
        produce(broker.bootstrap, "load", count, {})
        config = LoadConfig(
            bootstrap_servers=broker.bootstrap, topics=("load",), warehouse=f"file://{work}/wh",
            min_partitions=PARTITIONS,
        )  # fmt: skip
        spark = build_spark(config)
        report = run_load(config, spark, progress=lambda _m: None)
        load_seconds = sum(report.phases.values())
        rows = sum(p.rows for p in report.partitions)
        assert rows == count, (rows, count)
        fetch = sum(p.seconds for p in report.partitions) / 2  # two task slots in local[2]
        results.add("nightly_load", "sluice", f"{count:,} rows over {PARTITIONS} partitions",
                    rows / load_seconds, "rows/s")  # fmt: skip
        for phase, seconds in report.phases.items():
            results.add("nightly_load", "sluice", f"phase {phase}", seconds, "s")
        results.add("nightly_load", "sluice", "fetch (summed over splits / 2 slots)", fetch, "s")

        # The same rows written by the same session with no source to read: generated in the
        # JVM (spark.range), so nothing crosses from Python. Not cached: 10 M rows of 200 B
        # would not fit the driver's heap, and generating them costs far less than writing.
        from pyspark.sql import functions as F

        frame = spark.range(0, count, 1, PARTITIONS).select(
            F.lit(None).cast("binary").alias("key"),
            F.lit(b"x" * 200).alias("value"),
            F.lit("load").alias("topic"),
            (F.col("id") % PARTITIONS).cast("int").alias("partition"),
            F.col("id").alias("offset"),
            F.lit(time.time()).cast("timestamp").alias("timestamp"),
            F.lit("2026-11-21").alias("date"),
        )
        started = time.perf_counter()
        frame.write.mode("overwrite").partitionBy("topic", "date").parquet(str(work / "inmem"))
        in_memory = time.perf_counter() - started
        results.add("nightly_load", "spark in-memory write", f"{count:,} rows",
                    count / in_memory, "rows/s")  # fmt: skip
        results.add("nightly_load", "sluice/in-memory", "rows/s", in_memory / load_seconds,
                    "ratio")  # fmt: skip
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
