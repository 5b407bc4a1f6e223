"""Given `osprey local` (the synthesized control plane on an embedded moto server) after two real cycles, when a
user runs `osprey report` with no flags, then it reads the running local's registry and reports what the cycles
recorded: every backend of the seeded fleet, enforced from the first applied outcome with the jobs registered at
`up` as the period before it, and exactly the priority changes the decision history holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LocalState, bring_up
from osprey_control.registry import JobKey
from osprey_control.registry.dynamodb import JobRegistry


def _document(output: str) -> Any:
    # The handlers run in this process and log single lines around the CLI's indented JSON document.
    parsed, _ = json.JSONDecoder().raw_decode(output[output.index('{\n  "') :])
    return parsed


@pytest.fixture
def local(template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalState]:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    with LocalAws(free_port()) as aws:
        yield bring_up(aws, template, tmp_path / "local.json")


def _changes(registry: JobRegistry, keys: list[JobKey]) -> int:
    """Decisions whose derived priority differs from the one before: what `osprey history` shows as moves."""
    count = 0
    for key in keys:
        for item in registry.events.decisions(key):
            previous = item.get("previous_priority", item["decision"].get("previous"))
            count += int(previous is not None and int(previous) != int(item["derived_priority"]))
    return count


def test_report_over_two_real_cycles(local: LocalState) -> None:
    runner = CliRunner()
    for _ in range(2):
        cycle = runner.invoke(app, ["local", "cycle", "--json"])
        assert cycle.exit_code == 0, cycle.output

    result = runner.invoke(app, ["report", "--since", "1d", "--json"])

    assert result.exit_code == 0, result.output
    found = _document(result.output)
    registry = JobRegistry(local.table_name, local.client("dynamodb"), shards=local.shards)
    records = registry.list_active()
    backends = {backend["backend"]: backend for backend in found["backends"]}
    assert set(backends) == {record.backend.value for record in records}
    for backend in backends.values():
        # Every seeded job had its first decision applied by the first cycle: that is where enforcement starts,
        # and the jobs registered at `up` before it make a (short) period before.
        assert backend["enforcement_start"] is not None
        assert backend["weeks"][-1]["period"] == "enforced"
    changes = sum(row["priority_changes"] for backend in backends.values() for row in backend["weeks"])
    assert changes == _changes(registry, [record.key for record in records]) > 0
    assert sum(row["job_hours"] for backend in backends.values() for row in backend["weeks"]) > 0
    # The seeded Batch jobs were submitted 5 minutes before they ran (osprey.local.fleet), all before the first
    # cycle, and hold their nodes' GPUs from then on.
    before = backends["batch"]["comparison"]["before"]
    assert (before["mean_wait_s"], before["p95_wait_s"]) == (300.0, 300.0)
    assert backends["batch"]["comparison"]["after"]["gpu_hours"] > 0
