"""broker/security is sans-IO: no sockets or event loops; only tls.py touches ssl."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.protocol.test_no_io_imports import imported_modules

PACKAGE = Path(__file__).resolve().parents[3] / "broker" / "security"
MODULES = sorted(PACKAGE.glob("*.py"))
FORBIDDEN = {"socket", "asyncio", "selectors", "threading", "ssl", "logging", "__import__"}
ALLOWED = {"tls.py": {"ssl"}, "authorizer.py": {"threading"}}  # contexts; the cache's lock


def test_package_has_modules() -> None:
    assert {p.name for p in MODULES} >= {"jaas.py", "plain.py", "scram.py", "acl.py", "tls.py"}


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_module_imports_no_io(path: Path) -> None:
    assert imported_modules(path) & FORBIDDEN <= ALLOWED.get(path.name, set())
