"""Given the Lambda bundle (the AWS-managed Powertools layer and boto3, no PyYAML), when each handler module
is imported in a fresh interpreter with ``yaml`` unavailable, then it imports: a handler that reached PyYAML
would fail every invocation at cold start in a real deployment."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import osprey_handlers

HANDLERS = sorted(
    f"osprey_handlers.{module.name}"
    for module in pkgutil.iter_modules(osprey_handlers.__path__)
    if not module.name.startswith("_")
)

_IMPORT_WITHOUT_YAML = """
import importlib, sys
sys.modules["yaml"] = None  # any `import yaml` now raises ImportError
importlib.import_module(sys.argv[1])
leaked = sorted(name for name, mod in sys.modules.items() if name.startswith("yaml") and mod is not None)
assert not leaked, leaked
"""


def test_every_handler_module_is_found() -> None:
    assert {"osprey_handlers.apply", "osprey_handlers.derive", "osprey_handlers.ingest"} <= set(HANDLERS)


@pytest.mark.parametrize("module", HANDLERS)
def test_handler_imports_without_pyyaml(module: str) -> None:
    # Given a fresh interpreter where PyYAML cannot be imported
    # When the handler module is imported
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORT_WITHOUT_YAML, module],
        capture_output=True,
        text=True,
        check=False,
        env={"AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_METRICS_NAMESPACE": "Osprey", "PATH": ""},
    )
    # Then it succeeds
    assert completed.returncode == 0, completed.stderr[-2000:]


def test_osprey_local_does_not_import_the_cli() -> None:
    # The embedded control plane is a library the CLI drives, not the other way round (issue 15).
    import ast  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    local = Path(__file__).resolve().parents[2] / "sdk" / "osprey" / "local"
    for module in local.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("osprey.cli"), f"{module.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("osprey.cli") for alias in node.names), module.name
