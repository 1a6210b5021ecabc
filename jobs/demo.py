"""``make demo``: a broker, a schema registry, Avro page views, two nightly loads into an
Apache Iceberg table, and a query of it.

1. start ``python -m sluice broker start`` and ``python -m sluice registry start`` on free
   ports, data in ``./data/demo``;
2. create ``page_views`` (4 partitions); produce ~20k Avro page views (``schemas/page_view.avsc``
   registered as ``page_views-value`` version 1, Confluent wire format through Sluice's
   serializer) keyed by user, timestamps spread over the last three days; then a few hundred
   written with version 2 (``browser`` and ``country`` added with defaults: BACKWARD
   compatible) and one deliberately corrupt message (wrong magic byte);
3. ``spark-submit jobs/nightly_load.py`` with ``valueFormat=avro`` and ``table.format=iceberg``
   into the Iceberg table ``sluice.page_views``: pyiceberg's SQL catalog on the SQLite file
   ``./warehouse/demo/_iceberg_catalog.db`` (no server), the table partitioned by the day of
   each page view's own ``timestamp`` (event time), the data and the offsets in one catalog
   commit. Then the demo reads the table back as any reader would — a pyiceberg scan queried
   with DuckDB: rows per day, the columns, a few rows, the error table
   ``sluice.page_views_errors`` (the corrupt message) and the snapshots with their
   ``sluice.offsets``;
4. produce a few more views and load again: the second run reads only the new offsets, one
   more snapshot;
5. SIGTERM the broker and the registry and check both exited 0; print where the table is and
   how to read it.

The broker and the registry are ``sluice.testing``'s process classes, as in the tests. Each
demo starts from scratch: it deletes ``./data/demo`` and ``./warehouse/demo`` (offsets of an old
broker's log would be data loss for the new one). ``conf/nightly_load.properties`` writes the
same kind of table under ``./warehouse``; the demo keeps its own warehouse so that it never
drops a table of yours.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
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
WAREHOUSE = REPO / "warehouse" / "demo"
CATALOG = WAREHOUSE / "_iceberg_catalog.db"  # the load's default: beside the tables
NAMESPACE = "sluice"  # iceberg.tables.default-namespace's default
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


def open_table(name: str) -> Any:
    """``sluice.<name>`` from the demo's embedded catalog, as any pyiceberg reader opens it."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(
        "sluice", type="sql", uri=f"sqlite:///{CATALOG}", warehouse=str(WAREHOUSE)
    )
    return catalog.load_table(f"{NAMESPACE}.{name}")


PER_DAY = (
    "SELECT strftime(timestamp AT TIME ZONE 'UTC', '%Y-%m-%d') AS day, count(*) AS rows, "
    'count(DISTINCT "partition") AS partitions, min("offset"), max("offset"), '
    f"count(*) FILTER (browser <> 'unknown') AS v2_rows FROM {TOPIC} GROUP BY day ORDER BY day"
)
"""The demo's query: rows per day of event time, as DuckDB runs it over a pyiceberg scan."""


def show_table(*, first: bool) -> None:
    """What the load committed, read back through the catalog: rows per day (the table's
    partitions) with a DuckDB query of a pyiceberg scan, and the snapshots with their offsets;
    after the first load also the columns, a few rows and the error table."""
    from sluice.common.text_table import render_table

    table = open_table(TOPIC)
    con = table.scan().to_duckdb(table_name=TOPIC)
    print(f"pyiceberg: load_table('{NAMESPACE}.{TOPIC}').scan().to_duckdb('{TOPIC}'), then")
    print(f"  {PER_DAY}")
    rows = con.execute(PER_DAY).fetchall()
    print(render_table(
        ["day (event time)", "rows", "partitions", "min offset", "max offset", "v2 rows"],
        [[str(c) for c in r] for r in rows],
    ))  # fmt: skip
    total, distinct = con.execute(
        f'SELECT count(*), count(DISTINCT ("partition", "offset")) FROM {TOPIC}'
    ).fetchall()[0]
    files = table.inspect.files()
    print(f"{total} rows, {distinct} distinct (partition, offset); {files.num_rows} data files; "
          f"partition spec {_spec(table)} (the page view's own timestamp: event time)")  # fmt: skip
    if first:
        print(
            "columns: "
            + ", ".join(f"{f.name} {_type(f.field_type)}" for f in table.schema().fields)
        )
        _show_sample(con)
        _show_errors()
    _show_snapshots(table)


def _type(field_type: Any) -> str:
    """An Iceberg type as a reader writes it: without field ids and ``optional``."""
    return re.sub(r"\d+: |optional |required ", "", str(field_type))


def _spec(table: Any) -> str:
    schema = table.schema()
    return ", ".join(
        f"{f.transform}({schema.find_field(f.source_id).name})" for f in table.spec().fields
    )


def _show_sample(con: Any) -> None:
    from sluice.common.text_table import render_table

    columns = (
        '"partition", "offset", event_id[:8] || \'..\', CAST(timestamp AS VARCHAR)[:19], '
        "user_id, page, duration_ms, browser, coalesce(country, 'null')"
    )
    sample = con.execute(
        f"(SELECT {columns} FROM {TOPIC} WHERE browser = 'unknown' "
        'ORDER BY "partition", "offset" LIMIT 2) UNION ALL '
        f"(SELECT {columns} FROM {TOPIC} WHERE browser <> 'unknown' "
        'ORDER BY "partition", "offset" LIMIT 2)'
    ).fetchall()
    print("a few rows (v1 records, read with the v2 reader schema, get its defaults):")
    print(render_table(
        ["partition", "offset", "event_id", "timestamp", "user_id", "page", "duration_ms",
         "browser", "country"],
        [[str(c) for c in r] for r in sample],
    ))  # fmt: skip


