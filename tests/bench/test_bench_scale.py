"""bench.bench_scale: its pure parts, and one tiny run against a real broker."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from bench import bench_scale
from bench.results import Results


@pytest.mark.parametrize(
    ("text", "size"),
    [("5GB", 5_000_000_000), ("200MB", 200_000_000), ("1GiB", 2**30), ("5e6", 5_000_000),
     ("1.5 GB", 1_500_000_000)],
)  # fmt: skip
def test_parse_size(text: str, size: int) -> None:
    assert bench_scale.parse_size(text) == size


def test_parse_size_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="size"):
        bench_scale.parse_size("5 parsecs")


def test_fit_to_disk_scales_down_with_a_note() -> None:
    assert bench_scale.fit_to_disk(1_000_000_000, 100_000_000_000) == (1_000_000_000, None)
    target, note = bench_scale.fit_to_disk(5_000_000_000, 4_200_000_000)
    assert target == pytest.approx(2_000_000_000, abs=1) and note is not None and "cut" in note
    with pytest.raises(RuntimeError, match="free"):
        bench_scale.fit_to_disk(5_000_000_000, 2_000_000_000)


def test_window_rate_over_the_first_and_last_tenth() -> None:
    samples = [{"log_bytes": b, "messages": m, "seconds": s}
               for b, m, s in [(0, 0, 0.0), (50, 50, 1.0), (100, 100, 2.0), (900, 900, 10.0),
                               (950, 950, 11.0), (1000, 1000, 13.0)]]  # fmt: skip
    assert bench_scale.window_rate(samples, first=True) == 50.0  # 0 -> 100 bytes in 2 s
    assert bench_scale.window_rate(samples, first=False) == 100 / 3  # 900 -> 1000 in 3 s


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on ("" when unknown)."""
    best, kind = "", ""
    with contextlib.suppress(OSError), open("/proc/self/mounts") as mounts:
        for line in mounts:
            _dev, point, fstype = line.split()[:3]
            if str(path).startswith(point) and len(point) > len(best):
                best, kind = point, fstype
    return kind


def test_resident_fraction_sees_the_page_cache(tmp_path: Path) -> None:
    if filesystem(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip("a tmpfs file lives in the page cache: nothing to evict")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(os.urandom(1 << 20))
    if bench_scale.resident_fraction([path], 0, 1 << 20) is None:
        pytest.skip("no mincore(2) here")
    assert bench_scale.resident_fraction([path], 0, 1 << 20) == 1.0  # just written
    bench_scale.evict([path], allow_drop_caches=False)
    assert bench_scale.resident_fraction([path], 0, 1 << 20) == 0.0


@pytest.mark.broker
def test_a_tiny_run_writes_rows_and_the_series(tmp_path: Path) -> None:
    results = Results()
    record = bench_scale.run(results, True, size=5_000_000, slice_bytes=500_000,
                             out_dir=tmp_path, work_parent=tmp_path,
                             allow_drop_caches=False)  # fmt: skip
    assert json.loads((tmp_path / "scale.json").read_text()) == record
    assert [p.name for p in tmp_path.iterdir()] == ["scale.json"]  # the data directory is gone
    assert record["samples"][-1]["log_bytes"] >= 5_000_000
    assert len(record["samples"]) >= 10
    assert {(r["position"], r["cache"]) for r in record["reads"]} == {
        (p, c) for p in ("start", "middle", "end") for c in ("warm", "cold")
    }
    assert all(r["seen"] == r["count"] for r in record["reads"])
    metrics = {r.metric: r for r in results.items}
    assert metrics["produce, last/first"].unit == "ratio"
    assert metrics["consume at the end, cold cache"].value > 0
    assert metrics["lookup by time of the first message, full log"].unit == "ms"
    assert {r.experiment for r in results.items} == {"scale"}
    assert results.notes["scale"]
