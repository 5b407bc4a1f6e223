"""The public surface stays small and unambiguous (docs/architecture.md): other packages import a package of
the control plane through its front, and no two public classes share a name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("lambdas/osprey_control", "lambdas/osprey_handlers", "sdk/osprey", "infra/osprey_infra", "bench")


def _modules() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text())
        for source in SOURCES
        for path in sorted((ROOT / source).rglob("*.py"))
    }


MODULES = _modules()


def _declared(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "__all__":
            return list(ast.literal_eval(value))
    return []


def _front(module: str) -> str:
    """The front ``module`` is reached through: a package of ``osprey_control``, or a backend's package."""
    parts = module.split(".")
    if (
        parts[1] == "backends"
        and len(parts) > 2
        and (ROOT / "lambdas" / Path(*parts[:3]) / "__init__.py").exists()
    ):
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _is_entry(module: str) -> bool:
    # Each step is a front of its own (a handler loads only its step); the gang's registry state is imported by
    # name so that the gang front stays free of AWS code.
    return module.startswith("osprey_control.steps.") or module == "osprey_control.gang.store"


def _owner(path: Path) -> str | None:
    relative = path.relative_to(ROOT)
    if relative.parts[:2] != ("lambdas", "osprey_control") or len(relative.parts) < 4:
        return None
    return _front(".".join(relative.with_suffix("").parts[1:]))


def test_other_packages_import_the_control_plane_through_its_fronts() -> None:
    bypassing = []
    for path, tree in MODULES.items():
        owner = _owner(path)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("osprey_control.")
            ):
                continue
            module = node.module
            if module.count(".") < 2 or _is_entry(module) or _front(module) == module:
                continue
            inside = owner is not None and (owner == _front(module) or owner.startswith(_front(module) + "."))
            shared_backend = (
                owner is not None
                and owner.startswith("osprey_control.backends")
                and module.startswith("osprey_control.backends.")
            )
            if not (inside or shared_backend):
                bypassing.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert bypassing == [], "import these through the package's front (add the name to its __all__)"


def test_no_two_public_classes_share_a_name() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path, tree in MODULES.items():
        public = set(_declared(tree))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name in public:
                places[node.name].append(str(path.relative_to(ROOT)))
    clashes = {name: where for name, where in places.items() if len(where) > 1}
    assert clashes == {}


def test_every_name_a_front_exports_resolves() -> None:
    # Fronts that load part of their names on first use (registry, policy) must still give every name they list.
    import importlib  # noqa: PLC0415

    missing = []
    for path, tree in MODULES.items():
        if path.name != "__init__.py" or "lambdas" not in path.parts:
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT / "lambdas").parent.parts))
        missing += [f"{module.__name__}.{name}" for name in _declared(tree) if not hasattr(module, name)]
    assert missing == []
