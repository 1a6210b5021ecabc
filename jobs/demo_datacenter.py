"""``make demo-datacenter``: the paper's deployment (§4, Figure 3) end to end on loopback.

::

    front-end servers fe-1, fe-2 ──(Avro page views, audit counts)──▶ live cluster (2 brokers)
                                                                          │ mirror (exactly-once)
                                                                          ▼
                                            offline cluster (2 brokers) ──▶ nightly load (Spark)
                                                                          ▼
                                     Iceberg table ◀── audit: producers = live =
                                                                       offline = warehouse?

1. ZooKeeper (Debian's package, ``sluice zookeeper start``); a **live** cluster (brokers 1, 2 in
   chroot ``/sluice-live``) and an **offline** cluster (brokers 1, 2 in ``/sluice-offline``)
   from ``conf/datacenter/*.properties``; the schema registry. Every process is a real
   subprocess; ports are the configs' own unless taken, in which case free ones are used (the
   generated configs are in ``data/datacenter/conf``).
2. ``page_views`` (4 partitions, 2 replicas) and the audit topic on the live cluster; one
   mirror process (``sluice mirror``) in exactly-once mode (``exactly.once.enabled=true``, set
   on the generated copy of ``conf/mirror.properties``; MirrorMaker 2's KIP-618) copies the live
   partitions to the offline cluster, creating ``page_views`` there with the same partition
   count. Each batch and the source offsets it reaches are one transaction on the offline
   cluster (offsets in its compacted ``mm2-offsets.live.internal`` topic). Exactly-once runs one
   mirror process per source cluster: a second one with the same config would fence the first.
3. Two front-end "servers" produce Avro page views through :class:`AuditingProducer` (each
   message stamped with its timestamp and server name; per-topic counts per 5 s window published
   to the audit topic). Halfway through, the mirror is killed with SIGKILL while one of its
   transactions is open on the offline cluster (records past the last stable offset, and
   growing: the demo polls ListOffsets read_committed against read_uncommitted; when no look
   catches one within a quarter of the production time it kills it then, and says so), and
   restarted: the restart fences the dead process's transactional id (its open transaction is
   aborted, with markers written to the partitions of both offline brokers) and resumes from
   the offsets committed in the offline cluster. Nothing is lost, and nothing doubled for
   read_committed readers — the nightly load and the audit read the offline cluster
   read_committed. After the catch-up the demo counts the offline topic both ways: the
   difference is what was aborted.
4. When the mirror has caught up (lag 0 on every partition), the nightly load reads the offline
   cluster into the Iceberg table ``sluice.page_views`` (``table.format=iceberg``: its data
   under ``warehouse/datacenter/sluice/page_views``, its catalog the SQLite file
   ``warehouse/datacenter/_iceberg_catalog.db``; spark-submit), then the audit job counts every
   tier (producers' reports, live, offline, and the table's current snapshot:
   ``warehouse.format=iceberg``) per topic and window and prints its table; report, chart and
   JSON are in ``data/datacenter/audit``. The demo then reads ``audit.json`` and prints the
   duplicates per tier.
5. Everything is stopped with SIGTERM; the demo fails if any process did not exit 0, the audit
   found a closed window that differs, or any tier counted a duplicate.

Each run starts from scratch (deletes ``data/datacenter`` and ``warehouse/datacenter``). The
processes are ``sluice.testing.process.ChildProcess`` objects running the ``sluice`` command
with the generated configs, as an operator would.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.testing.broker import create_topic
from sluice.testing.console import step
from sluice.testing.net import WaitTimeoutError, free_port, port_free, port_open, wait_until
from sluice.testing.process import ChildProcess
from sluice.testing.spark import spark_submit

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "datacenter"
WAREHOUSE = REPO / "warehouse" / "datacenter"
CONF = REPO / "conf"
GEN = DATA / "conf"
TOPIC = "page_views"
PARTITIONS = 4
AUDIT_TOPIC = "sluice-audit"
WINDOW_MS = 5_000
PRODUCE_SECONDS = 24.0
RATE_PER_SERVER = 400  # messages per second per front-end server

# The ports the configs in conf/ use; each is replaced by a free one when taken.
PORTS = {
    "zookeeper": 2181,
    "live-1": 9092,
    "live-2": 9093,
    "offline-1": 9192,
    "offline-2": 9193,
    "live-1-metrics": 9411,
    "live-2-metrics": 9412,
    "offline-1-metrics": 9421,
    "offline-2-metrics": 9422,
    "registry": 8081,
    "mirror-metrics": 9501,
}


def choose_ports() -> dict[int, int]:
    """Configured port → the port this run uses (itself when free)."""
    return {p: p if port_free(p) else free_port() for p in PORTS.values()}


def generate(source: Path, ports: dict[int, int], extra: dict[str, str] | None = None) -> Path:
    """Copy a config into ``data/datacenter/conf`` with its ports remapped and ``extra`` set."""
    text = source.read_text()
    for old, new in ports.items():
        text = re.sub(rf"(?<=[:=]){old}\b", str(new), text)
    for key, value in (extra or {}).items():
        text, n = re.subn(rf"(?m)^{re.escape(key)}=.*$", f"{key}={value}", text)
        if not n:
            text += f"{key}={value}\n"
    GEN.mkdir(parents=True, exist_ok=True)
    target = GEN / source.name
    target.write_text(text)
    return target


def sluice(name: str, *args: str, port: int | None = None) -> ChildProcess:
    """``python -m sluice <args>`` run from the repository as ``name``, its output in
    ``data/datacenter/<name>.out``; ready once ``port`` (when given) accepts connections."""
    return ChildProcess(
        DATA / f"{name}.out",
        [sys.executable, "-m", "sluice", *args],
        name=name,
        cwd=REPO,
        ready=None if port is None else functools.partial(port_open, port),
        start_timeout=60.0,
        stop_timeout=40.0,
    )


def wait_ready(process: ChildProcess) -> None:
    """Wait until ``process`` listens (60 s); exit the demo if it died or never did."""
    try:
        process.wait_ready()
    except RuntimeError as exc:
        raise SystemExit(f"{exc}\n(see {process.output_path})") from None


def stop(process: ChildProcess) -> int:
    """SIGTERM, wait (SIGKILL after 40 s), and say how it exited; 0 if it never started."""
    if process.proc is None:
        return 0
    code = process.stop()
    print(f"    {process.name} exited with {code}", flush=True)
    return 0 if code is None else code


def settle(what: str, check: Callable[[], bool], timeout: float) -> None:
    """Poll ``check`` every 0.5 s; exit the demo if it does not hold within ``timeout``."""
    try:
        wait_until(check, timeout, what, interval=0.5)
    except WaitTimeoutError as exc:
        raise SystemExit(str(exc)) from None


def cluster_ready(bootstrap: str, brokers: int) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(timeout=3)
    except Exception:
        return False
    return len(md.brokers) == brokers and md.controller_id in md.brokers


def create_topics(bootstrap: str) -> None:
    """``page_views`` and the audit topic, two replicas each, every partition with a leader."""
    create_topic(bootstrap, TOPIC, PARTITIONS, replication_factor=2, timeout=30)
    create_topic(bootstrap, AUDIT_TOPIC, 1, replication_factor=2, timeout=30)


def front_end(
    server: str, bootstrap: str, registry: str, stop_at: float, seed: int, errors: list[str]
) -> None:
    """One front-end server: Avro page views at ``RATE_PER_SERVER``/s until ``stop_at``."""
    import datetime as dt
    import random
    import uuid

    from sluice.pipeline.audit.producer import AuditingProducer
    from sluice.schemas import schema_path
    from sluice.schemas.client import RegistryClient
    from sluice.schemas.serde import AvroSerializer

    try:
        serialize = AvroSerializer(
            RegistryClient(registry), schema_path("page_view").read_text(), f"{TOPIC}-value"
        )
        producer = AuditingProducer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 20, "compression.type": "lz4"},
            server=server, window_ms=WINDOW_MS, audit_topic=AUDIT_TOPIC, registry_url=registry,
        )  # fmt: skip
        rng = random.Random(seed)
        pages = ["/", "/jobs", "/feed", "/profile", "/search", "/messages"]
        sent, began = 0, time.monotonic()
        while time.monotonic() < stop_at:
            user = f"user-{rng.randrange(2000):04d}"
            now = dt.datetime.now(dt.UTC)
            value = {
                "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "timestamp": now,
                "server": server,
                "user_id": user,
                "page": rng.choice(pages),
                "referrer": None,
                "duration_ms": rng.randrange(5, 900),
            }
            producer.produce(TOPIC, serialize(value), key=user.encode())
            sent += 1
            behind = sent / RATE_PER_SERVER - (time.monotonic() - began)
            if behind > 0:
                producer.poll(behind)
            else:
                producer.poll(0)
        producer.close()
        print(f"    {server}: {sent} page views produced and audited", flush=True)
    except Exception as exc:  # reported by the main thread
        errors.append(f"{server}: {exc!r}")


def mirror_caught_up(config: Path) -> bool:
    """Every source partition's committed offset has reached its end (``sluice mirror lag``)."""
    from sluice.common.properties import load_properties
    from sluice.pipeline.mirror.config import MirrorConfig
    from sluice.pipeline.mirror.mirror import MirrorError, mirror_lag

    try:
        lags = mirror_lag(MirrorConfig.from_properties(load_properties(str(config), [])))
    except MirrorError:
        return False  # a coordinator moving: ask again
    mine = [lag for lag in lags if lag.topic == TOPIC]
    return len(mine) == PARTITIONS and all(lag.lag == 0 for lag in mine)


