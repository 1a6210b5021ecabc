"""bench.bench_transactions: its arithmetic, a tiny run against a real broker, and its section
of the README report."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_transactions
from bench.report import context, render
from bench.results import Results

MACHINE = {"command": "python -m bench.run --quick --only transactions", "mode": "quick",
           "date": "2026-11-24T10:00:00+00:00", "cpus": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("batches", "per_txn", "count"),
    [(1000, None, 0), (1000, 1, 1000), (1000, 10, 100), (1000, 100, 10), (1050, 100, 11),
     (5, 100, 1)],
)  # fmt: skip
def test_transactions_per_run(batches: int, per_txn: int | None, count: int) -> None:
    assert bench_transactions.transactions(batches, per_txn) == count


@pytest.mark.broker
def test_a_tiny_run_writes_every_way_and_checks_the_markers(tmp_path: Path) -> None:
    results = Results()
    bench_transactions.run(results, True, batches=20, work_parent=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the broker's directory is gone
    found = {(r.system, r.metric): r for r in results.items}
    for name, _slug, per_txn in bench_transactions.WAYS:
        rate = found[(name, "records/s")]
        assert rate.value > 0 and len(rate.runs) == bench_transactions.REPEATS
        assert found[(name, "MB/s")].value == pytest.approx(rate.value * 100 / 1e6, rel=0.01)
        if per_txn is not None:
            assert found[(f"{name}/idempotent", "records/s")].unit == "ratio"
    assert {r.experiment for r in results.items} == {"transactional_produce"}

    machine = {**MACHINE, "experiments": {"transactional_produce": MACHINE}}
    text = render(context(results.items, machine))
    assert "**Transactions**" in text and "3,000 batches" in text  # the quick mode's count
    assert "| records/s |" in text and "100 batches per transaction" in text
    assert "1 batch per transaction/idempotent (records/s)" in text  # the ratio, quoted
