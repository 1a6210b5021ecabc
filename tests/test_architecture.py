"""The shape of the house, checked from the source: layers point down, no circles, small modules
and small functions.

Every import is counted — module level, function-local and ``if TYPE_CHECKING:`` alike — since
a lazy import that goes up or closes a circle is the same dependency, only hidden. The graph is
read with :mod:`ast` from the files as they sit in the repository, each folder under the name
it is installed as (``broker/log/log.py`` is ``sluice.broker.log.log``, see ``setup.py``).
``from package import module`` counts as importing both: the statement runs the package's
``__init__`` and looks the name up there first, so a submodule that imports a sibling that way
while the ``__init__`` imports the submodule is a circle.

No circle anywhere: not in the whole graph, and, checked package by package so a failure names
the package, not between the files of one folder. No module over ``MAX_LINES`` lines and no
function over ``MAX_FUNCTION_LINES`` lines (a nested function counts in its enclosing one too)
outside ``tests/``.

The layers, bottom to top; a module may import its own package and the layers below::

    sluice.common                      what every layer shares
    sluice.broker    sluice.schemas    the server and the registry (independent of each other)
    sluice.pipeline                    the client side
    sluice.testing   sluice.cli        real processes for tests; the command line
    sluice.jobs                        Spark applications and demos

Inside ``sluice.pipeline`` each sub-package (and each module directly in it) may import only
what the "May import" sentence of its docstring names: ``PIPELINE_IMPORTS`` is those sentences
as a table, checked against the graph and against the docstrings. Kafka's error codes are
spelt only in the registry (``sluice.broker.protocol.errors``), and kio's ``ErrorCode`` is
imported only inside ``sluice.broker.protocol``: everything else names a code through the
registry's ``Errors``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "sluice.broker": "broker",
    "sluice.schemas": "schemas",
    "sluice.pipeline": "pipeline",
    "sluice.jobs": "jobs",
    "sluice": "sluice",
}
LAYERS = {
    "sluice.common": 0,
    "sluice.broker": 1,
    "sluice.schemas": 1,
    "sluice.pipeline": 2,
    "sluice.testing": 3,
    "sluice.cli": 3,
    "sluice.jobs": 4,
    "sluice.__main__": 5,
}
MAX_LINES = 800
MAX_FUNCTION_LINES = 120
# Checked for long functions besides the installed packages (not installed, not tests).
OTHER_SOURCES = ("bench",)
MAX_PIPELINE_MODULES = 8
# The Kafka error-code registry: the only module that may spell a code's number.
REGISTRY = "sluice.broker.protocol.errors"
# The only package that may import kio's ``ErrorCode`` (the registry wraps it).
PROTOCOL = "sluice.broker.protocol"
KIO_ERRORS = "kio.schema.errors"

# What each part of sluice.pipeline may import besides itself (a module or a package and
# everything under it): the "May import" sentence of the part's ``__init__`` docstring, or of
# its own docstring for a module directly in pipeline/. Third-party imports are not listed.
PIPELINE_IMPORTS: dict[str, tuple[str, ...]] = {
    "sluice.pipeline": (),
    "sluice.pipeline.kafka_settings": ("sluice.common",),
    "sluice.pipeline.lineage": (),
    "sluice.pipeline.sink": ("sluice.common", "sluice.schemas", "sluice.pipeline.kafka_settings"),
    "sluice.pipeline.source": (
        "sluice.common",
        "sluice.schemas",
        "sluice.pipeline.kafka_settings",
        "sluice.pipeline.sink",
    ),
    "sluice.pipeline.table": ("sluice.common", "sluice.pipeline.source.ranges"),
    "sluice.pipeline.load": (
        "sluice.common",
        "sluice.pipeline.kafka_settings",
        "sluice.pipeline.source",
        "sluice.pipeline.table",
    ),
    "sluice.pipeline.mirror": ("sluice.common", "sluice.pipeline.lineage"),
    "sluice.pipeline.audit": (
        "sluice.common",
        "sluice.schemas",
        "sluice.pipeline.lineage",
        "sluice.pipeline.source",
        "sluice.pipeline.table",
    ),
    "sluice.pipeline.consumer": ("sluice.common", "sluice.broker.cluster.zk_data"),
}


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "sluice" and parts and f"sluice.{parts[0]}" in FOLDERS:
                continue
            modules[name] = path
    return modules


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """The Sluice modules ``name`` imports (resolved to files), with line numbers."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from mod import name`` imports the module; ``from pkg import mod`` the package
            # (its ``__init__`` runs and is searched first) and the module
            targets = [_resolve(base)] + [
                f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES
            ]
        else:
            continue
        for target in targets:
            if target and target != name:
                yield target, node.lineno


def _resolve(dotted: str) -> str | None:
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


GRAPH = {name: sorted(set(_imports(name, path))) for name, path in MODULES.items()}


def _layer(name: str) -> tuple[str, int] | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return prefix, LAYERS[prefix]
    return None


def test_every_module_has_a_layer() -> None:
    assert [n for n in MODULES if n != "sluice" and _layer(n) is None] == []


