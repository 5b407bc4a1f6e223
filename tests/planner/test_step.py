"""Given running jobs that asked to be planned (moto DynamoDB + CloudWatch), when the plan step runs, then a
degraded network (the runtime's latency and step time) produces a plan record that ``osprey.adjust_parallelism``
returns; a healthy network, a gain below the hysteresis, too few steps on the current plan or missing metrics
write nothing; the same recommendation is not rewritten; and a job with a broken request is reported while the
others are still planned."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import osprey
from osprey.planning import report_plan_progress
from osprey_control.contract import OspreyBlock
from osprey_control.planner import Plan, cluster, evaluate
from osprey_control.planner.measure import Observed, measure
from osprey_control.planner.record import record_from_item
from osprey_control.planner.request import REQUEST_SK, build_request, request_from_item
from osprey_control.registry import PLAN_SK, Backend, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.steps import plan as plan_step
from osprey_control.steps.plan import PlanStepConfig, run_plan_step
from tests.lambda_context import lambda_context
from tests.planner.conftest import TABLE, Aws

NAMESPACE = "/aws/osprey"
# Every option fixed (the search varies only the layout), so the healthy cluster's best plan is CURRENT.
MODEL = {
    "layers": 24,
    "hidden": 4096,
    "heads": 32,
    "seq": 2048,
    "vocab": 51200,
    "global_batch": 512,
    "recompute": "full",
    "sequence_parallel": "off",
    "optimizer_sharding": "none",
    "flash_attention": "off",
    "comm_overlap": "off",
}
CURRENT = Plan(tp=2, pp=1, dp=32, micro_batch=16)  # the planner's best on the healthy 64 x A100 cluster
HOSTS = ("i-0aaa", "i-0bbb")


def _env(job: str) -> dict[str, str]:
    return {"OSPREY_TABLE_NAME": TABLE, "OSPREY_JOB_KEY": f"batch#{job}"}


def _running_job(aws: Aws, job: str, hosts: Sequence[str]) -> None:
    """A Batch job the registry has seen running for an hour on ``hosts`` (instance ids)."""
    JobRegistry(TABLE, aws.dynamodb).apply_observation(
        JobObservation(
            backend=Backend.BATCH,
            native_id=job,
            name=job,
            block=OspreyBlock(priority_derivation_profile="training-policy"),
            status=JobStatus.RUNNING,
            event_time=datetime.now(UTC) - timedelta(hours=1),
            nodes=tuple(NodeRef(node_id=i, kind=NodeKind.INSTANCE, instance_id=i) for i in hosts),
        )
    )


def _job(aws: Aws, job: str, *, step: int = 600) -> None:
    """A running Batch job on two instances that asked to be planned at step 0 and is now at ``step``."""
    _running_job(aws, job, HOSTS)
    osprey.request_planning(MODEL, "p4de.24xlarge", CURRENT, client=aws.dynamodb, environ=_env(job))
    assert report_plan_progress(step, CURRENT, client=aws.dynamodb, environ=_env(job)) == "updated"


def _step_time(network_gbits: float | None, latency_us: float | None) -> float:
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    )
    observed = request.cluster.with_changes(network_gbits=network_gbits, network_latency_us=latency_us)
    return evaluate(request.model, observed, CURRENT).step_time_s


def _put(aws: Aws, job: str, host: str, values: dict[str, tuple[float, str]], minutes_ago: int = 2) -> None:
    when = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    dimensions = [
        {"Name": "Backend", "Value": "batch"},
        {"Name": "JobId", "Value": job},
        {"Name": "Host", "Value": host},
    ]
    aws.cloudwatch.put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {"MetricName": name, "Dimensions": dimensions, "Timestamp": when, "Value": value, "Unit": unit}
            for name, (value, unit) in values.items()
        ],
    )


def _runtime_metrics(
    aws: Aws, job: str, *, latency_us: float, step_time_s: float, minutes_ago: int = 2
) -> None:
    """What ``osprey.runtime`` reports: from the lead process only, on the lead host (Batch: node index 0)."""
    _put(
        aws,
        job,
        "0",
        {
            "InterconnectLatencyMicroseconds": (latency_us, "Microseconds"),
            "StepTimeSeconds": (step_time_s, "Seconds"),
        },
        minutes_ago,
    )


def _degraded(aws: Aws, job: str, network_gbits: float = 25.0) -> None:
    _runtime_metrics(aws, job, latency_us=45.0, step_time_s=_step_time(network_gbits, 45.0))


def _run(aws: Aws, now: datetime | None = None, **config: Any) -> dict[str, Any]:
    report = run_plan_step(
        PlanStepConfig(TABLE, **config), dynamodb=aws.dynamodb, cloudwatch=aws.cloudwatch, now=now
    )
    return report.to_dict()


def _plan_item(aws: Aws, job: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = aws.dynamodb.get_item(
        TableName=TABLE, Key={"pk": {"S": f"PLAN#batch#{job}"}, "sk": {"S": PLAN_SK}}
    ).get("Item")
    return item


def _request_item(aws: Aws, job: str) -> dict[str, Any]:
    item: dict[str, Any] = aws.dynamodb.get_item(
        TableName=TABLE,
        Key={"pk": {"S": f"PLANREQ#batch#{job}"}, "sk": {"S": REQUEST_SK}},
        ConsistentRead=True,
    )["Item"]
    return item


def test_a_degraded_network_writes_a_plan_that_adjust_parallelism_returns(aws: Aws) -> None:
    # Given a job at step 600 on 2x1x32 whose network fell from 400 to 25 Gb/s per node (latency 15 -> 45 µs)
    _job(aws, "llm")
    _degraded(aws, "llm")
    # When the plan step runs
    report = _run(aws)
    # Then it re-planned the job and wrote one plan record
    assert (report["jobs"], report["requests"], report["planned"], report["written"]) == (1, 1, 1, 1)
    assert report["decisions"] == {"switch": 1}
    assert report["errors"] == []
    record = record_from_item(_plan_item(aws, "llm") or {})
    assert record["job_id"] == "batch#llm"
    assert record["reason"] == "switch"
    assert record["expected_saving_fraction"] > 0.10
    # And the job, at its next decision point, gets that plan through the real reader
    plan = osprey.adjust_parallelism(660, CURRENT, client=aws.dynamodb, environ=_env("llm"))
    assert plan is not None
    assert plan != CURRENT
    assert plan.to_dict() == {name: record[name] for name in ("tp", "pp", "dp", "micro_batch", "virtual")}
    assert plan.tp * plan.pp * plan.dp == 64


def test_the_same_recommendation_is_not_rewritten(aws: Aws) -> None:
    # Given a degraded job already given its plan
    _job(aws, "llm")
    _degraded(aws, "llm")
    _run(aws)
    first = _plan_item(aws, "llm")
    # When the next cycle reaches the same decision, then the record is left as it was
    report = _run(aws)
    assert (report["switches"], report["written"]) == (1, 0)
    assert report["records"][0]["written"] is False
    assert _plan_item(aws, "llm") == first


def test_a_job_is_planned_at_most_every_min_interval(aws: Aws) -> None:
    # Given a degraded job planned once, its request says when and why
    _job(aws, "llm")
    _degraded(aws, "llm")
    now = datetime.now(UTC)
    assert _run(aws, now, min_interval_seconds=300)["written"] == 1
    request = aws.dynamodb.get_item(
        TableName=TABLE, Key={"pk": {"S": "PLANREQ#batch#llm"}, "sk": {"S": REQUEST_SK}}
    )["Item"]
    assert request["plan_reason"] == {"S": "switch"}
    assert request_from_item(request).planned_at == now.strftime("%Y-%m-%dT%H:%M:%SZ")
    # When the next cycle runs a minute later, then the job is skipped (its metrics are not even queried)
    later = _run(aws, now + timedelta(seconds=60), min_interval_seconds=300)
    assert (later["skipped"], later["planned"]) == (1, 0)
    # When five minutes have passed, then it is planned again
    assert _run(aws, now + timedelta(seconds=301), min_interval_seconds=300)["planned"] == 1


def test_a_healthy_network_writes_nothing(aws: Aws) -> None:
    # Given the runtime reports the nominal latency and the step time the model predicts
    _job(aws, "llm")
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=_step_time(None, 15.0))
    # When the plan step runs, then the current plan is still the best and nothing is written
    report = _run(aws)
    assert report["decisions"] == {"no-better-plan": 1}
    assert report["written"] == 0
    assert _plan_item(aws, "llm") is None


def test_a_gain_below_the_hysteresis_writes_nothing_unless_the_threshold_is_lower(aws: Aws) -> None:
    # Given the network at 50 Gb/s: another plan is only about 4% faster
    _job(aws, "llm")
    _degraded(aws, "llm", network_gbits=50.0)
    # When the plan step runs with the default 10% hysteresis, then nothing is written
    report = _run(aws)
    assert report["decisions"] == {"below-hysteresis": 1}
    assert _plan_item(aws, "llm") is None
    # When it runs with a 2% hysteresis, then the switch is recommended
    assert _run(aws, hysteresis=0.02)["written"] == 1


def test_too_few_steps_on_the_current_plan_writes_nothing(aws: Aws) -> None:
    # Given a degraded job that adopted its plan only 30 steps ago (OSPREY_INTERVAL 60)
    _job(aws, "llm", step=30)
    _degraded(aws, "llm")
    # When the plan step runs, then it waits
    report = _run(aws)
    assert report["decisions"] == {"too-soon": 1}
    assert _plan_item(aws, "llm") is None


def test_missing_metrics_keep_the_nominal_network_and_say_so(aws: Aws) -> None:
    # Given a job whose runtime reports nothing
    _job(aws, "llm")
    # When the plan step runs, then it plans on the nominal cluster (no switch) and counts the missing data
    report = _run(aws)
    assert report["decisions"] == {"no-better-plan": 1}
    assert report["missingData"] == 1
    assert _plan_item(aws, "llm") is None


def test_a_broken_request_is_isolated_and_reported(aws: Aws) -> None:
    # Given two degraded jobs, one of whose request item was damaged
    for job in ("good", "bad"):
        _job(aws, job)
        _degraded(aws, job)
    aws.dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "PLANREQ#batch#bad"}, "sk": {"S": REQUEST_SK}},
        UpdateExpression="SET config = :broken",
        ExpressionAttributeValues={":broken": {"S": '{"layers": 0}'}},
    )
    # When the plan step runs
    report = _run(aws)
    # Then the good job is planned and written, and the bad one is reported by field
    assert (report["requests"], report["planned"], report["written"]) == (2, 1, 1)
    (error,) = report["errors"]
    assert error["job"] == "batch#bad"
    assert error["kind"] == "invalid-request"
    assert "layers: must be a positive integer" in error["message"]
    assert _plan_item(aws, "good") is not None
    assert _plan_item(aws, "bad") is None


def test_jobs_without_a_request_are_not_planned(aws: Aws) -> None:
    JobRegistry(TABLE, aws.dynamodb).apply_observation(
        JobObservation(
            backend=Backend.BATCH,
            native_id="plain",
            name="plain",
            block=OspreyBlock(priority_derivation_profile="training-policy"),
            status=JobStatus.RUNNING,
            event_time=datetime.now(UTC),
        )
    )
    report = _run(aws)
    assert (report["jobs"], report["requests"], report["planned"]) == (1, 0, 0)


def test_the_bandwidth_is_recovered_from_the_step_time() -> None:
    # Given the step time the cost model predicts at 25 Gb/s and 45 µs, and the lead's 45 µs
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    )
    observed = Observed(latency_us=45.0, step_time_s=_step_time(25.0, 45.0))
    # When it is turned into a measurement
    measurement, signals = measure(request, observed)
    # Then the latency is the lead's and the bandwidth the one that explains the step time
    assert measurement.network_latency_us == 45.0
    assert signals["network_latency_us"].source == "InterconnectLatencyMicroseconds"
    assert measurement.network_gbits is not None
    assert math.isclose(measurement.network_gbits, 25.0, rel_tol=1e-3)
    assert signals["network_gbits"].source == "StepTimeSeconds"
    # And a step time the network cannot explain keeps the nominal bandwidth
    slow = Observed(step_time_s=_step_time(None, None) * 1000)
    measurement, signals = measure(request, slow)
    assert measurement.network_gbits is None
    assert "not the network" in signals["network_gbits"].note
    assert signals["network_latency_us"].missing


def test_the_plan_step_measures_the_lead_hosts_latency_not_the_other_hosts(
    aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a degraded job whose lead reports 45 µs, and whose second host still carries a series from an
    # older runtime that printed on every host (1500 µs)
    _job(aws, "llm")
    _degraded(aws, "llm")
    _put(aws, "llm", "1", {"InterconnectLatencyMicroseconds": (1500.0, "Microseconds")})
    # When the plan step runs
    with caplog.at_level("INFO", logger="osprey_control.steps.plan"):
        report = _run(aws)
    # Then the job was measured with the lead's latency (no median with the other host) and re-planned
    (planned,) = [record for record in caplog.records if record.getMessage() == "job planned"]
    latency = planned.__dict__["signals"]["network_latency_us"]
    assert (latency["value"], latency["source"]) == (45.0, "InterconnectLatencyMicroseconds")
    assert report["decisions"] == {"switch": 1}


def test_the_plan_step_reads_four_series_per_job_on_the_lead_host(aws: Aws) -> None:
    # Given a planned job on two instances
    _job(aws, "llm")
    sent: list[dict[str, Any]] = []

    class Recording(_CountingCloudWatch):
        def get_metric_data(self, **request: Any) -> dict[str, Any]:
            sent.extend(request["MetricDataQueries"])
            return super().get_metric_data(**request)

    # When the plan step runs
    run_plan_step(PlanStepConfig(TABLE), dynamodb=aws.dynamodb, cloudwatch=Recording())
    # Then it asked for the lead host's latency, step time and slowest node, nothing per host
    assert sorted(
        (
            q["MetricStat"]["Metric"]["MetricName"],
            tuple(d["Value"] for d in q["MetricStat"]["Metric"]["Dimensions"]),
        )
        for q in sent
    ) == [
        ("InterconnectLatencyMicroseconds", ("batch", "llm", "0")),
        ("SlowestNodeIndex", ("batch", "llm", "0")),
        ("SlowestNodeSpeed", ("batch", "llm", "0")),
        ("StepTimeSeconds", ("batch", "llm", "0")),
    ]


def test_the_handler_runs_the_step_from_its_environment(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from osprey_handlers import plan as plan_handler  # noqa: PLC0415

    # Given the function's environment and a degraded job
    monkeypatch.setenv("OSPREY_TABLE_NAME", TABLE)
    monkeypatch.setenv("OSPREY_METRICS_NAMESPACE", NAMESPACE)
    plan_handler._settings.cache_clear()
    _job(aws, "llm")
    _degraded(aws, "llm")
    # When the state machine invokes it, then it returns the JSON summary of one written switch
    result = plan_handler.handler({}, lambda_context("osprey-plan", 1024))
    assert (result["planned"], result["written"], result["errorCount"]) == (1, 1, 0)
    assert json.loads(json.dumps(result)) == result
    plan_handler._settings.cache_clear()


def test_the_handler_reads_both_thresholds_and_refuses_one_outside_0_to_1() -> None:
    from pydantic import ValidationError  # noqa: PLC0415

    from osprey_handlers.plan import PlanSettings  # noqa: PLC0415

    # Given the function's environment with both thresholds set
    env = {
        "OSPREY_TABLE_NAME": TABLE,
        "OSPREY_PLAN_HYSTERESIS": "0.2",
        "OSPREY_PLAN_PLACEMENT_HYSTERESIS": "0.05",
    }
    config = PlanSettings.model_validate(env).step_config()
    # Then the step holds new degrees to one and node moves to the other; unset, the defaults (10% and 3%)
    assert (config.hysteresis, config.placement_hysteresis) == (0.2, 0.05)
    defaults = PlanSettings.model_validate({"OSPREY_TABLE_NAME": TABLE}).step_config()
    assert (defaults.hysteresis, defaults.placement_hysteresis) == (0.10, 0.03)
    # And a threshold of 1 or more is refused, naming the variable
    with pytest.raises(ValidationError, match="OSPREY_PLAN_PLACEMENT_HYSTERESIS"):
        PlanSettings.model_validate({**env, "OSPREY_PLAN_PLACEMENT_HYSTERESIS": "1.5"})


class _CountingCloudWatch:
    """Answers GetMetricData with no data, or fails; records the size of each call."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[int] = []

    def get_metric_data(self, **request: Any) -> dict[str, Any]:
        self.calls.append(len(request["MetricDataQueries"]))
        if self.fail:
            raise ConnectionError("endpoint unreachable")
        return {
            "MetricDataResults": [
                {"Id": q["Id"], "StatusCode": "Complete"} for q in request["MetricDataQueries"]
            ]
        }


