"""bench.bench_cluster: its arithmetic and bounds, a tiny run of the whole group against a real
three-broker cluster and ZooKeeper, and its section of docs/performance.md. No figure is
asserted beyond being measured (a number, and positive): timings belong to the benchmark."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from bench import bench_cluster
from bench.bench_cluster import Deadline, DidNotFinish, Sizes
from bench.report import context, render
from bench.results import Results
from sluice.testing.zookeeper import ZooKeeperServer

MACHINE = {"command": "python -m bench.run --quick --only cluster", "mode": "quick",
           "date": "2026-11-28T06:00:00+00:00", "cpus": 2}  # fmt: skip
TINY = Sizes(5, {"batch 1": 50, "batch 50": 200, "default batching": 200}, (12,), (12,), 2,
             {1: 2, 100: 1}, 3, 1, 60.0, (12,))  # fmt: skip
CPU = "brokers' CPU per round, median of the rest"
EXPERIMENTS = {"cluster_latency", "cluster_throughput", "cluster_partitions", "cluster_failover",
               "cluster_transactions", "cluster_rebalance"}  # fmt: skip


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([3.0, 1.0, 2.0], 50, 2.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.0), ([5.0], 99, 5.0),
     ([float(i) for i in range(1, 101)], 99, 99.0), ([float(i) for i in range(1, 201)], 99, 198.0)],
)  # fmt: skip
def test_percentile_is_the_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert bench_cluster.percentile(values, q) == expected


def test_partitions_spread_over_topics_the_broker_accepts() -> None:
    assert bench_cluster.spread("w", 300) == {"w-0": 300}
    assert bench_cluster.spread("w", 1_500) == {"w-0": 1_000, "w-1": 500}
    assert bench_cluster.spread("w", 4_000) == {f"w-{i}": 1_000 for i in range(4)}
    assert bench_cluster.every_partition({"a": 2, "b": 1}) == [("a", 0), ("a", 1), ("b", 0)]


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(bench_cluster.percentile([], 50))


def test_a_deadline_raises_once_passed_and_says_how_far_it_got() -> None:
    deadline = Deadline("round to 4,000 partitions", 0.05)
    deadline.check("nothing yet")  # within the limit: no error
    assert 0 < deadline.left() <= 0.05
    time.sleep(0.06)
    assert deadline.expired() and deadline.left() == 0
    with pytest.raises(DidNotFinish) as raised:
        deadline.check("3 of 4,000 acknowledged")
    assert str(raised.value) == (
        "round to 4,000 partitions: did not finish in 0 s (3 of 4,000 acknowledged)"
    )


def test_the_modes_follow_the_issue() -> None:
    assert bench_cluster.QUICK.partitions == (300, 1_500, 4_000)
    assert bench_cluster.QUICK.rounds_at == {4_000: 1}  # one round after the first there
    assert bench_cluster.QUICK.failover == (300, 1_500)
    assert bench_cluster.FULL.partitions == (300, 1_500, 4_000)
    assert bench_cluster.FULL.failover == (300, 1_500)
    # and at 1,500 again with the issue's ZooKeeper session, 18 s
    assert bench_cluster.QUICK.long_session_failover == (1_500,)
    assert bench_cluster.FULL.long_session_failover == (1_500,)
    assert bench_cluster.LONG_SESSION_MS == 18_000
    assert set(bench_cluster.QUICK.transactions) == set(bench_cluster.FULL.transactions) == {1, 100}
    assert bench_cluster.OVERRIDES["min.insync.replicas"] == "2"


@pytest.mark.broker
@pytest.mark.slow  # kills the controller
def test_a_tiny_run_measures_every_experiment(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    results = Results()
    bench_cluster.run(results, True, sizes=TINY, work_parent=tmp_path, zookeeper=zookeeper)
    assert list(tmp_path.iterdir()) == []  # the brokers' directories are gone
    assert zookeeper.running  # a server it was given is left running
    assert set(results.experiments) == EXPERIMENTS
    found = {(r.experiment, r.system, r.metric): r for r in results.items}
    for acks in ("acks=all", "acks=1"):
        p50, p99 = found["cluster_latency", acks, "p50"], found["cluster_latency", acks, "p99"]
        assert 0 < p50.value <= p99.value and p50.unit == "ms"
        for way in TINY.throughput_messages:
            rate = found["cluster_throughput", acks, way]
            assert rate.value > 0 and len(rate.runs) == bench_cluster.THROUGHPUT_RUNS
    for way in TINY.throughput_messages:
        ratio = found["cluster_throughput", "acks=all/acks=1", way]
        assert ratio.unit == "ratio" and len(ratio.runs) == bench_cluster.THROUGHPUT_RUNS
    for metric in ("topic creation", "first round", "round, median of the rest"):
        assert found["cluster_partitions", "12 partitions", metric].value > 0
    assert len(found["cluster_partitions", "12 partitions", "round, median of the rest"].runs) == 2
    cpu = found["cluster_partitions", "12 partitions", CPU]
    assert cpu.value > 0 and cpu.unit == "ms" and len(cpu.runs) == 2
    failover = {r.system: r for r in results.items if r.experiment == "cluster_failover"}
    assert set(failover) == {"12 partitions, 4 s session", "12 partitions, 18 s session"}
    assert all(r.value > 0 and r.unit == "s" for r in failover.values())
    for metric in ("1 batch per transaction", "100 batches per transaction",
                   "one-message transaction, median"):  # fmt: skip
        assert found["cluster_transactions", "acks=all", metric].value > 0
    rebalance = found["cluster_rebalance", "3 consumers, range", "join to all three assigned"]
    assert rebalance.value > 0 and rebalance.unit == "s"
    for system in failover:
        assert any(n.startswith(f"{system}: broker") and "controller" in n
                   for n in results.notes["cluster_failover"])  # fmt: skip
    assert any("zookeeper.session.timeout.ms=" in n for n in results.notes["cluster_latency"])
    assert not any("did not finish" in n for notes in results.notes.values() for n in notes)

    machine = {**MACHINE, "experiments": {e: MACHINE for e in EXPERIMENTS}}
    text = render(context(results.items, machine))
    assert "**Replicated cluster (acks=all)**" in text and "--only cluster" in text
    assert "1,000 messages" in text  # the quick mode's count
    assert "| one acks=all message to every partition | 12 partitions |" in text
    assert "| msg/s by batching | acks=all | acks=1 | acks=all/acks=1 |" in text


@pytest.mark.broker
def test_a_measurement_past_its_limit_is_recorded_as_not_finished(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    results = Results()
    # 1,000 partitions led and in sync on three brokers in under a second: out of reach
    sizes = Sizes(1, {}, (1_000,), (1_000,), 1_000, {}, 0, 0, 0.5)
    with bench_cluster.started_cluster(tmp_path / "cluster", zookeeper) as cluster:
        bench_cluster.measure_partitions(results, cluster, 1_000, sizes)
        with pytest.raises(DidNotFinish, match="did not finish in 0 s"):
            bench_cluster.throughput(cluster, "wide-1000-0", "all", "batch 1", 10**7, 0.2)
    rows = {r.metric: r for r in results.items}
    assert set(rows) == {"topic creation", "first round", "round, median of the rest", CPU}
    assert all(math.isnan(r.value) for r in rows.values())
    assert [r.experiment for r in results.items] == ["cluster_partitions"] * 4  # no failover
    (note,) = results.notes["cluster_partitions"]
    assert "did not finish in 1 s" in note  # creation's limit is twice the measurement's

    record = {**MACHINE, "notes": [note]}
    text = render(
        context(results.items, {**MACHINE, "experiments": {"cluster_partitions": record}})
    )
    assert "| topic creation | did not finish |" in text and "Notes: " + note in text
