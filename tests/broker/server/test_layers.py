"""The handlers depend on the broker's context interface, never on the broker module."""

from __future__ import annotations

import ast
from pathlib import Path

import sluice.broker.server as server
from sluice.broker.protocol.errors import Errors

SERVER = Path(server.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-local and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_handler_imports_the_broker_module() -> None:
    modules = [*sorted((SERVER / "handlers").glob("*.py")), SERVER / "context.py"]
    assert len(modules) > 5
    for path in modules:
        assert "sluice.broker.server.broker" not in _imports(path), path


def test_error_codes_are_not_integer_constants() -> None:
    # Every code is a member of protocol.errors.Errors: no module keeps its own numbers.
    # (A heuristic over Kafka's names; ``NONE`` is left out: records.NONE is a codec.)
    kafka_names = {member.name for member in Errors} - {"NONE"}
    broker_root = SERVER.parent
    checked = 0
    for path in broker_root.rglob("*.py"):
        if path.name == "errors.py" and path.parent.name == "protocol":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, int):
                checked += 1
                for target in targets:
                    if isinstance(target, ast.Name):
                        assert target.id not in kafka_names, (path, target.id)
    assert checked > 10  # the walk saw the broker's integer constants
