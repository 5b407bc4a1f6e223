"""Given the CDK app's package (``infra/osprey_infra``), when its modules' imports are read with ``ast`` (every
import statement: those under ``TYPE_CHECKING`` and inside functions count too), then no module reaches itself
through the others (no import cycle), every import points to the importer's layer or a lower one (the layers of
the package docstring), and no construct imports the composer: only the stack imports ``control_plane``. And the
check itself finds a cycle that only a type-only import closes."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = "osprey_infra"
COMPOSER = f"{PACKAGE}.control_plane"
# osprey_infra's docstring, as data: a new module gets a layer here, and may import only its layer or lower.
LAYERS: dict[str, int] = {
    **dict.fromkeys(["", "config", "slurm_config"], 1),
    **dict.fromkeys(
        ["nag", "function", "state_machines", "registry_table", "table_access", "permissions"], 2
    ),
    **dict.fromkeys(
        [
            "gangs",
            "gang_watch",
            "cycle_state_machine",
            "planning",
            "policy_store",
            "event_ingestion",
            "cycle_schedule",
            "observability",
            "alarms",
        ],
        3,
    ),
    **dict.fromkeys(
        [
            "backends",
            "backends.grantees",
            "backends.sagemaker",
            "backends.sagemaker_queue",
            "backends.batch",
            "backends.eks",
            "backends.slurm",
        ],
        4,
    ),
    "control_plane": 5,
    "stack": 6,
}


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Each module of ``package`` (whose directory is ``root``) by dotted name; a package by its own name."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((package, *parts))] = path
    return modules


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: Mapping[str, Path]) -> Iterator[str]:
    """The dotted names ``node`` imports; ``from a import b`` names ``a.b`` when that is a module."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the importing module's package, one level up per extra dot
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. Importing ``a.b.c`` runs ``a`` and ``a.b`` first, so those
    count as imported too."""
    modules = _modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, own_package, modules):
                parts = target.split(".")
                imported.update(
                    prefix
                    for prefix in (".".join(parts[:end]) for end in range(1, len(parts) + 1))
                    if prefix in modules and prefix != name
                )
        graph[name] = imported
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: every import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_cdk_app_has_no_import_cycle() -> None:
    graph = import_graph(REPO_ROOT / "infra" / PACKAGE, PACKAGE)
    assert f"{PACKAGE}.backends.slurm" in graph  # the walk did see the sub-packages
    assert cycles(graph) == []


def _layer(module: str) -> int:
    return LAYERS[module.removeprefix(PACKAGE).removeprefix(".")]


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower() -> None:
    graph = import_graph(REPO_ROOT / "infra" / PACKAGE, PACKAGE)
    assert sorted(m for m in graph if m.removeprefix(PACKAGE).removeprefix(".") not in LAYERS) == []
    upward = sorted(
        f"{module} (layer {_layer(module)}) imports {imported} (layer {_layer(imported)})"
        for module, imports in graph.items()
        for imported in imports
        if _layer(imported) > _layer(module)
    )
    assert upward == []


def test_only_the_stack_imports_the_composer() -> None:
    graph = import_graph(REPO_ROOT / "infra" / PACKAGE, PACKAGE)
    importers = sorted(module for module, imported in graph.items() if COMPOSER in imported)
    assert importers == [f"{PACKAGE}.stack"]


def test_a_cycle_closed_only_by_a_type_checking_import_is_found(tmp_path: Path) -> None:
    # Given a package whose lower module imports the upper one for a type hint only
    root = tmp_path / "demo"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "upper.py").write_text("from demo.sub import lower\n")
    (root / "sub" / "lower.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..upper import Upper\n"
    )
    (root / "alone.py").write_text("import demo.sub.lower\n")
    # When its import graph is read, then the two modules form a cycle and nothing else does
    graph = import_graph(root, "demo")
    assert graph["demo.sub.lower"] == {"demo", "demo.upper"}
    assert cycles(graph) == [["demo.sub.lower", "demo.upper"]]
