"""``make demo``: a broker, a schema registry, Avro page views, two typed nightly loads.

1. start ``python -m sluice broker start`` and ``python -m sluice registry start`` on free
   ports, data in ``./data/demo``;
2. create ``page_views`` (4 partitions); produce ~20k Avro page views (``schemas/page_view.avsc``
   registered as ``page_views-value`` version 1, Confluent wire format through Sluice's
   serializer) keyed by user, timestamps spread over the last three days; then a few hundred
   written with version 2 (``browser`` and ``country`` added with defaults: BACKWARD
   compatible) and one deliberately corrupt message (wrong magic byte);
3. ``spark-submit jobs/nightly_load.py`` with ``valueFormat=avro`` into ``./warehouse/events``,
   then show what landed (typed rows per topic/partition/date and a sample, read back with
   duckdb), the run's error table, the schema ids and the committed offsets;
4. produce a few more views and load again: the second run reads only the new offsets;
5. SIGTERM the broker and the registry and check both exited 0.

The broker and the registry are ``sluice.testing``'s process classes, as in the tests. Each
demo starts from scratch: it deletes ``./data/demo`` and ``./warehouse/events`` (offsets
of an old broker's log would be data loss for the new one).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sluice.testing.broker import BrokerProcess, create_topic
from sluice.testing.console import step
from sluice.testing.net import free_port
from sluice.testing.process import ChildProcess
from sluice.testing.registry import RegistryProcess
from sluice.testing.spark import spark_submit

# The Spark applications sit beside this module (in the repository's jobs/, or in an installed
# wheel's sluice/jobs/); data and tables go under the directory the demo is run from.
JOBS = Path(__file__).resolve().parent
REPO = Path.cwd()
DATA = REPO / "data" / "demo"
WAREHOUSE = REPO / "warehouse"
TOPIC = "page_views"
PARTITIONS = 4
DAY_MS = 86_400_000


def start_broker(port: int) -> BrokerProcess:
    """A standalone broker on ``port``: log dir ``data/demo/broker``, output in
    ``data/demo/broker.out``, topics only as created, warnings only."""
    broker = BrokerProcess(
        DATA,
        {"auto.create.topics.enable": "false"},
        port=port,
        log_level="warning",
        log_dir=DATA / "broker",
    )
    try:
        return broker.start()
    except RuntimeError as exc:
        raise SystemExit(f"{exc}\n(see {DATA}/broker.out)") from None


def start_registry(port: int) -> RegistryProcess:
    """A schema registry on ``port``: data in ``data/demo/registry``, output in
    ``data/demo/registry.out``, BACKWARD compatibility."""
    registry = RegistryProcess(
        DATA / "registry",
        DATA / "registry.out",
        port,
        overrides={"schema.compatibility.level": "BACKWARD", "log.level": "warning"},
    )
    try:
        return registry.start()
    except RuntimeError as exc:
        raise SystemExit(f"{exc}\n(see {DATA}/registry.out)") from None


def page_view_v2() -> dict[str, Any]:
    """``page_view.avsc`` with two fields added with defaults (BACKWARD compatible)."""
    from sluice.schemas import schema_path

    schema: dict[str, Any] = json.loads(schema_path("page_view").read_text())
    schema["fields"] += [
        {"name": "browser", "type": "string", "default": "unknown"},
        {"name": "country", "type": ["null", "string"], "default": None},
    ]
    return schema


def produce_views(
    bootstrap: str, registry: str, count: int, seed: int, *, days: int, version: int
) -> None:
    from confluent_kafka import Producer

    from sluice.schemas import schema_path
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.serde import AvroSerializer

    schema = schema_path("page_view").read_text() if version == 1 else json.dumps(page_view_v2())
    serialize = AvroSerializer(RegistryClient(registry), schema, f"{TOPIC}-value")
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
        value: dict[str, Any] = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "timestamp": dt.datetime.fromtimestamp(ts / 1000, dt.UTC),
            "server": f"fe-{rng.randrange(8)}",
            "user_id": user,
            "page": rng.choice(pages),
            "referrer": rng.choice([None, None, "https://www.google.com/", "https://t.co/x"]),
            "duration_ms": rng.randrange(5, 900),
        }
        if version == 2:
            value["browser"] = rng.choice(["firefox", "chrome", "safari"])
            value["country"] = rng.choice([None, "US", "FR", "IN"])
        while True:
            try:
                producer.produce(
                    TOPIC,
                    key=user.encode(),
                    value=serialize(value),
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
    print(
        f"    produced {count} page views (schema id {serialize.schema_id}, "
        f"{TOPIC}-value version {version}) in {time.monotonic() - started:.1f}s",
        flush=True,
    )


def produce_corrupt(bootstrap: str) -> None:
    """One value that is not Confluent-framed Avro: JSON, as an old producer might send."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    delivered: list[Any] = []
    producer.produce(
        TOPIC,
        partition=0,
        key=b"user-9999",
        value=b'{"user": "user-9999", "page": "/"}',
        on_delivery=lambda err, msg: delivered.append((err, msg)),
    )
    producer.flush(30)
    err, msg = delivered[0]
    if err is not None:
        raise SystemExit(f"the corrupt message was not delivered: {err}")
    print(f"    produced 1 corrupt message (JSON, magic byte 0x7b) at {TOPIC}-0 offset "
          f"{msg.offset()}", flush=True)  # fmt: skip


