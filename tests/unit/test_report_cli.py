"""Given the recorded history of test_report (moved to end just before now, by whole weeks so its weekdays
stay), when a user runs `osprey report` against the registry, then --json has the documented shape and the
hand-computed numbers, the table says which period is which and that it is an observation, --plot writes a PNG,
a bad --since is a usage error (exit 2) naming the option, and nothing to report is one line with exit 1."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.report import OBSERVATION_NOTE
from osprey_control.registry import JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from tests.unit.test_report import MON, NOW, TABLE, History, record_history, registry

__all__ = ["registry"]  # the fixture, shared with test_report

runner = CliRunner()
ARGS = ["--table", TABLE, "--shards", "2"]


def _shift() -> timedelta:
    """Whole weeks that move test_report's NOW to at most a week before the real now."""
    return timedelta(days=7 * ((datetime.now(UTC) - NOW) // timedelta(days=7)))


def test_json_has_the_documented_shape_and_the_numbers(registry: JobRegistry) -> None:
    shift = _shift()
    record_history(registry, shift)
    result = runner.invoke(app, ["report", "--since", (MON + shift).isoformat(), "--json", *ARGS])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert set(found) == {"since", "until", "observation", "definitions", "backends"}
    assert found["observation"] == OBSERVATION_NOTE
    assert found["definitions"]["shadow_outcome"] == "shadow"
    assert [backend["backend"] for backend in found["backends"]] == ["batch", "eks"]
    batch = found["backends"][0]
    assert set(batch) == {"backend", "enforcement_start", "weeks", "comparison"}
    assert set(batch["weeks"][0]) == {
        "week", "period", "start", "end", "jobs", "started", "mean_wait_s", "p95_wait_s", "still_waiting",
        "gpu_hours", "unknown_gpu_job_hours", "idle_while_waiting_gpu_hours",
        "unknown_utilization_while_waiting_gpu_hours", "priority_changes", "job_hours",
        "priority_changes_per_job_hour", "gangs", "shadow", "guard",
    }  # fmt: skip
    before = batch["comparison"]["before"]
    assert (before["mean_wait_s"], before["p95_wait_s"], before["idle_while_waiting_gpu_hours"]) == (
        7200.0,
        10800.0,
        12.0,
    )
    assert batch["weeks"][0]["period"] == "before"
    assert batch["weeks"][-1]["period"] == "enforced"


def test_the_table_names_the_periods_and_says_it_is_an_observation(
    registry: JobRegistry, tmp_path: Path
) -> None:
    shift = _shift()
    record_history(registry, shift)
    plot = tmp_path / "report.png"
    result = runner.invoke(app, ["report", "--since", "2w", "--plot", str(plot), *ARGS])
    assert result.exit_code == 0, result.output
    assert "batch: enforced since" in result.stdout
    assert "eks: not enforced (Osprey only watched)" in result.stdout
    assert "comparison: not enforced" in result.stdout
    assert OBSERVATION_NOTE in " ".join(result.stdout.split())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("since", ["yesterday", "3x", "2999-01-01"])
def test_a_bad_since_is_a_usage_error_naming_the_option(since: str) -> None:
    result = runner.invoke(app, ["report", "--since", since, *ARGS])
    assert result.exit_code == 2
    assert "'--since'" in result.stderr
    assert "12h, 7d, 2w" in " ".join(result.stderr.split())


def test_an_empty_registry_is_nothing_to_report(registry: JobRegistry) -> None:
    result = runner.invoke(app, ["report", "--json", *ARGS])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "error: nothing to report: the registry (table osprey-jobs) holds no jobs"
    )


def test_no_job_in_the_window_asks_to_widen_since(registry: JobRegistry) -> None:
    h = History(registry, timedelta())
    month_ago = datetime.now(UTC) - timedelta(days=30)
    h.observe("old", JobStatus.RUNNING, month_ago, month_ago)
    h.observe("old", JobStatus.SUCCEEDED, month_ago + timedelta(hours=1), month_ago)
    result = runner.invoke(app, ["report", "--since", "7d", *ARGS])
    assert result.exit_code == 1
    assert "none of the registry's 1 job(s) was alive since" in result.stderr
    assert "widen --since" in result.stderr
    assert runner.invoke(app, ["report", "--since", "5w", "--json", *ARGS]).exit_code == 0
