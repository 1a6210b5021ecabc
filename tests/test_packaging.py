"""The wheel: built from the repository, it installs one top-level name, ``sluice``, and runs.

The repository keeps the design card's folders (``broker/``, ``pipeline/``, ...) at its top and
``setup.py`` maps them under ``sluice``; these tests build the wheel the way ``pip`` does and use
it from a separate directory, so nothing from the checkout or the editable install can stand in
for a file the wheel forgot.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
    through ``spark-submit <wheel>/sluice/jobs/nightly_load.py``, all from installed code."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    proc = subprocess.run(
        [sys.executable, "-m", "sluice.jobs.demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(installed / "sluice" / "jobs" / "nightly_load.py") in proc.stdout
    assert (tmp_path / "warehouse" / "events").is_dir()