def run_load(config: Path) -> None:
    code = spark_submit(JOBS / "nightly_load.py", config, cwd=REPO)
    if code != 0:
        raise SystemExit(f"the nightly load failed with exit status {code}")


def show_table() -> None:
    import duckdb

    from sluice.common.text_table import render_table
    from sluice.pipeline.table.commit import latest_manifest

    table = WAREHOUSE / "events"
    files = [str(f) for f in sorted(table.glob("load=*/topic=*/date=*/*.parquet"))]
    con = duckdb.connect()
    source = f"read_parquet({files}, hive_partitioning = true, union_by_name = true)"
    rows = con.execute(
        "SELECT topic, partition, CAST(date AS VARCHAR) AS date, count(*) AS rows, "
        'min("offset"), max("offset"), count(*) FILTER (browser <> \'unknown\') '
        f"FROM {source} GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    header = ["topic", "partition", "date", "rows", "min offset", "max offset", "v2 rows"]
    print(render_table(header, [[str(c) for c in r] for r in rows]))
    total, distinct = con.execute(
        f'SELECT count(*), count(DISTINCT (topic, partition, "offset")) FROM {source}'
    ).fetchall()[0]
    print(f"{total} rows in the table, {distinct} distinct (topic, partition, offset)")
    print("typed columns: " + ", ".join(f"{n} {t}" for n, t in _columns(con, source).items()))
    sample = con.execute(
        "(SELECT partition, \"offset\", event_id[:8] || '..', CAST(timestamp AS VARCHAR)[:19], "
        "user_id, page, duration_ms, browser, coalesce(country, 'null') FROM "
        f"{source} WHERE browser = 'unknown' ORDER BY partition, \"offset\" LIMIT 2) UNION ALL "
        "(SELECT partition, \"offset\", event_id[:8] || '..', CAST(timestamp AS VARCHAR)[:19], "
        "user_id, page, duration_ms, browser, coalesce(country, 'null') FROM "
        f"{source} WHERE browser <> 'unknown' ORDER BY partition, \"offset\" LIMIT 2)"
    ).fetchall()
    print("a few rows (v1 records read with the v2 reader schema get its defaults):")
    print(render_table(
        ["partition", "offset", "event_id", "timestamp", "user_id", "page", "duration_ms",
         "browser", "country"],
        [[str(c) for c in r] for r in sample],
    ))  # fmt: skip
    errors = sorted(table.glob("load=*/_errors/*.parquet"))
    if errors:
        found = con.execute(
            'SELECT topic, partition, "offset", error, reason, octet_length(value) '
            f"FROM read_parquet({[str(f) for f in errors]}) ORDER BY ALL"
        ).fetchall()
        print(f"error table (load=*/_errors, every load): {len(found)} undecodable record(s)")
        print(render_table(
            ["topic", "partition", "offset", "error", "reason", "bytes"],
            [[str(c) for c in r] for r in found],
        ))  # fmt: skip
    else:
        print("error table (load=*/_errors, every load): empty")
    manifest = latest_manifest(f"file://{table}")
    if manifest is not None:
        ids = {t: list(i) for t, i in manifest.schema_ids.items()}
        print(f"schema ids in the manifest of load={manifest.sequence}: {ids}; "
              f"undecodable records in load={manifest.sequence}: "
              f"{manifest.total_errors}")  # fmt: skip
        print(f"committed offsets (load={manifest.sequence} {manifest.run_id}):")
        print(render_table(
            ["topic", "partition", "next offset"],
            [[t, str(p), str(o)] for t, ps in sorted(manifest.offsets.items())
             for p, o in sorted(ps.items())],
        ))  # fmt: skip


def _columns(con: Any, source: str) -> dict[str, str]:
    return {
        str(r[0]): str(r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    }


def stop(name: str, process: ChildProcess) -> int | None:
    """SIGTERM ``process``, wait for it (SIGKILL after 30 s) and say how it exited."""
    code = process.stop()
    print(f"    {name} exited with {code}")
    return code


def main() -> int:
    began = time.monotonic()
    step("resetting ./data/demo and ./warehouse/events")
    shutil.rmtree(DATA, ignore_errors=True)
    shutil.rmtree(WAREHOUSE / "events", ignore_errors=True)
    shutil.rmtree(WAREHOUSE / "_staging" / "events", ignore_errors=True)
    DATA.mkdir(parents=True)
    port, registry_port = free_port(), free_port()
    bootstrap, registry = f"127.0.0.1:{port}", f"http://127.0.0.1:{registry_port}"
    step(f"starting a schema registry on {registry} (data dir data/demo/registry)")
    registry_process = start_registry(registry_port)
    broker: BrokerProcess | None = None
    codes: dict[str, int | None] = {}
    try:
        step(f"starting a standalone broker on {bootstrap} (log dir data/demo/broker)")
        broker = start_broker(port)
        step(f"creating topic {TOPIC} with {PARTITIONS} partitions; producing Avro page views")
        create_topic(bootstrap, TOPIC, PARTITIONS)
        produce_views(bootstrap, registry, 20_000, seed=1, days=3, version=1)
        produce_views(bootstrap, registry, 400, seed=3, days=1, version=2)
        produce_corrupt(bootstrap)
        config = DATA / "nightly_load.properties"
        config.write_text(
            f"kafka.bootstrap.servers={bootstrap}\ntopics={TOPIC}\n"
            f"warehouse.path={WAREHOUSE}\ntable=events\nminPartitions=4\n"
            f"valueFormat=avro\nschema.registry.url={registry}\nonDecodeError=errorTable\n"
        )
        step("nightly load #1 (valueFormat=avro: typed columns, undecodable records to _errors)")
        run_load(config)
        step("what landed")
        show_table()
        step("producing 750 more page views (today, schema version 2)")
        produce_views(bootstrap, registry, 750, seed=2, days=0, version=2)
        step("nightly load #2: only the new offsets")
        run_load(config)
        step("what landed")
        show_table()
    finally:
        step("stopping the broker and the registry (SIGTERM)")
        if broker is not None:
            codes["broker"] = stop("broker", broker)
        codes["registry"] = stop("registry", registry_process)
    unclean = [name for name, code in codes.items() if code != 0]
    if unclean:
        print(f"did not shut down cleanly: {', '.join(unclean)}", file=sys.stderr)
        return 1
    print(f"\ndemo finished in {time.monotonic() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
