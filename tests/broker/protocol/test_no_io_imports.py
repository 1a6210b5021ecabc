"""broker/protocol is sans-IO: no module of it imports socket or asyncio."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "broker" / "protocol"
FORBIDDEN = {"socket", "asyncio", "selectors", "ssl"}
MODULES = sorted(PACKAGE.glob("*.py"))


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            names.add("__import__")  # dynamic imports would dodge this check
    return names


def test_package_has_modules() -> None:
    assert {p.name for p in MODULES} >= {"framing.py", "codec.py", "fetch_response.py"}


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_module_imports_no_io(path: Path) -> None:
    assert not imported_modules(path) & (FORBIDDEN | {"__import__"})


def test_importing_the_package_loads_no_io_module_of_its_own() -> None:
    # kio itself imports asyncio (and so socket) for a type alias in kio.serial.writers
    # (``Writable = asyncio.StreamWriter | IO[bytes]``); that is kio's, not ours. Load kio first,
    # then check that importing sluice.broker.protocol brings in no I/O module on top.
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(PACKAGE.parents[1])!r})
        import kio.index, kio.serial, kio.schema.errors
        before = set(sys.modules)
        import sluice.broker.protocol
        added = set(sys.modules) - before
        print(sorted(m for m in added if not m.startswith(("broker", "kio."))))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    added = set(ast.literal_eval(out.stdout.strip()))
    assert not {name.split(".")[0] for name in added} & FORBIDDEN, added
