"""kafka-python's integration suite, from its PyPI sdist, ready to run against an external broker.

The suite is the sdist of the kafka-python the venv has installed (so the client under test and
the suite agree), fetched the way pip fetches any source package::

    pip download --no-deps --no-binary :all: kafka-python==<installed> -d build/compat/

then unpacked to ``build/compat/kafka_python-<version>/``. The sdist leaves out two files its
``test/integration`` needs, which are added — and only these; no test body is touched:

* ``test/__init__.py``, empty: the suite imports ``test.testutil`` and ``test.service``.
* ``test/service.py``: a copy of ``tests/compat/service.py`` (the external-broker stand-in).

Idempotent: an unpacked tree that has ``test/integration`` is reused (no download); the two
added files are written again on every call, so an edited ``service.py`` is picked up. A fresh
unpack goes to a temporary directory first and is renamed into place, so a crash never leaves
a half-unpacked tree that a later run would take for whole.

Not thread-safe: one run prepares the tree at a time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

__all__ = ["DISTRIBUTION", "SuiteFetchError", "installed_version", "suite_tree"]

DISTRIBUTION = "kafka-python"
# The stand-in copied to ``test/service.py``; it sits beside this module.
SERVICE = Path(__file__).with_name("service.py")


class SuiteFetchError(RuntimeError):
    """The sdist could not be downloaded, or it does not hold the suite where expected."""


def installed_version() -> str:
    """The version of kafka-python installed beside this interpreter (``pip show``)."""
    return metadata.version(DISTRIBUTION)


def suite_tree(build_dir: Path, version: str | None = None) -> Path:
    """The unpacked sdist of kafka-python ``version`` (default: the installed one) under
    ``build_dir``, with ``test/__init__.py`` and ``test/service.py`` added; downloaded and
    unpacked only if not there yet. Raises :class:`SuiteFetchError`."""
    version = version or installed_version()
    build_dir.mkdir(parents=True, exist_ok=True)
    tree = build_dir / f"{DISTRIBUTION.replace('-', '_')}-{version}"
    if not (tree / "test" / "integration").is_dir():
        _unpack(_download(build_dir, version), tree)
    (tree / "test" / "__init__.py").write_text("", encoding="utf-8")
    shutil.copyfile(SERVICE, tree / "test" / "service.py")
    return tree


def _download(build_dir: Path, version: str) -> Path:
    """``pip download`` the sdist into ``build_dir`` (pip reuses a file already there)."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "--dest", str(build_dir), f"{DISTRIBUTION}=={version}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SuiteFetchError(
            f"expected `pip download` of {DISTRIBUTION}=={version} to succeed, found exit code "
            f"{done.returncode}: {done.stderr.strip()[-2000:]}"
        )
    archive = build_dir / f"{DISTRIBUTION.replace('-', '_')}-{version}.tar.gz"
    if not archive.is_file():
        found = sorted(p.name for p in build_dir.glob("*.tar.gz"))
        raise SuiteFetchError(f"expected the sdist {archive}, found {found or 'no .tar.gz'}")
    return archive


def _unpack(archive: Path, tree: Path) -> None:
    """Unpack ``archive`` (one top-level directory, ``tree.name``) to ``tree``."""
    with tempfile.TemporaryDirectory(dir=tree.parent, prefix=".unpack-") as scratch:
        with tarfile.open(archive) as tar:
            # The "data" filter refuses absolute paths, links out of the tree and devices.
            tar.extractall(scratch, filter="data")
        unpacked = Path(scratch) / tree.name
        if not (unpacked / "test" / "integration").is_dir():
            raise SuiteFetchError(
                f"expected {archive.name} to hold {tree.name}/test/integration/, found "
                f"{sorted(p.name for p in Path(scratch).iterdir())}"
            )
        if tree.exists():
            shutil.rmtree(tree)  # a tree without test/integration: not ours to keep
        unpacked.rename(tree)
