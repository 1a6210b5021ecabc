"""Range, RoundRobin and Sticky partition assignment under a member leaving and returning: the
experiment of "Kafka partition strategies and system overhead" (Computer Era 2020, no. 11).

Topics t0 (4 partitions), t1 (4) and t2 (5); one group of three consumers with heterogeneous
subscriptions: C0 reads t0, C1 t0 and t1, C2 t0, t1 and t2. A producer (another process) keeps
every partition busy at a modest steady rate. Once the group is settled the clock starts; C0
leaves at 20 s and comes back at 40 s, and the run ends at 60 s (quick: 8 s, 16 s, 24 s). This
runs once per ``partition.assignment.strategy``: ``range``, ``roundrobin`` and
``cooperative-sticky`` (librdkafka's sticky assignor is the cooperative one).

Each consumer lives in its own thread and makes every consumer call on that thread; its
assignment is tracked through ``on_assign`` / ``on_revoke`` / ``on_lost`` (incremental under the
cooperative protocol, the whole set under the eager one). Recorded per strategy:

* partitions moved when C0 leaves / returns: partitions whose owner differs between the group's
  assignment just before the change and just before the next one (or the end);
* partitions revoked in the callbacks during that rebalance (eager revokes everything);
* what ``pipeline/consumer/assignors.py`` says the moves should be for the same membership
  changes. The broker's group coordinator runs no assignor: the group leader (a librdkafka
  client) does, so the measured moves are librdkafka's and the predicted ones are Sluice's own
  functions;
* the consumption rate per consumer (messages per 0.5 s) and the rate dip after each change;
* the CPU of this process (all three consumers; the producer is another process), per 0.5 s.

``python -m bench.bench_assignors [--full]`` writes ``build/bench/assignors.png`` (one panel
per strategy: rate per consumer over time, leave/return marked) and ``assignors.json``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.bench_broker import start_broker
from bench.results import OUT_DIR, Results
from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.consumer.assignors import (
    assign_range,
    assign_round_robin,
    assign_sticky,
)

EXPERIMENT = "partition_strategy"
TOPICS = {"t0": 4, "t1": 4, "t2": 5}
SUBSCRIPTIONS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
STRATEGIES: dict[str, Callable[..., dict[str, list[TopicPartition]]]] = {
    "range": assign_range,
    "roundrobin": assign_round_robin,
    "cooperative-sticky": assign_sticky,
}
RATE = 2_000  # messages per second over all 13 partitions
MESSAGE = 200
BIN = 0.5  # seconds per sample


# --------------------------------------------------------------------------------------------
# Prediction from pipeline/consumer/assignors.py
# --------------------------------------------------------------------------------------------


def _owners(assignment: Mapping[str, list[TopicPartition]]) -> dict[tuple[str, int], str]:
    # Member ids are "C0", "C0'" ...; the owner is the consumer's name, the id's first two chars.
    return {
        (tp.topic, tp.partition): member[:2] for member, tps in assignment.items() for tp in tps
    }


def _moved(before: Mapping[Any, str], after: Mapping[Any, str]) -> int:
    return sum(1 for tp in set(before) | set(after) if before.get(tp) != after.get(tp))


def predicted_moves(strategy: str) -> tuple[int, int]:
    """(moves when C0 leaves, moves when C0 returns) by Sluice's own assignor functions. The
    returning C0 gets a new member id that still sorts first, as librdkafka's does."""
    assign = STRATEGIES[strategy]
    first = assign(SUBSCRIPTIONS, TOPICS)
    survivors = {m: t for m, t in SUBSCRIPTIONS.items() if m != "C0"}
    left = assign(survivors, TOPICS, previous=first)
    rejoined = {"C0'": SUBSCRIPTIONS["C0"], **survivors}
    back = assign(rejoined, TOPICS, previous=left)
    return _moved(_owners(first), _owners(left)), _moved(_owners(left), _owners(back))


