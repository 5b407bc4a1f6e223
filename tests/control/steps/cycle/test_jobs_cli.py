"""Given a registry after a cycle, when a user runs `osprey jobs` and `osprey explain`, then they see each
job's derived and applied priority (and why an apply failed), the per-rule reasons of its last decision and
the state of its gang watch; unknown jobs and tables exit 1."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.batch import BatchShareApplier
from osprey_control.gang import GangPhase, GangState, start
from osprey_control.gang.store import GangStore
from osprey_control.policy_store import PolicySource
from osprey_control.registry import Backend, JobKey
from osprey_control.steps.apply import apply_cycle
from osprey_control.steps.derive import derive_within
from tests.control.steps.cycle.conftest import NOW, gpu_metrics, register

runner = CliRunner()


@pytest.fixture
def after_a_cycle(aws: dict[str, Any]) -> dict[str, Any]:
    register(aws["registry"], "busy-job", "i-0busy")
    register(aws["registry"], "idle-job", "i-0idle")
    gpu_metrics(aws["cloudwatch"], "i-0busy", gpu=97.0, memory_bw=80.0)
    gpu_metrics(aws["cloudwatch"], "i-0idle", gpu=8.0, memory_bw=3.0)
    derive_within(
        aws["registry"], PolicySource(client=aws["ssm"]), None, cloudwatch=aws["cloudwatch"], now=NOW
    )
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
    idle = JobKey(Backend.BATCH, "idle-job")
    apply_cycle([{"shard": None}], registry, [BatchShareApplier(batch)], now=NOW)
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


def _gang(phase: GangPhase, ready: int, requested: int, **changes: Any) -> GangState:
    started = NOW - timedelta(minutes=2)
    return replace(start(started), phase=phase, ready_workers=ready, requested_workers=requested, **changes)


@pytest.fixture
def with_gangs(after_a_cycle: dict[str, Any]) -> dict[str, Any]:
    registry = after_a_cycle["registry"]
    register(registry, "mpi-job", "i-0mpi")
    register(registry, "plain-job", "i-0plain")
    store = GangStore("osprey-jobs", client=after_a_cycle["dynamodb"])
    ready_at = NOW - timedelta(minutes=2) + timedelta(seconds=20)
    gangs = {
        "busy-job": _gang(
            GangPhase.READY, 4, 4, ready_at=ready_at, ready_in_time=True, reason="4/4 workers ready"
        ),
        "idle-job": _gang(GangPhase.WAITING, 2, 4),
        "mpi-job": _gang(
            GangPhase.REQUEUED,
            1,
            4,
            attempt=1,
            requeues=1,
            ready_in_time=False,
            resume_at=NOW + timedelta(seconds=60),
            reason="1/4 workers ready after 30 s (needs 100%)",
        ),
    }
    for name, state in gangs.items():
        store.save(JobKey(Backend.BATCH, name), state, 0, updated_at=NOW)
    return after_a_cycle


def test_jobs_show_each_jobs_gang_phase(with_gangs: dict[str, Any]) -> None:
    # Given gang watches that formed, still wait, and were requeued, and a job with no watch
    # When the user lists the jobs
    rows = {
        row["name"]: row
        for row in json.loads(runner.invoke(app, ["jobs", "--json", "--table", "osprey-jobs"]).stdout)
    }
    table = runner.invoke(app, ["jobs", "--table", "osprey-jobs"]).stdout

    # Then each gang's phase is in the GANG column, "-" where there is no watch
    assert {name: (row["gang"] or {}).get("summary") for name, row in rows.items()} == {
        "busy-job": "ready 20s",
        "idle-job": "waiting 2/4",
        "mpi-job": "requeued #1",
        "plain-job": None,
    }
    assert rows["busy-job"]["gang"]["wait_seconds"] == 20.0
    assert rows["mpi-job"]["gang"]["requeues"] == 1
    assert rows["plain-job"]["co_schedule"] == "policy"
    assert "GANG" in table
    for cell in ("ready 20s", "waiting 2/4", "requeued #1"):
        assert cell in table
    plain = next(line for line in table.splitlines() if "plain-job" in line)
    assert plain.rstrip().endswith("-")


def test_explain_shows_the_full_gang_state(with_gangs: dict[str, Any]) -> None:
    # When the user explains a requeued gang and a ready one
    requeued = runner.invoke(app, ["explain", "mpi-job", "--table", "osprey-jobs"])
    ready = runner.invoke(app, ["explain", "busy-job", "--table", "osprey-jobs", "--json"])

    # Then they see phase, attempt, requeues, workers ready/requested, wait and the watch's reason
    assert requeued.exit_code == 0, requeued.output
    assert "gang requeued: attempt 1, 1 requeue(s), 1/4 workers ready, waited -" in requeued.stdout
    assert "1/4 workers ready after 30 s (needs 100%)" in requeued.stdout
    gang = json.loads(ready.stdout)["gang"]
    assert {
        key: gang[key] for key in ("phase", "attempt", "requeues", "ready_workers", "requested_workers")
    } == {
        "phase": "ready",
        "attempt": 1,
        "requeues": 0,
        "ready_workers": 4,
        "requested_workers": 4,
    }
    assert (gang["wait_seconds"], gang["reason"], gang["ready_in_time"]) == (20.0, "4/4 workers ready", True)


class _CountingClient:
    """The moto DynamoDB client, counting BatchGetItem calls and leaving the first call's last key unprocessed
    (as DynamoDB does under throttling)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls += 1
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        held_back = keys[-1:] if self.calls == 1 else []
        response = dict(
            self.client.batch_get_item(RequestItems={table: {"Keys": keys[: len(keys) - len(held_back)]}})
        )
        response["UnprocessedKeys"] = {table: {"Keys": held_back}} if held_back else {}
        return response


def test_gang_states_are_read_in_batches_of_100(with_gangs: dict[str, Any]) -> None:
    # Given 250 jobs to list, three with a gang watch, the third of them left unprocessed by the first call
    keys = [JobKey(Backend.BATCH, f"job-{n}") for n in range(247)]
    gang_keys = [JobKey(Backend.BATCH, name) for name in ("busy-job", "idle-job", "mpi-job")]
    client = _CountingClient(with_gangs["dynamodb"])

    # When their gang states are read
    states = GangStore("osprey-jobs", client).load_many([*gang_keys, *keys])

    # Then three BatchGetItem calls carry them (250 / 100), one more asks again for the unprocessed key
    assert client.calls == 4
    assert {key.native_id: state.phase.value for key, state in states.items()} == {
        "busy-job": "ready",
        "idle-job": "waiting",
        "mpi-job": "requeued",
    }
