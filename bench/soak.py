"""``make soak``: a three-broker cluster under a seeded random schedule of faults while an
idempotent ``acks=all`` producer writes and a consumer group reads along, and a second, plain
``acks=1`` producer writes to a topic of its own; then every partition is read back and checked
(``bench.soak_check``): the ``acks=all`` data for anything lost, duplicated, reordered; the
``acks=1`` data for messages acknowledged and then lost, attributed to the fault that lost them
(Kafka documents that ``acks=1`` can lose acknowledged writes when a leader fails; the soak
measures how many, per fault).

    python -m bench.soak [--minutes N] [--seed S] [--out build/soak]

``--minutes`` defaults to ``$SOAK_MINUTES`` or 4; ``--seed`` to ``$SOAK_SEED`` or 1. The same
seed gives the same sequence of fault kinds, targets' choices and durations (what the cluster
does in between is not deterministic).

Setup: a ``NetworkLab`` (``sluice.testing.netns``: a bridge and one network namespace per
broker, on a private /24), ZooKeeper on the lab's service address, three ``LabBroker``\\ s with
the test cluster's short timeouts (ZooKeeper session 4 s, replica lag 3 s) and
``min.insync.replicas=2``, one topic of three partitions with replication 3 (and one more for
the ``acks=1`` producer). Broker 2's log dir is a :class:`~sluice.testing.slow_disk.SlowDisk`, a
FUSE passthrough mounted before it starts: the ``slow-disk`` fault makes every fsync there
wait 0.3–1.5 s until healed.

The schedule, until ``minutes`` minus a reserve for the final checks: pick a fault kind
uniformly (``sluice.testing.faults.KINDS``), pick its target (the leader or a follower of a
random partition, the controller, a random broker), inject it, hold it (3–8 s; a session
expiry holds the SIGSTOP 1–3 s past the session timeout), heal it, wait until every broker
runs and every partition has a full ISR in every broker's own Metadata answer (60 s at most,
else the fault is noted "not recovered" and the schedule goes on), then a quiet gap of 2–5 s.

Outputs in ``--out``: ``results.json`` (the faults with their times, the counts, the producer
and group's errors), ``results.md`` (the table) and ``throughput.png``. The exit status is 1 if
the checker found anything (lost, duplicated, reordered, moved, consumed-then-lost, commits
ahead) in the ``acks=all`` data, 0 otherwise (``acks=1`` losses are measured, not failed).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.soak_check import check, committed_offsets, losses_by_fault, lost_acks, read_back
from bench.soak_report import markdown_table, plot, throughput, write_json
from bench.soak_workload import AckedProducer, GroupReader
from sluice.testing.faults import (
    KINDS,
    BrokerKill,
    Cut,
    Fault,
    FaultLog,
    FaultTargetError,
    Pause,
    SlowFsync,
    ZooKeeperRestart,
    follower_of,
    leader_of,
)
from sluice.testing.net import WaitTimeoutError
from sluice.testing.netns import LabCluster, LabZooKeeper, NetworkLab
from sluice.testing.slow_disk import SlowDisk, slow_disk_missing
from sluice.testing.zookeeper import new_chroot

TOPIC = "soak"
ACKS1_TOPIC = "soak-acks1"  # the acks=1 producer's (its retries may duplicate: kept apart)
ACKS1_RATE = 200
PARTITIONS = 3
GROUP = "soak-readers"
RATE = 500  # messages/s offered: leaves CPU for three brokers, ZooKeeper and the clients
SESSION_TIMEOUT_S = 4.0  # sluice.testing.cluster.CLUSTER_OVERRIDES
OVERRIDES = {"min.insync.replicas": "2"}
SLOW_BROKER = 2  # its log dir is a SlowDisk (a FUSE passthrough) for the slow-disk fault
RECOVERY_TIMEOUT = 60.0
RESERVE_S = 25.0  # kept at the end of the run for the last recovery and the drain
DEFAULT_MINUTES = 4.0


def pick_fault(
    rng: random.Random, cluster: LabCluster, zookeeper: LabZooKeeper, disk: SlowDisk
) -> Fault:
    """The next fault of the schedule (kind and target drawn from ``rng``)."""
    kind = rng.choice(KINDS)
    partition = rng.randrange(PARTITIONS)
    broker_id = rng.choice(sorted(cluster.brokers))
    if kind == "leader-kill":
        target = leader_of(cluster, TOPIC, partition)
        return BrokerKill(kind, f"broker {target}", broker=cluster.brokers[target])
    if kind == "follower-kill":
        target = follower_of(cluster, TOPIC, partition)
        return BrokerKill(kind, f"broker {target}", broker=cluster.brokers[target])
    if kind == "controller-kill":
        target = cluster.controller_id()
        return BrokerKill(kind, f"broker {target}", broker=cluster.brokers[target])
    if kind == "zookeeper-restart":
        return ZooKeeperRestart(kind, "zookeeper", zookeeper=zookeeper)
    if kind == "session-expiry":
        return Pause(kind, f"broker {broker_id}", broker=cluster.brokers[broker_id])
    if kind == "partition":
        return Cut(kind, f"broker {broker_id}", cluster=cluster, broker_id=broker_id)
    if kind == "slow-disk":
        return SlowFsync(kind, f"broker {SLOW_BROKER}", disk=disk, delay_s=rng.uniform(0.3, 1.5))
    raise ValueError(f"expected a kind of {KINDS}, found {kind!r}")


def hold_seconds(rng: random.Random, fault: Fault) -> float:
    if fault.kind == "session-expiry":
        return SESSION_TIMEOUT_S + rng.uniform(1.0, 3.0)
    return rng.uniform(3.0, 8.0)


def wait_recovered(cluster: LabCluster, zookeeper: LabZooKeeper, timeout: float) -> None:
    """Every broker (and ZooKeeper) running, every partition with a full ISR in every broker's
    own view. Raises ``WaitTimeoutError``."""
    everyone = set(cluster.brokers)
    if not zookeeper.running:
        zookeeper.start()
    for b in cluster.brokers.values():
        if not b.running:
            b.start()
    deadline = time.monotonic() + timeout
    for p in range(PARTITIONS):
        left = max(1.0, deadline - time.monotonic())
        cluster.wait_views(everyone, TOPIC, p, lambda v: set(v.isr) == everyone, left, "full ISR")


def run_schedule(
    rng: random.Random,
    cluster: LabCluster,
    zookeeper: LabZooKeeper,
    faults: FaultLog,
    until: float,
    disk: SlowDisk,
) -> None:
    while time.monotonic() < until:
        try:
            fault = pick_fault(rng, cluster, zookeeper, disk)
        except FaultTargetError as exc:
            print(f"  {faults.now():6.1f}s  no target: {exc}", flush=True)
            time.sleep(1)
            continue
        hold = hold_seconds(rng, fault)
        faults.inject(fault)
        print(
            f"  {faults.now():6.1f}s  {fault.kind:<18} {fault.target} for {hold:.1f}s", flush=True
        )
        time.sleep(hold)
        faults.heal(fault)
        try:
            wait_recovered(cluster, zookeeper, RECOVERY_TIMEOUT)
        except (WaitTimeoutError, RuntimeError) as exc:
            fault.note = f"not recovered in {RECOVERY_TIMEOUT:g}s: {exc}"
            print(f"  {faults.now():6.1f}s  {fault.note}", flush=True)
        time.sleep(rng.uniform(2.0, 5.0))


def keep_logs(work: Path, logs: Path) -> None:
    """Copy the brokers' and ZooKeeper's output out of the (temporary) work dir."""
    logs.mkdir(parents=True, exist_ok=True)
    for path in [*work.glob("broker-*/broker.out"), work / "zookeeper" / "zookeeper.log"]:
        if path.is_file():
            shutil.copyfile(path, logs / f"{path.parent.name}.log")


def soak(minutes: float, seed: int, out: Path, work: Path) -> dict[str, Any]:
    """Run the soak; the results (also written to ``out``)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    with NetworkLab() as lab:
        zookeeper = LabZooKeeper(lab, work / "zookeeper").start()
        cluster = LabCluster(
            lab, work, zookeeper.connect_string + new_chroot(zookeeper), overrides=OVERRIDES
        )
        disk = SlowDisk(work / "slow-disk-backing", cluster.brokers[SLOW_BROKER].log_dir)
        try:
            disk.open()
            cluster.start(timeout=60)
            cluster.create_topic(TOPIC, PARTITIONS)
            cluster.create_topic(ACKS1_TOPIC, PARTITIONS)
            start = time.monotonic()
            faults = FaultLog(start)
            producer = AckedProducer(cluster.bootstrap, TOPIC, PARTITIONS, start=start, rate=RATE)
            reader = GroupReader(cluster.bootstrap, TOPIC, GROUP, start=start)
            acks1 = AckedProducer(
                cluster.bootstrap, ACKS1_TOPIC, PARTITIONS, start=start, rate=ACKS1_RATE, acks="1"
            )
            producer.start()
            acks1.start()
            reader.start()
            time.sleep(5)  # a steady state to compare the faults against
            try:
                run_schedule(
                    rng, cluster, zookeeper, faults, start + minutes * 60 - RESERVE_S, disk
                )
            finally:
                faults.heal_all()
            wait_recovered(cluster, zookeeper, RECOVERY_TIMEOUT)
            time.sleep(5)
            producer.stop()
            acks1.stop()
            time.sleep(5)  # the reader catches up with the last acknowledgements
            reader.stop()
            elapsed = time.monotonic() - start
            committed = committed_offsets(cluster.bootstrap, TOPIC, GROUP, PARTITIONS)
            log = read_back(cluster.bootstrap, TOPIC, PARTITIONS)
            acks1_log = read_back(cluster.bootstrap, ACKS1_TOPIC, PARTITIONS)
        finally:
            cluster.stop()
            disk.close()
            zookeeper.stop()
            keep_logs(work, out / "logs")
    result = check(producer.acks, log, reader.delivered, committed)
    acks1_lost = lost_acks(acks1.acks, acks1_log)
    results: dict[str, Any] = {
        "minutes": minutes,
        "seed": seed,
        "partitions": PARTITIONS,
        "rate_offered": RATE,
        "elapsed_s": round(elapsed, 1),
        "faults_by_kind": faults.counts(),
        "faults": [f.as_dict() for f in faults.faults],
        "check": result.as_dict(),
        "producer": {
            "produced": producer.produced,
            "failed": dict(producer.failed),
            "fatal_errors": producer.fatal_errors,
        },
        "acks1": {
            "acked": len(acks1.acks),
            "lost": len(acks1_lost),
            "lost_by_fault": losses_by_fault(acks1_lost, faults.faults),
            "lost_examples": [
                f"{a.partition}:{a.seq}@{a.offset} ({a.at:.1f}s)" for a in acks1_lost[:10]
            ],
            "failed": dict(acks1.failed),
        },
        "group": {
            "delivered": len(reader.delivered),
            "commits": len(reader.commits),
            "failed_commits": dict(reader.failed_commits),
            "errors": dict(reader.errors),
            "committed_at_end": committed,
        },
    }
    write_json(out / "results.json", results)
    (out / "results.md").write_text(markdown_table(results), encoding="utf-8")
    plot(
        out / "throughput.png",
        throughput(producer.acks, int(elapsed) + 1),
        faults.faults,
        f"Soak, seed {seed}: acks=all throughput with faults marked",
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", DEFAULT_MINUTES))
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "1")))
    parser.add_argument("--out", type=Path, default=Path("build/soak"))
    args = parser.parse_args(argv)
    if args.minutes * 60 < RESERVE_S + 30:
        parser.error(f"--minutes must leave at least 30 s of faults, found {args.minutes}")
    missing = slow_disk_missing()
    if missing is not None:
        parser.error(f"the slow-disk fault needs a FUSE mount, but {missing}")
    # SIGTERM ends the run through the ``finally`` blocks: brokers stopped, namespaces deleted.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="sluice-soak-") as work:
        print(f"soak: {args.minutes:g} min, seed {args.seed}, work dir {work}", flush=True)
        results = soak(args.minutes, args.seed, args.out, Path(work))
    print(markdown_table(results))
    print(f"results: {args.out}/results.json, results.md, throughput.png")
    return 0 if results["check"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
