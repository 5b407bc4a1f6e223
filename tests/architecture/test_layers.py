"""The control plane's layers (docs/architecture.md), checked on the source: which package may import which,
no import circle between packages, and a pure core.

Every import counts for the layers and circles, including those under ``TYPE_CHECKING`` and inside functions: a
type hint or a lazy import that runs back up is still an arrow up. Purity counts what a module runs when it is
imported (module-level imports, transitively), since that is what a pure caller pays for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTROL = ROOT / "lambdas" / "osprey_control"

# Lowest first. A package may import its own layer and the layers below, never one above.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"policy", "derivation", "contract", "errors", "wiring", "telemetry", "catalog"}),
    frozenset({"aws", "registry"}),
    frozenset({"planner", "gang", "guard"}),
    frozenset({"backends"}),
    frozenset({"ingest", "metrics", "custom_rules", "policy_store"}),
    frozenset({"steps"}),
)
# What a pure module may not load at import time, directly or through another module.
AWS_MODULES = ("boto3", "botocore", "aws_lambda_powertools", "osprey_control.aws")
PURE = ("policy", "derivation", "contract", "errors", "wiring", "telemetry", "catalog", "planner", "guard")
PURE_MODULES = ("osprey_control.gang.decision", "osprey_control.gang.settings", "osprey_control.gang.backend")
# The backend packages import only what every backend shares, never one another; the training queue reuses
# SageMaker's readiness (its jobs are SageMaker training jobs once started).
BACKEND_PACKAGES = frozenset({"sagemaker", "sagemaker_queue", "batch", "eks", "slurm"})
BACKEND_ALLOWED = {("sagemaker_queue", "sagemaker")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(CONTROL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(path): ast.parse(path.read_text()) for path in CONTROL.rglob("*.py")}


MODULES = _modules()


def _imports(tree: ast.Module, *, module_level_only: bool) -> Iterator[str]:
    nodes: list[ast.stmt] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If):
            is_type_checking = "TYPE_CHECKING" in ast.unparse(node.test)
            if not (module_level_only and is_type_checking):
                nodes.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            nodes.extend(node.body + node.orelse + node.finalbody)
            nodes.extend(stmt for handler in node.handlers for stmt in handler.body)
        elif not module_level_only:
            nodes.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def _package(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def _layer(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(
        f"package osprey_control.{package} is in no layer: add it to LAYERS and docs/architecture.md"
    )


def _package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, tree in MODULES.items():
        source = _package(module)
        for imported in _imports(tree, module_level_only=False):
            if imported.startswith("osprey_control.") and _package(imported) not in ("", source):
                edges.setdefault(source, set()).add(_package(imported))
    return edges


def test_every_package_has_a_layer() -> None:
    for module in MODULES:
        if module != "osprey_control":
            _layer(_package(module))


def test_no_package_imports_a_layer_above_it() -> None:
    upward = [
        f"osprey_control.{source} -> osprey_control.{target}"
        for source, targets in _package_edges().items()
        for target in targets
        if _layer(target) > _layer(source)
    ]
    assert upward == [], "imports that run up the layers (docs/architecture.md)"


def test_no_import_circle_between_packages() -> None:
    edges = _package_edges()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, goal, seen):
                    return True
        return False

    circles = sorted(
        f"{source} <-> {target}"
        for source in edges
        for target in edges[source]
        if reaches(target, source, set())
    )
    assert circles == []


def test_the_control_plane_never_imports_the_handlers_or_the_sdk() -> None:
    offending = [
        f"{module} imports {imported}"
        for module, tree in MODULES.items()
        for imported in _imports(tree, module_level_only=False)
        if imported.split(".")[0] in ("osprey_handlers", "osprey")
    ]
    assert offending == []


def test_backend_packages_do_not_import_one_another() -> None:
    offending = []
    for module, tree in MODULES.items():
        parts = module.split(".")
        if len(parts) < 3 or parts[1] != "backends" or parts[2] not in BACKEND_PACKAGES:
            continue
        for imported in _imports(tree, module_level_only=False):
            other = imported.split(".")
            crosses = len(other) > 2 and other[1] == "backends" and other[2] in BACKEND_PACKAGES
            if crosses and other[2] != parts[2] and (parts[2], other[2]) not in BACKEND_ALLOWED:
                offending.append(f"{module} imports {imported}")
    assert offending == []


def _loads_at_import(module: str, seen: set[str]) -> Iterator[str]:
    """Every module ``module`` loads when imported (its packages' fronts included), transitively."""
    for name in _with_parents(module):
        tree = MODULES.get(name)
        if tree is None or name in seen:
            continue
        seen.add(name)
        for imported in _imports(tree, module_level_only=True):
            yield imported
            if imported.startswith("osprey_control"):
                yield from _loads_at_import(imported, seen)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: index + 1]) for index in range(len(parts))]


@pytest.mark.parametrize(
    "module",
    sorted(name for name in MODULES if _package(name) in PURE or name in PURE_MODULES),
)
def test_the_core_is_pure_python(module: str) -> None:
    loaded = {name for name in _loads_at_import(module, set()) if name.startswith(AWS_MODULES)}
    assert loaded == set(), f"{module} loads AWS code at import time"
