"""bench.bench_peers' harness logic: how many messages a run writes, which systems run, in what
order; nothing measured."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench import bench_peers
from bench.bench_peers import Live, floor_count, probe_count, scaled_count, select


@pytest.mark.parametrize(
    ("rate", "seconds", "floor", "expected"),
    [
        (10_000.0, 3.0, 5_000, 45_000),  # 10 k/s × 3 s × 1.5, in thousands
        (1_234.0, 3.0, 500, 6_000),  # 5,553 rounded up to a thousand
        (100.0, 3.0, 5_000, 5_000),  # never below the floor
        (math.nan, 3.0, 5_000, 5_000),  # no rate: the floor
        (0.0, 3.0, 5_000, 5_000),
        (1e12, 3.0, 5_000, bench_peers.MAX_COUNT),  # a calibration gone wrong is bounded
    ],
)
def test_scaled_count_lasts_the_phase_within_bounds(
    rate: float, seconds: float, floor: int, expected: int
) -> None:
    assert scaled_count(rate, seconds, floor) == expected


def test_scaled_count_writes_at_least_the_phase_at_the_calibrated_rate() -> None:
    for rate in (37.0, 5_123.0, 987_654.0):
        n = scaled_count(rate, 3.0, 1)
        assert n / rate >= 3.0


def test_counts_quick_start_from_the_probe_and_full_keeps_the_papers() -> None:
    assert floor_count("sluice", "batch 1", quick=True) == probe_count("sluice", "batch 1")
    assert floor_count("tansu", "batch 50", quick=False) == 1_000_000
    assert floor_count("rabbitmq", "batch 1", quick=False) == 100_000
    assert probe_count("activemq", "batch 1") < probe_count("sluice", "batch 1")


def test_select_keeps_order_drops_repeats_and_names_the_unknown() -> None:
    assert select("tansu, sluice,tansu") == ("tansu", "sluice")
    assert select("sluice-uvloop") == ("sluice-uvloop",)
    with pytest.raises(ValueError, match="kafka"):
        select("sluice,kafka")
    with pytest.raises(ValueError):
        select(" , ")


class _Driver:
    def __init__(self, modes: list[str]) -> None:
        self.MODES = dict.fromkeys(modes, "")


def test_systems_take_turns_within_each_mode() -> None:
    both = ["batch 1", "batch 50", "default batching"]
    live: dict[str, Any] = {
        "sluice": Live(_Driver(both), None),  # type: ignore[arg-type]
        "tansu": Live(_Driver(both), None),  # type: ignore[arg-type]
        "rabbitmq": Live(_Driver(["batch 1", "batch 50"]), None),  # type: ignore[arg-type]
    }
    assert bench_peers._turns(live) == [
        ("sluice", "batch 1"), ("tansu", "batch 1"), ("rabbitmq", "batch 1"),
        ("sluice", "batch 50"), ("tansu", "batch 50"), ("rabbitmq", "batch 50"),
        ("sluice", "default batching"), ("tansu", "default batching"),
    ]  # fmt: skip


def test_a_failing_step_drops_that_system_only() -> None:
    stopped = []

    class Server:
        def stop(self) -> None:
            stopped.append(True)

    live: dict[str, Any] = {"sluice": Live(_Driver([]), Server()),  # type: ignore[arg-type]
                            "tansu": Live(_Driver([]), Server())}  # type: ignore[arg-type]  # fmt: skip
    records: dict[str, Any] = {"failed": {}}
    with bench_peers._guard(live, records, "tansu"):
        raise RuntimeError("broker gone")
    assert list(live) == ["sluice"]
    assert records["failed"] == {"tansu": "broker gone"}
    assert stopped == [True]


def test_read_record_reports_the_median_run_and_every_rate() -> None:
    from bench.peers import Read

    reads = [Read(100, 100, 2.0, 0.1, 1), Read(300, 300, 3.0, 0.1, 3), Read(200, 200, 4.0, 0.1, 2)]
    record = bench_peers._read_record("sluice", "batch 1", reads, 30.0)
    assert record["rate"] == 50.0
    assert record["runs"] == [50.0, 50.0, 100.0]
    assert record["complete"] is True
