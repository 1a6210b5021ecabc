"""The wheel: built from the repository, it installs one top-level name, ``sluice``, and runs.

The repository keeps the design card's folders (``broker/``, ``pipeline/``, ...) at its top and
``setup.py`` maps them under ``sluice``; these tests build the wheel the way ``pip`` does and use
it from a separate directory, so nothing from the checkout or the editable install can stand in
for a file the wheel forgot.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (path,) = out.glob("sluice-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a directory of its own (``pip install --target``)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return target


def _run(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_wheel_holds_only_the_sluice_namespace(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert tops == {"sluice", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                    + ".dist-info"}  # fmt: skip
    # every folder of the repository is inside, the Avro schemas included
    for expected in [
        "sluice/__main__.py",
        "sluice/cli/__init__.py",
        "sluice/common/properties.py",
        "sluice/broker/log/log.py",
        "sluice/broker/server/broker.py",
        "sluice/schemas/registry.py",
        "sluice/schemas/page_view.avsc",
        "sluice/pipeline/source/data_source.py",
        "sluice/jobs/nightly_load.py",
    ]:
        assert expected in names
    assert not any(n.startswith(("sluice/tests/", "sluice/bench/")) for n in names)


def test_the_installed_wheel_is_what_runs(installed: Path, tmp_path: Path) -> None:
    proc = _run(
        installed, sys.executable, "-c",
        "import sluice.broker.log.log as m, sluice.pipeline.load.run as r; print(m.__file__);"
        " print(r.__file__)",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for line in proc.stdout.split():
        assert line.startswith(str(installed)), line


def test_sluice_help_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    for argv in (
        [sys.executable, "-m", "sluice", "--help"],
        [str(installed / "bin" / "sluice"), "--help"],
    ):
        proc = _run(installed, *argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "usage: sluice" in proc.stdout
        for command in ("broker", "topics", "registry", "load", "mirror", "audit"):
            assert command in proc.stdout


@pytest.mark.slow
def test_the_demo_and_its_spark_submit_load_run_from_the_wheel(
    installed: Path, tmp_path: Path
) -> None:
    """``make demo``'s program from the wheel: a broker, the registry, two nightly loads
    through ``spark-submit <wheel>/sluice/jobs/nightly_load.py``, all from installed code, into
    the Iceberg table ``sluice.page_views`` — which then holds every produced offset once (20,000
    v1 and 400 v2 page views, 750 more before the second load; the corrupt message in its error
    table), in two snapshots each carrying its offsets — and the demo's query of it."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    proc = subprocess.run(
        [sys.executable, "-m", "sluice.jobs.demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(installed / "sluice" / "jobs" / "nightly_load.py") in proc.stdout
    warehouse = tmp_path / "warehouse" / "demo"
    catalog = load_catalog("sluice", type="sql", uri=f"sqlite:///{warehouse}/_iceberg_catalog.db",
                           warehouse=str(warehouse))  # fmt: skip
    table = catalog.load_table("sluice.page_views")
    rows = table.scan(selected_fields=("partition", "offset")).to_arrow().to_pylist()
    offsets = {(r["partition"], r["offset"]) for r in rows}
    assert len(rows) == len(offsets) == 21_150
    snapshots = table.snapshots()
    assert [s.summary["added-records"] for s in snapshots if s.summary] == ["20400", "750"]
    summary = snapshots[-1].summary
    assert summary is not None
    newest = json.loads(summary["sluice.offsets"])
    ends = {int(p): o for p, o in newest["page_views"].items()}
    errors = catalog.load_table("sluice.page_views_errors").scan().to_arrow().to_pylist()
    undecodable = {(r["partition"], r["offset"]) for r in errors}
    assert len(errors) == len(undecodable) == 1 and not undecodable & offsets
    # every offset of the topic once, in the table or in its error table
    assert offsets | undecodable == {(p, o) for p, end in ends.items() for o in range(end)}
    # the demo's last query of the table: rows per day of event time, summing to its rows
    last = proc.stdout.rsplit("day (event time)", 1)[1]
    per_day = re.findall(r"^\d{4}-\d\d-\d\d +(\d+) ", last, re.M)
    assert len(per_day) >= 3 and sum(map(int, per_day)) == 21_150, proc.stdout[-3000:]
    assert "21150 rows, 21150 distinct (partition, offset)" in proc.stdout
    assert "error table sluice.page_views_errors: 1 undecodable record(s)" in proc.stdout
    assert "sluice table describe --warehouse warehouse/demo --table sluice.page_views" in (
        proc.stdout
    )
