"""Given `osprey local` (the synthesized control plane on an embedded moto server), when a user runs a cycle and
`osprey explain`, then the guard's line is there, first: with the shipped policies it says the pool's GPUs are
unknown and which policy to give them to; with capacityGpus set (and the Batch jobs' GPUs known) the deployed
collect Lambda's guard gives its verdict, and the decision is derived under it.

The local fleet's Batch jobs all run and none was derived before: every order predicts the same, there is no
policy order in force to keep, so the guard stands down to the native order (every job at the same share
priority, as Batch had them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LocalState, bring_up
from osprey_control.registry import Backend, JobRegistry
from tests.conftest import REPO_ROOT

TRAINING = REPO_ROOT / "policies" / "training-policy.yaml"
BATCH_JOBS = ("resnet-batch", "llama-batch", "etl-batch", "sweep-spot-batch", "ckpt-spot-batch")


@pytest.fixture
def local(template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalState]:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    with LocalAws(free_port()) as aws:
        yield bring_up(aws, template, tmp_path / "local.json")


def _explain(name: str) -> list[str]:
    result = CliRunner().invoke(app, ["explain", name], terminal_width=400)
    assert result.exit_code == 0, result.output
    return [
        line for line in result.stdout.splitlines() if not line.startswith("{")
    ]  # the handlers' log lines


def test_explain_shows_what_the_guard_said_about_the_jobs_pool(local: LocalState, tmp_path: Path) -> None:
    runner = CliRunner()
    # When a cycle runs under the shipped policies (no capacityGpus)
    assert runner.invoke(app, ["local", "cycle", "--json"]).exit_code == 0
    # Then the guard's line tells the user what it needs
    [line] = [line for line in _explain("vit-eks") if line.startswith("guard: ")]
    assert line.startswith(
        "guard: not guarded: the pool's GPUs are unknown; set spec.reservation.capacityGpus"
    )


def test_with_capacity_the_deployed_guard_gives_its_verdict(local: LocalState, tmp_path: Path) -> None:
    runner = CliRunner()
    # Given the training policy with its pool's GPUs declared, applied as a user would
    document = yaml.safe_load(TRAINING.read_text())
    document["spec"]["reservation"] = {"capacityGpus": 64}
    edited = tmp_path / "training-policy.yaml"
    edited.write_text(yaml.safe_dump(document))
    applied = runner.invoke(app, ["policy", "apply", str(edited)])
    assert applied.exit_code == 0, applied.output
    # And the Batch jobs' GPUs known, as ingest records them from a job's resourceRequirements (the local fleet's
    # jobs declare none)
    registry = JobRegistry(local.table_name, local.client("dynamodb"), shards=local.shards)
    for record in registry.list_active(backend=Backend.BATCH):
        sized = record.model_copy(update={"requested_gpus": 8})
        registry.update(record.key, lambda _, sized=sized: sized)  # type: ignore[misc]

    # When a cycle runs
    cycle = runner.invoke(app, ["local", "cycle", "--json"])
    assert cycle.exit_code == 0, cycle.output

    # Then explain's first line after the job's own is the guard's verdict, and the decision is derived under it
    lines = _explain("resnet-batch")
    [verdict] = [index for index, line in enumerate(lines) if line.startswith("guard: ")]
    assert lines[verdict].startswith(
        "guard: stood down to the native order: no other order waits less [native: wait"
    )
    assert "policy: wait" in lines[verdict]
    assert verdict < next(index for index, line in enumerate(lines) if "RULE" in line)
    assert any("guarded: the pool keeps its backend's native order this cycle" in line for line in lines)
    # And every Batch job of the pool is at the same native priority
    priorities = {r.name: r.derived_priority for r in registry.list_active(backend=Backend.BATCH)}
    assert set(priorities) == set(BATCH_JOBS)
    assert set(priorities.values()) == {50}
