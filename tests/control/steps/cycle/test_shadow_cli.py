"""Given a cycle applied in shadow mode, when a user runs `osprey jobs`, `osprey explain` and `osprey history`,
then each shows what would have been written, marked as shadow, and that nothing reached the backend."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.batch import BatchShareApplier
from osprey_control.policy_store import PolicySource
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from osprey_control.steps.mode import Mode, ModeSettings
from tests.control.steps.cycle.conftest import NOW, gpu_metrics, register

runner = CliRunner()


@pytest.fixture
def in_shadow(aws: dict[str, Any]) -> dict[str, Any]:
    register(aws["registry"], "busy-job", "i-0busy")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    )
    # A Batch applier with no client: any call it made would fail the job instead of reporting shadow
    modes = ModeSettings(backends={"batch": Mode.SHADOW})
    apply_cycle([{"shard": None}], aws["registry"], [BatchShareApplier(object())], now=NOW, modes=modes)
    return aws


def test_jobs_marks_the_job_shadow_with_the_would_be_priority(in_shadow: dict[str, Any]) -> None:
    rows = json.loads(runner.invoke(app, ["jobs", "--table", "osprey-jobs", "--json"]).stdout)
    ((row),) = rows
    assert (row["priority"], row["applied"], row["apply"], row["shadow"]) == (60, None, "shadow", 60)
    assert row["shadow_at"] == NOW.isoformat()
    table = runner.invoke(app, ["jobs", "--table", "osprey-jobs"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "shadow" in table.stdout
    assert "1 job(s) in shadow mode: PRIORITY is what Osprey would have written; nothing was" in table.stdout


def test_explain_says_what_would_have_been_written(in_shadow: dict[str, Any]) -> None:
    result = runner.invoke(app, ["explain", "busy-job", "--table", "osprey-jobs"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (
        f"shadow: would write 60 to batch (since {NOW.isoformat()}); nothing written, batch holds nothing from Osprey"
        in " ".join(result.stdout.split())
    )


def test_history_shows_the_shadow_event(in_shadow: dict[str, Any]) -> None:
    result = runner.invoke(app, ["history", "busy-job", "--table", "osprey-jobs", "--json"])
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    assert [event["event"] for event in events] == ["derived", "shadow"]
    assert events[1]["priority"] == 60
    assert events[1]["detail"] == "shadow (backend batch is shadow): would write 60 to batch; nothing written"
    table = runner.invoke(app, ["history", "busy-job", "--table", "osprey-jobs"], env={"COLUMNS": "200"})
    assert "would write 60 to batch; nothing written" in " ".join(table.stdout.split())