def test_a_failed_metrics_call_keeps_the_nominal_network_and_is_not_a_job_error(aws: Aws) -> None:
    # Given a planned job and a CloudWatch that cannot be reached
    _job(aws, "llm")
    cloudwatch = _CountingCloudWatch(fail=True)
    # When the plan step runs, then the job is planned on nominal values, counted as missing data
    report = run_plan_step(PlanStepConfig(TABLE), dynamodb=aws.dynamodb, cloudwatch=cloudwatch).to_dict()
    assert (report["planned"], report["missingData"], report["errorCount"]) == (1, 1, 0)
    assert report["decisions"] == {"no-better-plan": 1}


def test_metric_queries_are_sent_at_most_500_a_call(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given three planned jobs (12 series: latency, step time and slowest node of each job's lead host), and
    # the call size lowered from GetMetricData's 500 to 5 so that a few jobs fill a call
    assert plan_step.MAX_QUERIES_PER_CALL == 500
    monkeypatch.setattr(plan_step, "MAX_QUERIES_PER_CALL", 5)
    for job in ("a", "b", "c"):
        _job(aws, job)
    cloudwatch = _CountingCloudWatch()
    # When the plan step runs, then GetMetricData is called three times, 5 + 5 + 2 queries
    run_plan_step(PlanStepConfig(TABLE), dynamodb=aws.dynamodb, cloudwatch=cloudwatch)
    assert cloudwatch.calls == [5, 5, 2]


def test_the_report_the_state_machine_gets_is_bounded_whatever_the_errors() -> None:
    from osprey_control.steps.plan import MAX_REPORTED, MESSAGE_CHARS, PlanStepReport  # noqa: PLC0415

    # Given a plan step that met many failures with long messages (a stack trace, say)
    report = PlanStepReport()
    for index in range(3 * MAX_REPORTED):
        report.error(f"job-{index}", "metrics", "x" * 10_000)
    # When it is handed to the state machine
    shown = report.to_dict()
    # Then the list and each message are cut, and the full count is kept
    assert len(shown["errors"]) == MAX_REPORTED
    assert all(len(error["message"]) == MESSAGE_CHARS for error in shown["errors"])
    assert shown["errorCount"] == 3 * MAX_REPORTED


def test_a_job_faster_than_predicted_calibrates_the_model_and_the_report_says_so(aws: Aws) -> None:
    # Given the runtime reports a step 20% shorter than the model predicts (at the nominal network)
    _job(aws, "llm")
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=0.8 * _step_time(None, 15.0))
    # When the plan step runs
    report = _run(aws)
    # Then the job's model is fitted to its step time, and the report gives the factor and the fit's error
    assert report["calibrated"] == 1
    (calibration,) = report["calibrations"]
    assert calibration["job"] == "batch#llm"
    assert calibration["compute_factor"] > 1.25
    assert "fitted to the measured step" in calibration["fit"]
    assert "-> +0.0%" in calibration["fit"] or "-> -0.0%" in calibration["fit"]


def test_a_straggler_node_reaches_the_plan_step(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    # Given the runtime reports node 1 at 0.9 of the median rank, and the step time that slow node explains
    _job(aws, "llm")
    slow = cluster(64, instance_type="p4de.24xlarge").with_changes(
        speed_factors=[0.9 if 8 <= rank < 16 else 1.0 for rank in range(64)]
    )
    request = request_from_item(
        build_request("JOB#batch#x", model=MODEL, cluster="p4de.24xlarge", current=CURRENT)
    )
    step = evaluate(request.model, slow, CURRENT).step_time_s
    _runtime_metrics(aws, "llm", latency_us=15.0, step_time_s=step)
    _put(aws, "llm", "0", {"SlowestNodeSpeed": (0.9, "None"), "SlowestNodeIndex": (1.0, "None")})
    # When the plan step runs
    with caplog.at_level("INFO"):
        report = _run(aws)
    # Then the job is planned with node 1's GPUs at 0.9, nothing missing, and the slowdown is not taken for
    # the network's (the bandwidth stays nominal)
    assert (report["planned"], report["missingData"]) == (1, 0)
    (planned,) = [r for r in caplog.records if r.getMessage() == "job planned"]
    signals = planned.signals  # type: ignore[attr-defined]
    assert signals["speed_factors"]["source"] == "SlowestNodeSpeed"
    assert signals["speed_factors"]["value"] == pytest.approx(0.9)
    assert signals["network_gbits"]["source"] == "nominal"