def uncommitted(consumers: list[Any]) -> int | None:
    """Records of ``page_views`` past the last stable offset: in a transaction still open (the
    end offset seen by ``consumers[0]``, read_uncommitted, minus that of ``consumers[1]``,
    read_committed, summed over the partitions); None when the topic is not there yet or a
    broker did not answer."""
    from confluent_kafka import KafkaException, TopicPartition

    ends: list[list[int]] = []  # per isolation level, per partition
    for consumer in consumers:
        try:
            marks = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 2, cached=False)
                     for p in range(PARTITIONS)]  # fmt: skip
        except KafkaException:
            return None
        ends.append([int(high) for _low, high in marks])
    highs, stables = ends
    return sum(high - stable for high, stable in zip(highs, stables, strict=True))


def kill_mid_transaction(mirror: ChildProcess, offline: str, timeout: float) -> int | None:
    """SIGKILL ``mirror`` while it is producing into an open transaction: as soon as the records
    of ``page_views`` past the offline cluster's last stable offset grow between two looks —
    records just written, whose transaction the mirror commits only after every delivery
    report (records past it that do not grow may be a commit already decided, its markers on
    their way; the count of aborted records after the restart tells which it was). Gives up
    waiting after ``timeout`` seconds and kills it then. Returns how many records past the
    last stable offset the look that saw them grow counted, or None when no look did. The two
    consumers that look are made once: a look is then only the ListOffsets round trips."""
    from confluent_kafka import Consumer

    consumers = [
        Consumer(
            {
                "bootstrap.servers": offline,
                "group.id": "demo-lso",
                "isolation.level": isolation,
                "log_level": 0,
            }
        )  # fmt: skip
        for isolation in ("read_uncommitted", "read_committed")
    ]
    try:
        deadline = time.monotonic() + timeout
        before = uncommitted(consumers)
        while time.monotonic() < deadline:
            time.sleep(0.005)
            now = uncommitted(consumers)
            if before is not None and now is not None and now > before:
                mirror.kill()
                return now
            before = now
        mirror.kill()
        return None
    finally:
        for consumer in consumers:
            consumer.close()


