"""The handlers depend on the broker's context interface, never on the broker module, nor on
each other; and they keep no state of their own between requests (every service they use is
on the context, built once by the broker)."""

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


HANDLER_MODULES = sorted(p for p in (SERVER / "handlers").glob("*.py") if p.name != "__init__.py")
# Module-level values a handler module may hold are immutable; these build mutable ones.
_MUTABLE_CALLS = {
    "dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "deque", "Counter",
    "WeakKeyDictionary", "WeakValueDictionary", "WeakSet",
}  # fmt: skip


def test_no_handler_imports_another_handler() -> None:
    # Shared helpers live outside the package (transaction_host, topic_config_check, ...);
    # only the registry (handlers/__init__.py) imports the handler modules.
    assert len(HANDLER_MODULES) > 10
    for path in HANDLER_MODULES:
        imported = _imports(path)
        assert not any(name.startswith("sluice.broker.server.handlers") for name in imported), (
            path,
            sorted(n for n in imported if n.startswith("sluice.broker.server.handlers")),
        )


def _mutable(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name in _MUTABLE_CALLS
    return False


def test_handler_modules_keep_no_mutable_state() -> None:
    for path in HANDLER_MODULES:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names == ["__all__"]:
                continue
            assert not _mutable(value), (path.name, names, ast.unparse(value)[:80])


def test_handlers_reach_the_broker_only_through_the_context() -> None:
    # No ``getattr(ctx, ...)`` fallbacks: what a handler needs is declared on BrokerContext.
    for path in [*HANDLER_MODULES, SERVER / "transaction_host.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
                first = node.args[0] if node.args else None
                text = ast.unparse(first) if first is not None else ""
                assert text not in ("ctx", "ctx.config", "self.ctx"), (path.name, text)


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