def _show_errors() -> None:
    from sluice.common.text_table import render_table

    errors = (
        open_table(f"{TOPIC}_errors")
        .scan(selected_fields=("topic", "partition", "offset", "error", "reason", "value"))
        .to_arrow()
    )
    print(f"error table {NAMESPACE}.{TOPIC}_errors: {errors.num_rows} undecodable record(s)")
    if errors.num_rows:
        print(render_table(
            ["topic", "partition", "offset", "error", "reason", "bytes"],
            [[str(r["topic"]), str(r["partition"]), str(r["offset"]), str(r["error"]),
              str(r["reason"]), str(len(r["value"] or b""))] for r in errors.to_pylist()],
        ))  # fmt: skip


def _show_snapshots(table: Any) -> None:
    """Each snapshot of the table, oldest first, with the offsets it committed."""
    from sluice.common.text_table import render_table

    shown = []
    for snapshot in table.snapshots():
        summary = snapshot.summary
        offsets = json.loads(summary["sluice.offsets"]) if summary else {}
        shown.append([
            str(snapshot.snapshot_id), summary.operation.value if summary else "",
            summary.get("added-records", "") if summary else "",
            summary.get("sluice.run-id", "") if summary else "",
            "; ".join(f"{t}: " + ", ".join(f"{p}->{o}" for p, o in sorted(ps.items()))
                      for t, ps in sorted(offsets.items())),
        ])  # fmt: skip
    print("snapshots (each load is one catalog commit; sluice.offsets is where the next resumes):")
    print(render_table(["snapshot", "operation", "added rows", "run", "sluice.offsets"], shown))


def show_where() -> None:
    """Where the table is and how to read it (the commands as a user would type them)."""
    table = open_table(TOPIC)
    catalog, warehouse = _shown(str(CATALOG)), _shown(str(WAREHOUSE))
    print(f"table {NAMESPACE}.{TOPIC} (Apache Iceberg): data and metadata under "
          f"{_shown(table.location())}/")  # fmt: skip
    print(f"catalog: pyiceberg's SQL catalog 'sluice' on the SQLite file {catalog}")
    print("read it with sluice:")
    print(
        f"    .venv/bin/sluice table describe --warehouse {warehouse} --table {NAMESPACE}.{TOPIC}"
    )
    print("with pyiceberg and DuckDB (.venv/bin/python):")
    print(
        "    from pyiceberg.catalog import load_catalog\n"
        f"    catalog = load_catalog('sluice', type='sql', uri='sqlite:///{catalog}', "
        f"warehouse='{warehouse}')\n"
        f"    table = catalog.load_table('{NAMESPACE}.{TOPIC}')\n"
        f"    print(table.scan().to_duckdb('{TOPIC}').sql('SELECT page, count(*) FROM {TOPIC} "
        "GROUP BY page'))"
    )
    print("with Spark, Trino or DuckDB's iceberg extension: docs/iceberg.md, 'Reading the tables'")


def _shown(path: str) -> str:
    """``path`` (or a file:// URI) relative to the directory the demo runs from."""
    local = Path(path.removeprefix("file://"))
    try:
        return str(local.relative_to(REPO))
    except ValueError:
        return str(local)


def stop(name: str, process: ChildProcess) -> int | None:
    """SIGTERM ``process``, wait for it (SIGKILL after 30 s) and say how it exited."""
    code = process.stop()
    print(f"    {name} exited with {code}")
    return code


def write_config(bootstrap: str, registry: str) -> Path:
    """The load's configuration: typed Avro values into an Iceberg table per topic, on the
    embedded SQLite catalog, partitioned by the page view's own ``timestamp`` (the Kafka
    record's timestamp is the column ``kafka_timestamp``)."""
    config = DATA / "nightly_load.properties"
    config.write_text(
        f"kafka.bootstrap.servers={bootstrap}\ntopics={TOPIC}\nminPartitions=4\n"
        f"warehouse.path={WAREHOUSE}\ntable.format=iceberg\n"
        "iceberg.tables.default-partition-by=day(timestamp)\n"
        f"valueFormat=avro\nschema.registry.url={registry}\nonDecodeError=errorTable\n"
    )
    return config


def main() -> int:
    began = time.monotonic()
    step("resetting ./data/demo and ./warehouse/demo")
    shutil.rmtree(DATA, ignore_errors=True)
    shutil.rmtree(WAREHOUSE, ignore_errors=True)
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
        config = write_config(bootstrap, registry)
        step(f"nightly load #1 into the Iceberg table {NAMESPACE}.{TOPIC} (typed Avro columns; "
             f"undecodable records to {NAMESPACE}.{TOPIC}_errors)")  # fmt: skip
        run_load(config)
        step(f"querying {NAMESPACE}.{TOPIC}")
        show_table(first=True)
        step("producing 750 more page views (today, schema version 2)")
        produce_views(bootstrap, registry, 750, seed=2, days=0, version=2)
        step("nightly load #2: only the new offsets")
        run_load(config)
        step(f"querying {NAMESPACE}.{TOPIC}")
        show_table(first=False)
    finally:
        step("stopping the broker and the registry (SIGTERM)")
        if broker is not None:
            codes["broker"] = stop("broker", broker)
        codes["registry"] = stop("registry", registry_process)
    unclean = [name for name, code in codes.items() if code != 0]
    if unclean:
        print(f"did not shut down cleanly: {', '.join(unclean)}", file=sys.stderr)
        return 1
    step("the table")
    show_where()
    print(f"\ndemo finished in {time.monotonic() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