def read_counts(bootstrap: str) -> dict[str, int]:
    """Isolation level → records of ``page_views`` a consumer reads from the start."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    counts: dict[str, int] = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-count",
                             "isolation.level": isolation, "enable.partition.eof": True,
                             "log_level": 0})  # fmt: skip
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            done: set[int] = set()
            count, deadline = 0, time.monotonic() + 60
            while len(done) < PARTITIONS and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    error = msg.error()
                    if error is None:
                        count += 1
                    elif error.code() == KafkaError._PARTITION_EOF:
                        done.add(int(msg.partition() or 0))
            if len(done) < PARTITIONS:
                raise SystemExit(
                    f"expected to read {TOPIC} on {bootstrap} to its end within "
                    f"60 s ({isolation}), found {len(done)} of {PARTITIONS} done"
                )
            counts[isolation] = count
        finally:
            consumer.close()
    return counts


def audit_duplicates(report: Path) -> dict[str, int]:
    """Tier → duplicates summed over every window of ``report`` (the audit's ``audit.json``).

    Raises ``SystemExit`` when the report is missing or not the audit's version 1 layout."""
    import json

    try:
        data = json.loads(report.read_text())
        duplicates: dict[str, int] = dict.fromkeys(data["tiers"], 0)
        for window in data["windows"]:
            for tier, counts in window["tiers"].items():
                duplicates[tier] = duplicates.get(tier, 0) + int(counts["duplicates"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"expected the audit's report in {report}, found {exc!r}") from None
    return duplicates


def generate_configs(ports: dict[int, int]) -> dict[str, Path]:
    """Every process's config, generated into ``data/datacenter/conf`` with this run's ports."""
    data_dirs = {"dataDir": "./data/datacenter/zookeeper"}
    return {
        "zookeeper": generate(CONF / "zookeeper.properties", ports, data_dirs),
        **{
            name: generate(CONF / "datacenter" / f"{name}.properties", ports)
            for name in ("live-1", "live-2", "offline-1", "offline-2")
        },
        "mirror": generate(CONF / "mirror.properties", ports, {"exactly.once.enabled": "true"}),
        "load": generate(CONF / "datacenter" / "nightly_load.properties", ports),
        "audit": generate(
            CONF / "audit.properties",
            ports,
            {"window.ms": str(WINDOW_MS), "report.dir": str(DATA / "audit")},
        ),
    }


def start_services(
    port: dict[str, int], configs: dict[str, Path], processes: list[ChildProcess]
) -> None:
    """Step 1: ZooKeeper, the live and offline clusters, the schema registry; each process is
    appended to ``processes`` as soon as it is spawned, so the caller stops what started."""
    live, offline, registry = _addresses(port)
    step(f"ZooKeeper on 127.0.0.1:{port['zookeeper']} (Debian's package)")
    zk = sluice(
        "zookeeper", "zookeeper", "start", "--config", str(configs["zookeeper"]),
        port=port["zookeeper"],
    )  # fmt: skip
    processes.append(zk.spawn())
    wait_ready(zk)

    step(f"live cluster {live} and offline cluster {offline} (two ZooKeeper chroots)")
    brokers = [
        sluice(name, "broker", "start", "--config", str(configs[name]), port=port[name])
        for name in ("live-1", "live-2", "offline-1", "offline-2")
    ]
    for broker in brokers:
        processes.append(broker.spawn())
    for broker in brokers:
        wait_ready(broker)
    settle("the live cluster", lambda: cluster_ready(live, 2), 60)
    settle("the offline cluster", lambda: cluster_ready(offline, 2), 60)

    step(f"schema registry on {registry}")
    reg = sluice(
        "registry", "registry", "start", "--override", f"listeners={registry}",
        "--override", f"schema.registry.data.dir={DATA / 'registry'}", port=port["registry"],
    )  # fmt: skip
    processes.append(reg.spawn())
    wait_ready(reg)


def _addresses(port: dict[str, int]) -> tuple[str, str, str]:
    """The live cluster's bootstrap servers, the offline cluster's, the registry's URL."""
    live = f"127.0.0.1:{port['live-1']},127.0.0.1:{port['live-2']}"
    offline = f"127.0.0.1:{port['offline-1']},127.0.0.1:{port['offline-2']}"
    return live, offline, f"http://127.0.0.1:{port['registry']}"


def produce_through_a_mirror_crash(
    mirror: ChildProcess, live: str, offline: str, registry: str
) -> None:
    """Step 3: the front-end servers produce while the mirror is killed mid-transaction and
    restarted; exits the demo if a front-end server failed."""
    step(f"front-end servers fe-1, fe-2 produce for {PRODUCE_SECONDS:.0f}s "
         f"({RATE_PER_SERVER}/s each, audit window {WINDOW_MS // 1000}s)")  # fmt: skip
    errors: list[str] = []
    stop_at = time.monotonic() + PRODUCE_SECONDS
    fronts = [
        threading.Thread(target=front_end, args=(f"fe-{i}", live, registry, stop_at, i, errors))
        for i in (1, 2)
    ]
    for t in fronts:
        t.start()
    time.sleep(PRODUCE_SECONDS / 2)
    held = kill_mid_transaction(mirror, offline, PRODUCE_SECONDS / 4)
    caught = (
        f"{held} mirrored records of a transaction not yet committed on the offline cluster"
        if held
        else f"no uncommitted records seen growing within {PRODUCE_SECONDS / 4:.0f}s"
    )
    print(f"    kill -9 the mirror mid-traffic ({caught}), restarting it", flush=True)
    time.sleep(2)
    mirror.spawn()
    for t in fronts:
        t.join()
    if errors:
        raise SystemExit("a front-end server failed: " + "; ".join(errors))


def await_mirror(mirror_config: Path, offline: str) -> None:
    """Wait for lag 0 on every live partition, then count the offline topic both ways."""
    step("waiting for the mirror to catch up (lag 0 on every live partition)")
    settle("mirror lag 0", lambda: mirror_caught_up(mirror_config), 120)
    lag = [sys.executable, "-m", "sluice", "mirror", "lag", "--config", str(mirror_config)]
    subprocess.run(lag, cwd=REPO)
    counts = read_counts(offline)
    print(
        f"    offline {TOPIC}: {counts['read_uncommitted']} records read_uncommitted, "
        f"{counts['read_committed']} read_committed (aborted: "
        f"{counts['read_uncommitted'] - counts['read_committed']})",
        flush=True,
    )


def load_and_audit(configs: dict[str, Path]) -> tuple[int, dict[str, int]]:
    """Step 4: the nightly load, then the audit: its exit status and the duplicates per tier
    (exits the demo if the load failed)."""
    step(f"nightly load: offline cluster -> Iceberg table sluice.{TOPIC} in warehouse/datacenter")
    if spark_submit(REPO / "jobs" / "nightly_load.py", configs["load"], cwd=REPO) != 0:
        raise SystemExit("the nightly load failed")

    step(f"audit: producers' counts against live, offline and sluice.{TOPIC}, per window")
    audit_status = spark_submit(REPO / "jobs" / "audit.py", configs["audit"], cwd=REPO)
    print(f"    audit exit status {audit_status}; report in {DATA.relative_to(REPO)}/audit")
    duplicates = audit_duplicates(DATA / "audit" / "audit.json")
    shown = ", ".join(f"{tier} {n}" for tier, n in duplicates.items())
    print(f"    duplicates per tier (read_committed readers): {shown}", flush=True)
    return audit_status, duplicates


def stop_all(processes: list[ChildProcess]) -> dict[str, int]:
    """Step 5: SIGTERM to every process, ZooKeeper last; the exit codes of all but ZooKeeper."""
    step("stopping everything (SIGTERM)")
    codes: dict[str, int] = {}
    for proc in reversed(processes):
        if proc.name == "zookeeper":
            continue
        codes[proc.name] = stop(proc)
    for proc in processes:
        if proc.name == "zookeeper":
            stop(proc)  # Java exits 143 on SIGTERM: not judged
    return codes


def main() -> int:
    began = time.monotonic()
    step("resetting ./data/datacenter and ./warehouse/datacenter")
    shutil.rmtree(DATA, ignore_errors=True)
    shutil.rmtree(WAREHOUSE, ignore_errors=True)
    DATA.mkdir(parents=True)
    ports = choose_ports()
    port = {name: ports[p] for name, p in PORTS.items()}
    live, offline, registry = _addresses(port)
    configs = generate_configs(ports)
    processes: list[ChildProcess] = []
    audit_status = 1
    duplicates: dict[str, int] = {}
    try:
        start_services(port, configs, processes)

        step(f"topics on the live cluster: {TOPIC} ({PARTITIONS} partitions), {AUDIT_TOPIC}")
        create_topics(live)

        step("one mirror process, exactly-once, live -> offline (sluice mirror)")
        mirror = sluice("mirror", "mirror", "--config", str(configs["mirror"]))
        processes.append(mirror.spawn())

        produce_through_a_mirror_crash(mirror, live, offline, registry)
        await_mirror(configs["mirror"], offline)
        audit_status, duplicates = load_and_audit(configs)
    finally:
        codes = stop_all(processes)
    unclean = [name for name, code in codes.items() if code != 0]
    if unclean:
        print(f"did not shut down cleanly: {', '.join(unclean)}", file=sys.stderr)
        return 1
    doubled = {tier: n for tier, n in duplicates.items() if n}
    if doubled:
        print(f"the exactly-once mirror left duplicates: {doubled}", file=sys.stderr)
    print(f"\ndatacenter demo finished in {time.monotonic() - began:.0f}s")
    return 0 if audit_status == 0 and duplicates and not doubled else 1


if __name__ == "__main__":
    sys.exit(main())
