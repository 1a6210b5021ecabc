"""``make demo-datacenter``: the paper's deployment (§4, Figure 3) end to end on loopback.

::

    front-end servers fe-1, fe-2 ──(Avro page views, audit counts)──▶ live cluster (2 brokers)
                                                                          │ mirror ×2 (one group)
                                                                          ▼
                                            offline cluster (2 brokers) ──▶ nightly load (Spark)
                                                                          ▼
                                         warehouse Parquet ◀── audit: producers = live =
                                                                       offline = warehouse?

1. ZooKeeper (Debian's package, ``sluice zookeeper start``); a **live** cluster (brokers 1, 2 in
   chroot ``/sluice-live``) and an **offline** cluster (brokers 1, 2 in ``/sluice-offline``)
   from ``conf/datacenter/*.properties``; the schema registry. Every process is a real
   subprocess; ports are the configs' own unless taken, in which case free ones are used (the
   generated configs are in ``data/datacenter/conf``).
2. ``page_views`` (4 partitions, 2 replicas) and the audit topic on the live cluster; two mirror
   processes (``sluice mirror``) in one group share the live partitions and copy them to the
   offline cluster, creating ``page_views`` there with the same partition count.
3. Two front-end "servers" produce Avro page views through :class:`AuditingProducer` (each
   message stamped with its timestamp and server name; per-topic counts per 5 s window published
   to the audit topic). Halfway through, one mirror is killed with SIGKILL and restarted: it
   re-mirrors what it had not committed (duplicates, bounded), loses nothing.
4. When the mirrors have caught up (lag 0 on every partition), the nightly load reads the offline
   cluster into ``warehouse/datacenter/page_views`` (spark-submit), then the audit job counts
   every tier (producers' reports, live, offline, warehouse) per topic and window and prints its
   table; report, chart and JSON are in ``data/datacenter/audit``.
5. Everything is stopped with SIGTERM; the demo fails if any process did not exit 0 or the audit
   found a closed window that differs.

Each run starts from scratch (deletes ``data/datacenter`` and ``warehouse/datacenter``).
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sluice.jobs.demo import free_port, spark_submit, step

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


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports() -> dict[int, int]:
    """Configured port → the port this run uses (itself when free)."""
    return {p: p if _port_free(p) else free_port() for p in PORTS.values()}


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


class Process:
    """A named child process with its output in ``data/datacenter/<name>.out``."""

    def __init__(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.name, self.args, self.env = name, args, env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return DATA / f"{self.name}.out"

    def start(self) -> Process:
        out = open(self.log, "ab")  # noqa: SIM115 - the child writes it until it stops
        self.proc = subprocess.Popen(
            self.args, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT
        )
        out.close()
        return self

    def wait_port(self, port: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}; see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"{self.name} did not listen on {port} within {timeout:.0f}s")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        print(f"    {self.name} exited with {code}", flush=True)
        return code


def sluice(*args: str) -> list[str]:
    return [sys.executable, "-m", "sluice", *args]


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def cluster_ready(bootstrap: str, brokers: int) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(timeout=3)
    except Exception:
        return False
    return len(md.brokers) == brokers and md.controller_id in md.brokers


def create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(TOPIC, PARTITIONS, 2), NewTopic(AUDIT_TOPIC, 1, 2)]
    for future in admin.create_topics(topics).values():
        future.result(timeout=30)


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


def main() -> int:
    began = time.monotonic()
    step("resetting ./data/datacenter and ./warehouse/datacenter")
    shutil.rmtree(DATA, ignore_errors=True)
    shutil.rmtree(WAREHOUSE, ignore_errors=True)
    DATA.mkdir(parents=True)
    ports = choose_ports()
    port = {name: ports[p] for name, p in PORTS.items()}
    live = f"127.0.0.1:{port['live-1']},127.0.0.1:{port['live-2']}"
    offline = f"127.0.0.1:{port['offline-1']},127.0.0.1:{port['offline-2']}"
    registry = f"http://127.0.0.1:{port['registry']}"
    data_dirs = {"dataDir": "./data/datacenter/zookeeper"}
    configs = {
        "zookeeper": generate(CONF / "zookeeper.properties", ports, data_dirs),
        **{
            name: generate(CONF / "datacenter" / f"{name}.properties", ports)
            for name in ("live-1", "live-2", "offline-1", "offline-2")
        },
        "mirror": generate(CONF / "mirror.properties", ports),
        "load": generate(CONF / "datacenter" / "nightly_load.properties", ports),
        "audit": generate(
            CONF / "audit.properties",
            ports,
            {"window.ms": str(WINDOW_MS), "report.dir": str(DATA / "audit")},
        ),
    }
    processes: list[Process] = []
    codes: dict[str, int] = {}
    audit_status = 1
    try:
        step(f"ZooKeeper on 127.0.0.1:{port['zookeeper']} (Debian's package)")
        zk = Process(
            "zookeeper", sluice("zookeeper", "start", "--config", str(configs["zookeeper"]))
        )
        processes.append(zk.start())
        zk.wait_port(port["zookeeper"])

        step(f"live cluster {live} and offline cluster {offline} (two ZooKeeper chroots)")
        for name in ("live-1", "live-2", "offline-1", "offline-2"):
            broker = Process(name, sluice("broker", "start", "--config", str(configs[name])))
            processes.append(broker.start())
        for name in ("live-1", "live-2", "offline-1", "offline-2"):
            next(p for p in processes if p.name == name).wait_port(port[name])
        wait_until("the live cluster", lambda: cluster_ready(live, 2), 60)
        wait_until("the offline cluster", lambda: cluster_ready(offline, 2), 60)

        step(f"schema registry on {registry}")
        reg = Process(
            "registry",
            sluice("registry", "start", "--override", f"listeners={registry}", "--override",
                   f"schema.registry.data.dir={DATA / 'registry'}"),
        )  # fmt: skip
        processes.append(reg.start())
        reg.wait_port(port["registry"])

        step(f"topics on the live cluster: {TOPIC} ({PARTITIONS} partitions), {AUDIT_TOPIC}")
        create_topics(live)

        step("two mirror processes, one group, live -> offline (sluice mirror)")
        mirrors = [
            Process(f"mirror-{i}", sluice("mirror", "--config", str(configs["mirror"]),
                                          *(["--override", "metrics.listener="] if i else [])))
            for i in range(2)
        ]  # fmt: skip
        for m in mirrors:
            processes.append(m.start())

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
        print("    kill -9 mirror-1 mid-traffic, restarting it", flush=True)
        mirrors[1].kill()
        time.sleep(2)
        mirrors[1].start()
        for t in fronts:
            t.join()
        if errors:
            raise SystemExit("a front-end server failed: " + "; ".join(errors))

        step("waiting for the mirrors to catch up (lag 0 on every live partition)")
        wait_until("mirror lag 0", lambda: mirror_caught_up(configs["mirror"]), 120)
        subprocess.run(sluice("mirror", "lag", "--config", str(configs["mirror"])), cwd=REPO)

        step("nightly load: offline cluster -> warehouse/datacenter/page_views")
        if spark_submit("nightly_load.py", configs["load"]) != 0:
            raise SystemExit("the nightly load failed")

        step("audit: producers' counts against live, offline and warehouse, per window")
        audit_status = spark_submit("audit.py", configs["audit"])
        print(f"    audit exit status {audit_status}; report in {DATA.relative_to(REPO)}/audit")
    finally:
        step("stopping everything (SIGTERM)")
        for proc in reversed(processes):
            if proc.name == "zookeeper":
                continue
            codes[proc.name] = proc.stop()
        for proc in processes:
            if proc.name == "zookeeper":
                proc.stop()  # Java exits 143 on SIGTERM: not judged
    unclean = [name for name, code in codes.items() if code != 0]
    if unclean:
        print(f"did not shut down cleanly: {', '.join(unclean)}", file=sys.stderr)
        return 1
    print(f"\ndatacenter demo finished in {time.monotonic() - began:.0f}s")
    return 0 if audit_status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