def test_imports_point_down() -> None:
    upward = []
    for name, imports in GRAPH.items():
        mine = _layer(name)
        for target, line in imports:
            theirs = _layer(target)
            if mine is None or theirs is None or mine[0] == theirs[0]:
                continue
            if theirs[1] >= mine[1]:
                upward.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert upward == []


def _circles(nodes: set[str]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, over the graph's edges
    between ``nodes``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _ in GRAPH[node]:
            if target not in nodes:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(nodes):
        if name not in index:
            visit(name)
    return circles


def _edges_within(circle: list[str]) -> list[str]:
    """The imports that close ``circle``, as ``path:line imports module``."""
    return [
        f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}"
        for name in circle
        for target, line in GRAPH[name]
        if target in circle
    ]


def test_no_import_circles() -> None:
    """No circle in the whole module graph, within a package or across packages."""
    assert [_edges_within(c) for c in _circles(set(GRAPH))] == []


PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles_inside_a_package(package: str) -> None:
    """No circle between the files of one folder: the package's ``__init__`` and the modules
    and sub-packages directly in it."""
    files = {package} | {n for n in MODULES if n.rpartition(".")[0] == package}
    assert [_edges_within(c) for c in _circles(files)] == []


def test_pipeline_is_packages_not_a_flat_bag() -> None:
    flat = sorted(p.name for p in (ROOT / "pipeline").glob("*.py"))
    assert len(flat) <= MAX_PIPELINE_MODULES, flat


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_limit(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines"


def _long_functions(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name} has {lines} lines"


def test_no_function_over_the_limit() -> None:
    """Every function of the packages and of ``bench/`` fits in ``MAX_FUNCTION_LINES`` lines,
    from ``def`` to its last line; a long one is split where its steps are."""
    paths = [*MODULES.values()]
    paths += [p for folder in OTHER_SOURCES for p in sorted((ROOT / folder).rglob("*.py"))]
    assert [long for path in paths for long in _long_functions(path)] == []


def _exception_classes() -> Iterator[tuple[str, str]]:
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if re.search(r"(Error|Exception|Warning)$", node.name) or any(
                re.search(r"(Error|Exception)\b", b) for b in bases
            ):
                yield node.name, name


def test_no_exception_name_is_defined_twice() -> None:
    seen: dict[str, list[str]] = {}
    for cls, module in _exception_classes():
        seen.setdefault(cls, []).append(module)
    assert {cls: where for cls, where in seen.items() if len(where) > 1} == {}


CODE_NAMES = {code.name.upper() for code in ErrorCode}


def test_kafka_error_codes_come_only_from_the_registry() -> None:
    """No ``NOT_LEADER_OR_FOLLOWER = 6`` outside the registry: every number comes from it."""
    constants = []
    for name, path in MODULES.items():
        if name == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
                value = value.operand
            if not (isinstance(value, ast.Constant) and type(value.value) is int):
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id in CODE_NAMES:
                    constants.append(f"{path.relative_to(ROOT)}:{node.lineno} {target.id}")
    assert constants == []


def _pipeline_part(name: str) -> str | None:
    """``sluice.pipeline.source.ranges`` -> ``sluice.pipeline.source``; ``None`` outside."""
    parts = name.split(".")
    if parts[:2] != ["sluice", "pipeline"]:
        return None
    return ".".join(parts[:3])


def _within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def test_every_pipeline_part_has_an_import_rule() -> None:
    parts = {_pipeline_part(name) for name in MODULES} - {None}
    assert parts == set(PIPELINE_IMPORTS)


def test_pipeline_parts_import_only_what_their_docstrings_allow() -> None:
    """Every import of a pipeline module, lazy and ``TYPE_CHECKING`` ones included, stays in
    its own part or in one its rule names; so there is no circle between the parts either."""
    breaches = []
    for name, imports in GRAPH.items():
        part = _pipeline_part(name)
        if part is None:
            continue
        allowed = PIPELINE_IMPORTS[part]
        for target, line in imports:
            if _within(target, part) or any(_within(target, a) for a in allowed):
                continue
            breaches.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert breaches == []


@pytest.mark.parametrize("part", sorted(PIPELINE_IMPORTS))
def test_pipeline_import_rules_are_what_the_docstrings_say(part: str) -> None:
    """The table above and the docstrings cannot drift apart: each name a rule allows is named
    in full, in double back-quotes, in the part's docstring."""
    docstring = ast.get_docstring(ast.parse(MODULES[part].read_text())) or ""
    assert [a for a in PIPELINE_IMPORTS[part] if f"``{a}``" not in docstring] == []


def test_kio_error_codes_are_used_only_by_the_protocol() -> None:
    """kio's ``ErrorCode`` stays behind the registry: outside ``sluice.broker.protocol`` a code
    is an ``Errors`` member (with ``errno``, ``retriable``), never kio's enum."""
    uses = []
    for name, path in MODULES.items():
        if _within(name, PROTOCOL):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            if any(_within(m, KIO_ERRORS) for m in modules):
                uses.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert uses == []
