"""kill -9 of a driver process at each point of a run — after staging its files, between the
error and the data commits, right after the commits — then a rerun: every offset once."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_maintenance import remove_orphans

ROOT = Path(__file__).resolve().parents[3]

# One run of partition 0 of topic "a" up to END (every tenth offset undecodable), killed with
# SIGKILL at CRASH: "staged" (files written, nothing committed), "between" (error table
# committed, data not), "committed" (both committed), or never.
DRIVER = """
import os, signal, sys
import pyarrow as pa, pyarrow.compute as pc
from sluice.pipeline.table.iceberg_catalog import IcebergConfig
from sluice.pipeline.table.iceberg_run import IcebergRun
from tests.pipeline.table.iceberg_rows import typed_rows
from tests.pipeline.table.test_iceberg_errors import ERROR_SCHEMA, errors_at

warehouse, end, crash = sys.argv[1], int(sys.argv[2]), sys.argv[3]
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
run = IcebergRun.begin(IcebergConfig.from_properties({}, warehouse), ["a"])
start = run.committed.get("a", {}).get(0, 0)
end = run.pinned["a"].get(0, start) if "a" in run.pinned else end
writers = run.writers(typed_rows("a", 1, 0, 1).schema, ERROR_SCHEMA)
bad = [o for o in range(start, end) if o % 10 == 0]
rows = typed_rows("a", 1, start, end - start)
good = rows.filter(pc.invert(pc.is_in(rows["offset"], pa.array(bad, pa.int64()))))
files = writers["a"].data.write(good, "run") + writers["a"].errors.write(errors_at(bad), "run")
if crash == "staged":
    die()
run.commit(files, {"a": {0: end}}, "run", between=die if crash == "between" else None)
if crash == "committed":
    die()
print(start, end)
"""


def drive(warehouse: str, end: int, crash: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, warehouse, str(end), crash],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("crash", ["staged", "between", "committed"])
def test_kill_9_then_rerun_exactly_once(tmp_path: Path, crash: str) -> None:
    warehouse = (tmp_path / "wh").as_uri()
    first = drive(warehouse, 100, "never")
    assert first.returncode == 0, first.stderr
    killed = drive(warehouse, 200, crash)
    assert killed.returncode == -9, killed.stderr
    rerun = drive(warehouse, 300, "never")  # the log grew meanwhile
    assert rerun.returncode == 0, rerun.stderr
    # After "between" the rerun is pinned to the killed run's end; the next one reads on.
    expected_rerun = {"staged": "100 300", "between": "100 200", "committed": "200 300"}[crash]
    assert rerun.stdout.split() == expected_rerun.split()
    last = drive(warehouse, 300, "never")
    assert last.returncode == 0, last.stderr
    catalog = IcebergConfig.from_properties({}, warehouse).open_catalog()
    data = catalog.load_table("sluice.a").scan().to_arrow()["offset"].to_pylist()
    errors = catalog.load_table("sluice.a_errors").scan().to_arrow()["offset"].to_pylist()
    assert Counter(data + errors) == Counter(range(300))
    assert sorted(errors) == list(range(0, 300, 10))
    removed = remove_orphans(catalog, "sluice.a", older_than=dt.timedelta(0))
    if crash == "staged":
        assert removed  # the killed run's data files
    assert catalog.load_table("sluice.a").scan().to_arrow().num_rows == len(data)