# --------------------------------------------------------------------------------------------
# The producer (its own process, so that the CPU measured here is the consumers')
# --------------------------------------------------------------------------------------------


def _produce_forever(bootstrap: str, rate: int, stop: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
    payload = os.urandom(MESSAGE)
    targets = [(t, p) for t, n in TOPICS.items() for p in range(n)]
    sent, start = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            topic, partition = targets[sent % len(targets)]
            try:
                producer.produce(topic, payload, partition=partition)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(10)


# --------------------------------------------------------------------------------------------
# The consumers
# --------------------------------------------------------------------------------------------


class Group:
    """What the consumer threads report: message counts and partition owners, under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = dict.fromkeys(SUBSCRIPTIONS, 0)
        self.owner: dict[tuple[str, int], str] = {}
        self.changes: list[tuple[float, str, str, int]] = []  # (time, name, kind, partitions)
        self.errors: list[str] = []

    def assigned(self, name: str, partitions: list[Any]) -> None:
        with self.lock:
            for p in partitions:
                self.owner[(p.topic, p.partition)] = name
            self.changes.append((time.monotonic(), name, "assign", len(partitions)))

    def revoked(self, name: str, partitions: list[Any]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get((p.topic, p.partition)) == name:
                    del self.owner[(p.topic, p.partition)]
            self.changes.append((time.monotonic(), name, "revoke", len(partitions)))

    def snapshot(self) -> dict[tuple[str, int], str]:
        with self.lock:
            return dict(self.owner)


def _consume(name: str, strategy: str, group_id: str, bootstrap: str, group: Group,
             stop: threading.Event) -> None:  # fmt: skip
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group_id, "client.id": name,
        "partition.assignment.strategy": strategy, "auto.offset.reset": "latest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
        "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
    })  # fmt: skip
    consumer.subscribe(
        SUBSCRIPTIONS[name],
        on_assign=lambda _c, parts: group.assigned(name, parts),
        on_revoke=lambda _c, parts: group.revoked(name, parts),
        on_lost=lambda _c, parts: group.revoked(name, parts),
    )
    try:
        while not stop.is_set():
            messages = consumer.consume(1000, 0.1)
            n = 0
            for m in messages:
                if m.error() is None:
                    n += 1
                elif len(group.errors) < 20:
                    group.errors.append(f"{name}: {m.error()}")
            if n:
                with group.lock:
                    group.counts[name] += n
    finally:
        consumer.close()  # leaves the group (LeaveGroup), which starts the rebalance


class Member:
    def __init__(self, name: str, strategy: str, group_id: str, bootstrap: str, group: Group):
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=_consume, args=(name, strategy, group_id, bootstrap, group, self.stop),
            name=f"consumer-{name}", daemon=True,
        )  # fmt: skip
        self.thread.start()

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(30)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wait_settled(group: Group, quiet: float, timeout: float) -> bool:
    """Until every partition is owned and no callback fired for ``quiet`` seconds."""
    total = sum(TOPICS.values())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with group.lock:
            owned = len(group.owner)
            last = group.changes[-1][0] if group.changes else 0.0
        if owned == total and time.monotonic() - last >= quiet:
            return True
        time.sleep(0.1)
    return False


def run_strategy(strategy: str, bootstrap: str, leave_at: float, return_at: float,
                 total: float) -> dict[str, Any]:  # fmt: skip
    group = Group()
    group_id = f"assignors-{strategy}-{time.monotonic_ns()}"
    members = {n: Member(n, strategy, group_id, bootstrap, group) for n in SUBSCRIPTIONS}
    settled = _wait_settled(group, quiet=1.5, timeout=60)
    start = time.monotonic()
    samples: list[dict[str, Any]] = []
    snapshots: dict[str, dict[tuple[str, int], str]] = {"start": group.snapshot()}
    events = [(leave_at, "leave"), (return_at, "return"), (total, "end")]
    last_counts, last_cpu, tick = dict(group.counts), _cpu_seconds(), start
    while events or time.monotonic() - start < total:
        tick += BIN
        time.sleep(max(0.0, tick - time.monotonic()))
        with group.lock:
            counts = dict(group.counts)
        cpu = _cpu_seconds()
        samples.append({
            "t": round(tick - start, 3),
            "rate": {n: counts[n] - last_counts[n] for n in counts},
            "cpu": 100 * (cpu - last_cpu) / BIN,
        })  # fmt: skip
        last_counts, last_cpu = counts, cpu
        while events and tick - start >= events[0][0] - 1e-9:
            _, kind = events.pop(0)
            snapshots[kind] = group.snapshot()
            if kind == "leave":
                members["C0"].leave()
            elif kind == "return":
                members["C0"] = Member("C0", strategy, group_id, bootstrap, group)
        if not events:
            break
    for member in members.values():
        member.leave()
    changes = [(round(t - start, 3), n, k, c) for t, n, k, c in group.changes]
    return {
        "strategy": strategy, "settled": settled, "leave_at": leave_at, "return_at": return_at,
        "total": total, "samples": samples, "changes": changes, "errors": group.errors,
        "moved": {
            "leaves": _moved(snapshots["leave"], snapshots["return"]),
            "returns": _moved(snapshots["return"], snapshots["end"]),
        },
        "assignment": {k: _by_owner(v) for k, v in snapshots.items()},
    }  # fmt: skip


def _by_owner(owner: Mapping[tuple[str, int], str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for (topic, partition), name in sorted(owner.items()):
        out.setdefault(name, []).append(f"{topic}p{partition}")
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------
# Metrics from one run
# --------------------------------------------------------------------------------------------


def _window(run: dict[str, Any], at: float, until: float) -> dict[str, Any]:
    """Rebalance metrics for the membership change at ``at`` (window up to ``until``)."""
    samples = run["samples"]
    before = [s for s in samples if at - 3.0 < s["t"] <= at]
    after = [s for s in samples if at < s["t"] <= until]
    total = [sum(s["rate"].values()) for s in after]
    base = sum(sum(s["rate"].values()) for s in before) / max(1, len(before))
    revoked = sum(c for t, _n, k, c in run["changes"] if k == "revoke" and at <= t < until)
    callbacks = [t for t, _n, _k, _c in run["changes"] if at <= t < until]
    survivors = [s["rate"]["C1"] + s["rate"]["C2"] for s in after]
    survivors_before = [s["rate"]["C1"] + s["rate"]["C2"] for s in before]
    tail = survivors[len(survivors) // 2 :] or [0]
    return {
        "dip": 100 * (1 - min(total) / base) if total and base else 0.0,
        "revoked": revoked,
        "rebalance_s": (max(callbacks) - at) if callbacks else 0.0,
        # The article's delta V: C1+C2's rate once settled minus before, per second.
        "delta_v": (sum(tail) / len(tail) - sum(survivors_before) / max(1, len(before))) / BIN,
        "cpu_peak": max((s["cpu"] for s in after[: int(4 / BIN)]), default=0.0),
        "cpu_mean": sum(s["cpu"] for s in after) / max(1, len(after)),
    }


def report(results: Results, run: dict[str, Any]) -> None:
    strategy = run["strategy"]
    predicted = predicted_moves(strategy)
    windows = {
        "leaves": _window(run, run["leave_at"], run["return_at"]),
        "returns": _window(run, run["return_at"], run["total"]),
    }
    for i, (when, w) in enumerate(windows.items()):
        add = results.add
        add(EXPERIMENT, strategy, f"partitions moved when C0 {when}", run["moved"][when],
            "partitions")  # fmt: skip
        add(EXPERIMENT, strategy, f"predicted moves when C0 {when}", predicted[i], "partitions")
        add(EXPERIMENT, strategy, f"partitions revoked when C0 {when}", w["revoked"],
            "partitions")  # fmt: skip
        add(EXPERIMENT, strategy, f"rebalance time when C0 {when}", w["rebalance_s"], "s")
        add(EXPERIMENT, strategy, f"rate dip when C0 {when}", w["dip"], "%")
        add(EXPERIMENT, strategy, f"C1+C2 rate change, C0 {when}", w["delta_v"], "msg/s")
        add(EXPERIMENT, strategy, f"CPU peak after C0 {when}", w["cpu_peak"], "% of a core")
    steady = [s["cpu"] for s in run["samples"] if s["t"] <= run["leave_at"]]
    results.add(EXPERIMENT, strategy, "CPU before any change", sum(steady) / max(1, len(steady)),
                "% of a core")  # fmt: skip


# --------------------------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------------------------


def plot(runs: list[dict[str, Any]], path: Path, quick: bool) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_assignors: matplotlib is not installed; no plot")
        return None
    colors = {"C0": "#1f77b4", "C1": "#ff7f0e", "C2": "#2ca02c"}
    fig, axes = plt.subplots(1, len(runs), figsize=(5.4 * len(runs), 4.4), squeeze=False,
                             sharey=True)  # fmt: skip
    for ax, run in zip(axes[0], runs, strict=True):
        t = [s["t"] for s in run["samples"]]
        for name, color in colors.items():
            ax.plot(t, [s["rate"][name] for s in run["samples"]], label=name, color=color)
        ax.axvline(run["leave_at"], color="grey", linestyle="--")
        ax.axvline(run["return_at"], color="grey", linestyle=":")
        top = ax.get_ylim()[1]
        ax.text(run["leave_at"], top, " C0 leaves", va="top", fontsize=8)
        ax.text(run["return_at"], top, " C0 returns", va="top", fontsize=8)
        cpu = ax.twinx()
        cpu.plot(t, [s["cpu"] for s in run["samples"]], color="black", alpha=0.25, lw=1,
                 label="CPU")  # fmt: skip
        cpu.set_ylim(bottom=0)
        cpu.set_ylabel("consumer process CPU (% of a core)", fontsize=8)
        moved = run["moved"]
        ax.set_title(f"{run['strategy']}  (moved: {moved['leaves']} on leave, "
                     f"{moved['returns']} on return)", fontsize=10)  # fmt: skip
        ax.set_xlabel("seconds")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"messages per {BIN} s")
    axes[0][0].legend(loc="lower left", fontsize=8)
    kind = "quick" if quick else "full"
    fig.suptitle(f"Partition assignment strategies: t0(4) t1(4) t2(5); C0→t0, C1→t0,t1, "
                 f"C2→t0,t1,t2; {RATE} msg/s produced ({kind} run)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def run(results: Results, quick: bool) -> None:
    leave_at, return_at, total = (8.0, 16.0, 24.0) if quick else (20.0, 40.0, 60.0)
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-assignors-", dir=".")).resolve()
    broker = start_broker(work)
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    producer = None
    runs = []
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
        for future in futures.values():
            future.result(timeout=30)
        del admin, futures  # its connection would outlive the broker and log refusals
        producer = ctx.Process(target=_produce_forever, args=(broker.bootstrap, RATE, stop))
        producer.start()
        time.sleep(2)  # the producer is up and every partition has data before anyone reads
        for strategy in STRATEGIES:
            one = run_strategy(strategy, broker.bootstrap, leave_at, return_at, total)
            if not one["settled"]:
                print(f"  {strategy}: the group did not settle within 60 s", flush=True)
            for error in one["errors"][:3]:
                print(f"  {strategy}: {error}", flush=True)
            report(results, one)
            runs.append(one)
    finally:
        stop.set()
        if producer is not None:
            producer.join(30)
            if producer.is_alive():
                producer.kill()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "assignors.json").write_text(json.dumps({"quick": quick, "runs": runs}, indent=1))
    png = plot(runs, OUT_DIR / "assignors.png", quick)
    if png is not None:
        print(f"plot {png}", flush=True)


if __name__ == "__main__":
    results = Results()
    run(results, quick="--full" not in sys.argv[1:])
