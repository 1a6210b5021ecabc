"""``make demo``: a standalone broker, page views, two nightly loads through spark-submit.

1. start ``python -m broker broker start`` on a free port, data in ``./data/demo``;
2. create ``page_views`` (4 partitions) and produce ~20k JSON page views keyed by user, with
   timestamps spread over the last three days;
3. ``spark-submit jobs/nightly_load.py`` into ``./warehouse/events``, then show what landed
   (rows per topic/partition/date, read back with duckdb) and the committed offsets;
4. produce a few more views and load again: the second run reads only the new offsets;
5. SIGTERM the broker and check it exited 0.

Each demo starts from scratch: it deletes ``./data/demo`` and ``./warehouse/events`` (offsets
of an old broker's log would be data loss for the new one).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "demo"
WAREHOUSE = REPO / "warehouse"
TOPIC = "page_views"
PARTITIONS = 4
DAY_MS = 86_400_000
SPARK_LOG_LINE = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN) ")
SPARK_NOISE = (
    "WARN ",
    "WARNING:",
    "Using Spark's default log4j",
    "Setting default log level",
    "To adjust logging level",
    "Setting Spark log level",
)


def step(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_broker(port: int) -> subprocess.Popen[bytes]:
    from confluent_kafka.admin import AdminClient

    args = [sys.executable, "-m", "broker", "broker", "start", "--log-level", "warning"]
    for key, value in {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(DATA / "broker"),
        "offsets.topic.num.partitions": "1",
        "auto.create.topics.enable": "false",
    }.items():
        args += ["--override", f"{key}={value}"]
    log = open(DATA / "broker.out", "ab")  # noqa: SIM115 - the broker writes it until stopped
    proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode}; see {DATA}/broker.out")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
    return proc


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(timeout=15)


def produce_views(bootstrap: str, count: int, seed: int, *, days: int) -> None:
    from confluent_kafka import Producer

    rng = random.Random(seed)
    now = int(time.time() * 1000)
    pages = ["/", "/jobs", "/feed", "/profile", "/search", "/messages", "/settings"]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 20}
    )
    started = time.monotonic()
    for i in range(count):
        user = f"user-{rng.randrange(2000):04d}"
        ts = now - rng.randrange(days * DAY_MS) if days else now
        value = {"user": user, "page": rng.choice(pages), "ms": rng.randrange(5, 900), "ts": ts}
        while True:
            try:
                producer.produce(
                    TOPIC,
                    key=user.encode(),
                    value=json.dumps(value).encode(),
                    timestamp=ts,
                    headers=[("source", b"demo"), ("seq", str(i).encode())],
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 4999:
            producer.poll(0)
            print(f"    produced {i + 1}/{count}", flush=True)
    left = producer.flush(30)
    if left:
        raise SystemExit(f"{left} page views were not delivered")
    print(f"    produced {count} page views in {time.monotonic() - started:.1f}s", flush=True)


def run_load(config: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    args = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2]",
        "--driver-java-options", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.log.level=ERROR",
        str(REPO / "jobs" / "nightly_load.py"),
        "--config", str(config),
    ]  # fmt: skip
    print("    $ spark-submit --master local[2] jobs/nightly_load.py --config "
          f"{config.relative_to(REPO)}", flush=True)  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.strip() or line.startswith(SPARK_NOISE) or SPARK_LOG_LINE.match(line):
            continue
        print(f"    {line.rstrip()}", flush=True)
    if proc.wait() != 0:
        raise SystemExit(f"the nightly load failed with exit status {proc.returncode}")


def show_table() -> None:
    import duckdb

    from pipeline.load_report import render_table
    from pipeline.table_commit import latest_manifest

    files = sorted((WAREHOUSE / "events").glob("load=*/topic=*/date=*/*.parquet"))
    con = duckdb.connect()
    rows = con.execute(
        "SELECT topic, partition, CAST(date AS VARCHAR) AS date, count(*) AS rows, "
        'min("offset"), max("offset") '
        f"FROM read_parquet({[str(f) for f in files]}, hive_partitioning = true) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    header = ["topic", "partition", "date", "rows", "min offset", "max offset"]
    print(render_table(header, [[str(c) for c in r] for r in rows]))
    total, distinct = con.execute(
        'SELECT count(*), count(DISTINCT (topic, partition, "offset")) '
        f"FROM read_parquet({[str(f) for f in files]}, hive_partitioning = true)"
    ).fetchall()[0]
    print(f"{total} rows in the table, {distinct} distinct (topic, partition, offset)")
    manifest = latest_manifest(f"file://{WAREHOUSE}/events")
    if manifest is not None:
        print(f"committed offsets (load={manifest.sequence} {manifest.run_id}):")
        print(render_table(
            ["topic", "partition", "next offset"],
            [[t, str(p), str(o)] for t, ps in sorted(manifest.offsets.items())
             for p, o in sorted(ps.items())],
        ))  # fmt: skip


def main() -> int:
    began = time.monotonic()
    step("resetting ./data/demo and ./warehouse/events")
    shutil.rmtree(DATA, ignore_errors=True)
    shutil.rmtree(WAREHOUSE / "events", ignore_errors=True)
    shutil.rmtree(WAREHOUSE / "_staging" / "events", ignore_errors=True)
    DATA.mkdir(parents=True)
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    step(f"starting a standalone broker on {bootstrap} (log dir data/demo/broker)")
    broker = start_broker(port)
    try:
        step(f"creating topic {TOPIC} with {PARTITIONS} partitions; producing 20000 page views")
        create_topic(bootstrap)
        produce_views(bootstrap, 20_000, seed=1, days=3)
        config = DATA / "nightly_load.properties"
        config.write_text(
            f"kafka.bootstrap.servers={bootstrap}\ntopics={TOPIC}\n"
            f"warehouse.path={WAREHOUSE}\ntable=events\nminPartitions=4\n"
        )
        step("nightly load #1")
        run_load(config)
        step("what landed")
        show_table()
        step("producing 750 more page views (today)")
        produce_views(bootstrap, 750, seed=2, days=0)
        step("nightly load #2: only the new offsets")
        run_load(config)
        step("what landed")
        show_table()
    finally:
        step("stopping the broker (SIGTERM)")
        broker.send_signal(signal.SIGTERM)
        try:
            code = broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
            code = broker.wait()
        print(f"    broker exited with {code}")
    if code != 0:
        print("the broker did not shut down cleanly", file=sys.stderr)
        return 1
    print(f"\ndemo finished in {time.monotonic() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
