"""Given the backend table and ingest's detail-type table, then every backend whose jobs come from events has a
driver with ``events`` and a detail-type routed to it, the discovered ones have neither, and no backend module
imports ingest (ingest sits above the backends and reaches them through the table)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from osprey_control.backends import driver_for
from osprey_control.backends.driver import EventDriver
from osprey_control.ingest.events import JOB_EVENTS, SOURCES, job_events
from osprey_control.registry import Backend

BACKENDS = Path(__file__).resolve().parents[3] / "lambdas" / "osprey_control" / "backends"


@pytest.mark.parametrize("backend", list(Backend), ids=lambda backend: backend.value)
def test_a_backend_has_events_exactly_when_ingest_routes_events_to_it(backend: Backend) -> None:
    driver = driver_for(backend)
    routed = backend in JOB_EVENTS.values()
    assert (driver.recognition == "events") is routed
    assert isinstance(driver, EventDriver) is routed
    if not routed:
        with pytest.raises(RuntimeError, match="not by events"):
            job_events.__wrapped__(backend)


def test_every_routed_detail_type_has_its_source() -> None:
    assert set(JOB_EVENTS) <= set(SOURCES)


def _imported(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


@pytest.mark.parametrize(
    "path", sorted(BACKENDS.rglob("*.py")), ids=lambda path: str(path.relative_to(BACKENDS))
)
def test_no_backend_module_imports_ingest(path: Path) -> None:
    # Lazy imports inside functions count too: ast.walk visits every statement.
    upward = {module for module in _imported(path) if module.split(".")[:2] == ["osprey_control", "ingest"]}
    assert not upward, f"{path.name} imports {sorted(upward)}"
