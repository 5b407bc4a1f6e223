"""Given a recommendation the plan step wrote while the network was degraded, when the network recovers before
the job has read it, then the next plan step withdraws it (the record becomes the job's own plan, so
``adjust_parallelism`` answers unchanged); a job that may already be re-shaping to it keeps it (moto DynamoDB and
CloudWatch)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import osprey
from osprey.planning import update_progress
from osprey_control.planner.record import plan_from_record, record_from_item, withdrawal_for
from osprey_control.planner.replan import ReplanDecision
from tests.planner.conftest import TABLE, Aws
from tests.planner.test_step import (
    CURRENT,
    _degraded,
    _env,
    _job,
    _plan_item,
    _run,
    _runtime_metrics,
    _step_time,
)


def _recommend_while_degraded(aws: Aws) -> datetime:
    """The job on CURRENT, a degraded network, one plan step a few seconds after the job's last report: a
    record recommending another plan. Returns the plan step's time."""
    _job(aws, "llm")
    _degraded(aws, "llm")
    when = datetime.now(UTC) + timedelta(seconds=5)
    report = _run(aws, now=when)
    assert report["written"] == 1, report
    assert plan_from_record(record_from_item(_plan_item(aws, "llm") or {})) != CURRENT
    return when


def _recovered(aws: Aws) -> None:
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=_step_time(None, 15.0), minutes_ago=1)


def test_a_recommendation_the_job_has_not_read_is_withdrawn_when_the_network_recovers(aws: Aws) -> None:
    # Given a recommendation written while the network was degraded
    when = _recommend_while_degraded(aws)
    # When the network recovers and the plan step runs again before the job's next decision point
    _recovered(aws)
    report = _run(aws, now=when + timedelta(minutes=1))
    # Then the current plan is fine again and the record is withdrawn: it now holds the job's own plan
    assert report["decisions"] == {"no-better-plan": 1}, report
    assert report["withdrawn"] == 1
    record = record_from_item(_plan_item(aws, "llm") or {})
    assert (plan_from_record(record), record["reason"]) == (CURRENT, "withdrawn")
    # And the job, at its decision point, is told nothing new
    assert osprey.adjust_parallelism(660, CURRENT, client=aws.dynamodb, environ=_env("llm")) is None
    # And the next plan step leaves the withdrawal alone
    assert _run(aws, now=when + timedelta(minutes=2))["withdrawn"] == 0


def test_a_recommendation_the_job_may_be_adopting_is_kept(aws: Aws) -> None:
    # Given a recommendation written while degraded, and the job's decision point after it (it read the
    # record there, and may be re-shaping to it now)
    when = _recommend_while_degraded(aws)
    recommended = record_from_item(_plan_item(aws, "llm") or {})
    later = when + timedelta(seconds=30)
    assert update_progress(aws.dynamodb, TABLE, "JOB#batch#llm", 660, CURRENT, now=later) == "updated"
    # When the network recovers and the plan step runs (the job's report is later than the record)
    _recovered(aws)
    report = _run(aws, now=when + timedelta(minutes=1))
    # Then the record is kept: the job reports the new plan at its next decision point, judged from there
    assert report["withdrawn"] == 0
    assert record_from_item(_plan_item(aws, "llm") or {})["plan_id"] == recommended["plan_id"]


def test_only_a_plan_step_that_finds_the_current_plan_fine_withdraws() -> None:
    # Given a stale record and decisions that do not say the current plan is fine
    record = {"version": "1", "tp": 4, "pp": 2, "dp": 8, "micro_batch": 1, "virtual": 1,
              "created_at": "2026-12-04T10:00:05Z", "plan_id": "x"}  # fmt: skip
    for reason in ("switch", "too-soon", "no-feasible-plan"):
        decision = ReplanDecision(False, reason, None, None, 0.0, 0.0, 0.1, 60, 600)  # type: ignore[arg-type]
        # Then nothing is withdrawn
        assert (
            withdrawal_for(
                "batch#llm",
                decision,
                record,
                running_key="2,1,32,16,1",
                last_progress_at="2026-12-04T10:00:00Z",
            )
            is None
        )
