"""Given a registry after a cycle, when a user runs `osprey jobs` and `osprey explain`, then they see each
job's derived and applied priority (and why an apply failed) and the per-rule reasons of its last decision;
unknown jobs and tables exit 1."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.apply import BatchShareApplier
from osprey_control.apply_step import apply_cycle
from osprey_control.cycle import run_shard
from osprey_control.derive import PolicySource
from osprey_control.registry import Backend, JobKey
from tests.control.cycle.conftest import NOW, gpu_metrics, register

runner = CliRunner()


@pytest.fixture
def after_a_cycle(aws: dict[str, Any]) -> dict[str, Any]:
    register(aws["registry"], "busy-job", "i-0busy")
    register(aws["registry"], "idle-job", "i-0idle")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    gpu_metrics(aws["cloudwatch"], "i-0idle", gpu=8.0, memory_bw=3.0)
    run_shard(aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW)
    # The CLI builds its own boto3 client inside the same moto context; its default 16 shards cover the
    # one-shard layout written here (every item sits in shard 0).
    return aws


def test_jobs_lists_active_jobs_highest_priority_first(
    after_a_cycle: dict[str, Any],
) -> None:
    result = runner.invoke(app, ["jobs", "--table", "osprey-jobs", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(row["name"], row["priority"], row["reason"]) for row in rows] == [
        ("busy-job", 60, "damped"),
        ("idle-job", 40, "damped"),
    ]
    table = runner.invoke(app, ["jobs", "--table", "osprey-jobs"])
    assert table.exit_code == 0
    assert "busy-job" in table.stdout
    assert "training-policy" in table.stdout


def test_explain_shows_the_rules_of_the_last_decision(
    after_a_cycle: dict[str, Any],
) -> None:
    result = runner.invoke(app, ["explain", "busy-job", "--table", "osprey-jobs"])
    assert result.exit_code == 0, result.output
    assert "gpu_utilization" in result.stdout
    assert "97.00" in result.stdout
    assert "previous 50 → priority 60" in result.stdout
    as_json = runner.invoke(app, ["explain", "batch#busy-job", "--table", "osprey-jobs", "--json"])
    assert json.loads(as_json.stdout)["decision"]["rules"][0]["metric"] == "gpu_utilization"


def test_unknown_job_exits_one(after_a_cycle: dict[str, Any]) -> None:
    result = runner.invoke(app, ["explain", "nope", "--table", "osprey-jobs"])
    assert result.exit_code == 1
    assert "no job 'nope'" in result.stderr


def test_missing_table_configuration_exits_one(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OSPREY_TABLE_NAME", raising=False)
    result = runner.invoke(app, ["jobs"])
    assert result.exit_code == 1
    assert "cannot find the registry table" in result.stderr


def test_jobs_and_explain_show_derived_applied_and_the_apply_error(after_a_cycle: dict[str, Any]) -> None:
    import boto3  # noqa: PLC0415 - inside the fixture's moto context

    # Given an apply pass where Batch does not know busy-job (a permanent failure) and idle-job was applied
    registry = after_a_cycle["registry"]
    batch = boto3.client("batch", region_name="us-east-1")
    busy = JobKey(Backend.BATCH, "busy-job")
    idle = JobKey(Backend.BATCH, "idle-job")
    apply_cycle([{"changes": [{"key": str(busy)}]}], registry, [BatchShareApplier(batch)], now=NOW)
    registry.record_applied(idle, 40, NOW)

    # When the user lists the jobs
    rows = {
        row["name"]: row
        for row in json.loads(runner.invoke(app, ["jobs", "--json", "--table", "osprey-jobs"]).stdout)
    }

    # Then each shows the derived priority, what the backend holds, and why the busy one is not applied
    assert (rows["busy-job"]["priority"], rows["busy-job"]["applied"], rows["busy-job"]["apply"]) == (
        60,
        None,
        "failed",
    )
    assert "not found" in rows["busy-job"]["apply_error"]
    assert (rows["idle-job"]["priority"], rows["idle-job"]["applied"], rows["idle-job"]["apply"]) == (
        40,
        40,
        "applied",
    )
    table = runner.invoke(app, ["jobs", "--table", "osprey-jobs"]).stdout
    assert "APPLIED" in table
    assert "busy-job: failed:" in table
    explained = runner.invoke(app, ["explain", "busy-job", "--table", "osprey-jobs"]).stdout
    assert "derived 60, backend holds nothing yet (failed)" in explained
    assert "applied 40 at" in runner.invoke(app, ["explain", "idle-job", "--table", "osprey-jobs"]).stdout
