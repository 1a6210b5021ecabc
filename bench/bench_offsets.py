"""The offsets article's experiment: a consumer that is SIGKILLed mid-way and restarted until it
has read a whole topic, three ways, counting what never reached the sink (lost) and what reached
it more than once (duplicated).

1. **auto-commit** (at most once): librdkafka stores each offset as ``poll`` returns the
   message and commits every 100 ms from its own thread; the "processing" buffers its output
   and appends it to the sink every ``FLUSH`` messages, so a kill loses what was polled (and
   committed) but not yet flushed.
2. **commit after processing** (at least once): each message is appended to the sink, which
   is fsynced before the offsets are committed every ``FLUSH`` messages, so a kill re-reads
   (and re-appends) what was processed after the last commit.
3. **sluice atomic load**: the nightly load, SIGKILLed mid-read (``SLUICE_CRASH_AT=read``) and
   rerun until it publishes; data and offsets are published by one rename.

Kills are deterministic: each consumer incarnation but the last processes ``kill_after``
messages, makes its sink durable as its mode would, writes a progress file and waits; the parent
gives librdkafka's auto-commit time to run, then SIGKILLs it.

    python -m bench.bench_offsets [--full]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.bench_broker import produce, start_broker
from bench.results import Results

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 4
FLUSH = 1000  # messages per sink flush (auto-commit) / per commit (commit after processing)
KILLS = 3
EXPERIMENT = "offsets_article"
MODES = {"auto": "auto-commit", "after": "commit after processing"}


# -- the consumer (a child process) ---------------------------------------------------------


def consume(mode: str, bootstrap: str, topic: str, sink: Path, progress: Path, kill_after: int):
    """One incarnation: read from the group's committed offsets until every partition is at its
    end; with ``kill_after`` > 0, stop after that many messages and wait to be killed."""
    from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, TopicPartition

    auto = mode == "auto"
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"offsets-{mode}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": auto,
        "auto.commit.interval.ms": 100,
        "enable.auto.offset.store": True,  # stored as poll returns a message: before processing
        "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, p, OFFSET_STORED) for p in range(PARTITIONS)])
    fd = os.open(sink, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pending: list[bytes] = []  # auto-commit: processed, not yet in the sink
    at_end: set[int] = set()
    processed = 0
    idle_since = time.monotonic()

    def make_durable() -> None:
        if pending:
            os.write(fd, b"".join(pending))
            pending.clear()
        os.fsync(fd)

    while len(at_end) < PARTITIONS and time.monotonic() - idle_since < 30:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        idle_since = time.monotonic()
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise RuntimeError(str(msg.error()))
        at_end.discard(msg.partition())
        line = f"{msg.partition()},{msg.offset()}\n".encode()
        processed += 1
        if auto:
            pending.append(line)
            if processed % FLUSH == 0:
                make_durable()
        else:
            os.write(fd, line)
            if processed % FLUSH == 0:
                make_durable()
                consumer.commit(asynchronous=False)
        if processed == kill_after:
            if not auto:
                os.fsync(fd)  # processed is durable; the offsets since the last commit are not
            progress.write_text(str(processed))
            while True:  # librdkafka keeps auto-committing the stored offsets meanwhile
                time.sleep(1)
    make_durable()
    if not auto and processed % FLUSH:  # else nothing was stored since the last commit
        consumer.commit(asynchronous=False)
    consumer.close()
    os.close(fd)


def run_consumer(mode: str, bootstrap: str, topic: str, work: Path, kill_after: int) -> Path:
    """Start incarnations until one reads to the end; the first ``KILLS`` are SIGKILLed after
    ``kill_after`` messages each. Returns the sink."""
    sink = work / f"sink-{mode}.txt"
    progress = work / f"progress-{mode}"
    for incarnation in range(KILLS + 1):
        progress.unlink(missing_ok=True)
        after = kill_after if incarnation < KILLS else 0
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_offsets", "--consume", mode, bootstrap, topic,
             str(sink), str(progress), str(after)],
            cwd=REPO,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while proc.poll() is None and not progress.exists():
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"{mode}: consumer incarnation {incarnation} hung")
            time.sleep(0.02)
        if proc.returncode is None:  # waiting at its kill point
            time.sleep(0.5)  # > auto.commit.interval.ms: the stored offsets get committed
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        elif proc.returncode != 0:
            raise RuntimeError(f"{mode}: consumer exited with {proc.returncode}")
        else:
            return sink
    raise RuntimeError(f"{mode}: the last incarnation did not finish")


def sink_counts(sink: Path) -> Counter[tuple[int, int]]:
    counts: Counter[tuple[int, int]] = Counter()
    with open(sink) as f:
        for line in f:
            p, o = line.split(",")
            counts[(int(p), int(o))] += 1
    return counts


# -- the nightly load -----------------------------------------------------------------------


def run_sluice(bootstrap: str, topic: str, work: Path) -> tuple[Counter[tuple[int, int]], int]:
    """Crash the load mid-read, rerun until it publishes; (rows by (partition, offset),
    crashes)."""
    import pyarrow.parquet as pq

    warehouse = work / "warehouse"
    config = work / "nightly_load.properties"
    config.write_text(
        f"kafka.bootstrap.servers={bootstrap}\n"
        f"topics={topic}\n"
        f"warehouse.path=file://{warehouse}\n"
        "spark.master=local[2]\n"
        "spark.ui.enabled=false\n"
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1\n"
    )
    base = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    base.pop("SLUICE_CRASH_AT", None)
    crashes = 0
    for attempt in range(KILLS + 2):
        env = {**base, "SLUICE_CRASH_AT": "read"} if attempt == 0 else base
        proc = subprocess.run(
            [sys.executable, "-m", "sluice.jobs.nightly_load", "--config", str(config)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=600, start_new_session=True,
        )  # fmt: skip
        if proc.returncode == -signal.SIGKILL:
            crashes += 1
        elif proc.returncode == 0:
            break
        else:
            raise RuntimeError(f"nightly load exited with {proc.returncode}")
    else:
        raise RuntimeError("the nightly load never published")
    counts: Counter[tuple[int, int]] = Counter()
    for path in glob.glob(f"{warehouse}/events/**/*.parquet", recursive=True):
        if "/_" in path.split("/events/", 1)[1]:  # _errors/, _metrics/: not table rows
            continue
        t = pq.read_table(path, columns=["partition", "offset"])
        parts, offsets = t.column("partition").to_pylist(), t.column("offset").to_pylist()
        counts.update(zip(parts, offsets, strict=True))
    return counts, crashes


# -- the experiment -------------------------------------------------------------------------


def run(results: Results, quick: bool) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    count = 20_000 if quick else 100_000
    kill_after = count // (KILLS + 1) + FLUSH // 2  # mid-way between two flushes / commits
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-offsets-", dir=".")).resolve()
    broker = start_broker(work)
    topic = "offsets"
    rows: list[tuple[str, int, int, int]] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
        produce(broker.bootstrap, topic, count, {})
        for mode, system in MODES.items():
            counts = sink_counts(run_consumer(mode, broker.bootstrap, topic, work, kill_after))
            rows.append((system, count - len(counts), counts.total() - len(counts), KILLS))
        counts, crashes = run_sluice(broker.bootstrap, topic, work)
        rows.append(("sluice atomic load", count - len(counts), counts.total() - len(counts),
                     crashes))  # fmt: skip
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    for system, lost, duplicated, _ in rows:
        results.add(EXPERIMENT, system, "lost", lost, "messages")
        results.add(EXPERIMENT, system, "duplicated", duplicated, "messages")
    print(f"\n{count:,} messages in {PARTITIONS} partitions, killed (SIGKILL) mid-way and rerun")
    print(f"{'system':<26} {'kills':>5} {'lost':>8} {'duplicated':>11}")
    for system, lost, duplicated, kills in rows:
        print(f"{system:<26} {kills:>5} {lost:>8,} {duplicated:>11,}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_offsets")
    parser.add_argument("--full", action="store_true", help="100k messages (default 20k)")
    parser.add_argument("--consume", nargs=6, metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        mode, bootstrap, topic, sink, progress, kill_after = args.consume
        consume(mode, bootstrap, topic, Path(sink), Path(progress), int(kill_after))
        return 0
    run(Results(), quick=not args.full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
