"""Given the cycle state machine's state at Finish, when the cycle is summarised, then a failed shard or job is
published as FailedShards / FailedJobs > 0 and a cycle with a failed shard is not counted as a clean success
(CyclesFailed, not CyclesSucceeded), while a clean cycle publishes zeros (issue 14: silent failures)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from osprey_control.registry.lease import CycleLease
from osprey_control.telemetry import CycleSummary, MetricPoint, cycle_metrics, summarise_cycle
from osprey_handlers import finish as finish_handler
from tests.control.steps.cycle.conftest import NOW
from tests.lambda_context import lambda_context

HEALTHY = {
    "shard": 0,
    "evaluated": 2,
    "pending": 0,
    "jobs_failed": 0,
    "failures": [],
    "deferred": 0,
    "series": 4,
    "getmetricdata_calls": 1,
}
FAILED = {
    "shard": 3,
    "failed": True,
    "error": {"Error": "ConnectionError", "Cause": "shard lost its connection to DynamoDB"},
}


def _values(points: list[MetricPoint]) -> dict[str, float]:
    return {point.name: point.values[0] for point in points}


def test_a_failed_shard_is_published_and_the_cycle_is_not_a_clean_success() -> None:
    # Given a cycle whose Map reported one failed shard next to a healthy one, and whose apply step succeeded
    state = {"plan": {"shards": [0, 3]}, "shards": [HEALTHY, FAILED], "apply": {"applied": 2, "failed": []}}

    # When Finish summarises it
    summary = summarise_cycle("succeeded", state)
    metrics = _values(cycle_metrics(summary, 1234.56))

    # Then FailedShards is 1 and the cycle counts as failed, not succeeded
    assert summary.failed_shards == (3,)
    assert not summary.clean
    assert metrics == {"CycleDurationMs": 1234.6, "CyclesFailed": 1.0, "FailedShards": 1.0, "FailedJobs": 0.0}


def test_failed_jobs_of_derive_and_apply_are_counted_once_each() -> None:
    # Given a shard with two jobs whose derivation failed and an apply step that failed one of them and another
    shard = {
        **HEALTHY,
        "failures": [{"key": "batch#a", "kind": "conflict", "error": "x"}, {"key": "batch#b"}],
    }
    apply = {
        "applied": 0,
        "failed": [{"key": "batch#b", "reason": "throttled", "transient": True}, {"key": "batch#c"}],
    }

    # When the cycle is summarised
    summary = summarise_cycle("succeeded", {"shards": [shard], "apply": apply})

    # Then each failed job counts once, and without a failed shard the cycle is still a success
    assert summary.failed_jobs == ("batch#a", "batch#b", "batch#c")
    assert summary.clean
    assert _values(cycle_metrics(summary, 10.0))["FailedJobs"] == 3.0
    assert "CyclesSucceeded" in _values(cycle_metrics(summary, 10.0))


def test_failed_jobs_are_counted_beyond_the_samples_the_reports_carry() -> None:
    # Given two shards that failed 40 and 3 jobs (naming at most five each) and an apply step that failed 12,
    # one of them named by a shard too
    shards = [
        {**HEALTHY, "jobs_failed": 40, "failures": [{"key": f"batch#s{n}"} for n in range(5)]},
        {**HEALTHY, "shard": 1, "jobs_failed": 3, "failures": [{"key": f"batch#t{n}"} for n in range(3)]},
    ]
    apply = {"applied": 7, "failed": 12, "failures": [{"key": "batch#s0"}, {"key": "batch#x"}]}

    # When the cycle is summarised
    summary = summarise_cycle("succeeded", {"shards": shards, "apply": apply})

    # Then FailedJobs is the reported count (the job named twice counts once) and the names are the samples'
    assert summary.jobs_failed == 40 + 3 + 12 - 1
    assert _values(cycle_metrics(summary, 1.0))["FailedJobs"] == 54.0
    assert summary.failed_jobs[:1] == ("batch#s0",)
    assert len(summary.failed_jobs) == 9


def test_a_clean_cycle_publishes_zero_failures_and_a_success() -> None:
    # Given a cycle where every shard derived and everything applied
    state = {"plan": {"shards": [0]}, "shards": [HEALTHY], "apply": {"applied": 2, "failed": []}}

    # When it is summarised
    metrics = _values(cycle_metrics(summarise_cycle("succeeded", state), 5.0))

    # Then the failure metrics are 0 (a value, not a gap) and the cycle succeeded
    assert metrics == {"CycleDurationMs": 5.0, "CyclesSucceeded": 1.0, "FailedShards": 0.0, "FailedJobs": 0.0}


def test_when_the_map_itself_failed_every_planned_shard_counts_as_failed() -> None:
    # Given a cycle whose Map state failed as a whole: the plan is there, no shard report reached apply
    state = {"plan": {"shards": [0, 1, 2]}, "error": {"Error": "States.DataLimitExceeded"}}

    # When it is summarised
    summary = summarise_cycle("failed", state)

    # Then all three shards failed
    assert summary.failed_shards == (0, 1, 2)
    assert _values(cycle_metrics(summary, 1.0))["FailedShards"] == 3.0


@pytest.mark.parametrize(
    "state",
    [None, {}, {"error": {"Error": "Lambda.Unknown"}}, {"shards": "garbage", "apply": ["garbage"]}],
    ids=["no state", "empty", "failed before the plan", "unexpected shapes"],
)
def test_a_cycle_that_failed_before_its_shards_has_no_failed_shards_but_is_failed(state: Any) -> None:
    # Given a failed cycle that never planned shards (or a state of an unexpected shape)
    # When it is summarised
    summary = summarise_cycle("failed", state)

    # Then nothing is invented, and the cycle counts as failed
    assert summary == CycleSummary("failed")
    assert _values(cycle_metrics(summary, 1.0))["CyclesFailed"] == 1.0


def test_the_finish_handler_publishes_failed_shards_as_emf_and_logs_their_errors(
    aws: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the lease held by this execution, and a state with one failed shard (what the state machine passes)
    monkeypatch.setenv("OSPREY_TABLE_NAME", "osprey-jobs")
    finish_handler._components.cache_clear()
    assert CycleLease("osprey-jobs", client=aws["dynamodb"]).acquire("exec-1", 600).acquired
    event = {
        "owner": "exec-1",
        "startedAt": (NOW - timedelta(seconds=3)).isoformat(),
        "outcome": "succeeded",
        "error": {},
        "cycle": {
            "plan": {"shards": [0, 3]},
            "shards": [HEALTHY, FAILED],
            "apply": {"failed": 0, "failures": []},
        },
    }

    # When Finish runs
    try:
        answer = finish_handler.handler(event, lambda_context("osprey-finish"))
    finally:
        finish_handler._components.cache_clear()  # its client belongs to this test's moto context

    # Then it releases the lease, says one shard failed, prints FailedShards 1 as EMF and logs the shard's error
    assert answer["released"] is True
    assert (answer["failedShards"], answer["failedJobs"]) == (1, 0)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    records = [line for line in lines if "_aws" in line]
    assert {line["_aws"]["CloudWatchMetrics"][0]["Namespace"] for line in records} == {"/aws/osprey"}
    published = {name: value for line in records for name, value in line.items() if name[0].isupper()}
    assert published.keys() == {"CycleDurationMs", "CyclesFailed", "FailedShards", "FailedJobs"}
    assert (published["FailedShards"], published["FailedJobs"]) == ([1.0], [0.0])  # Powertools writes arrays
    # (Powertools' Logger keeps the stdout of its import, so its lines are read from the logging records.)
    (logged,) = [record for record in caplog.records if record.getMessage() == "cycle had failed shards"]
    assert logged.__dict__["failedShards"] == [3]
    assert logged.__dict__["errors"] == [{"shard": 3, "error": FAILED["error"]}]
