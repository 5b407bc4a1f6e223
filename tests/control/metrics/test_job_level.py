"""The job-level metrics (DESIGN §3) the collector fills in: attained_service from the registry's allocation
history, remaining_time from the runtime's progress (moto CloudWatch) or the job's budget, requested_gpus from
its description, and nothing at all where nothing says."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from osprey_control.contract import parse_block
from osprey_control.metrics import collect
from osprey_control.registry.allocation import AllocationMark, Allocations
from osprey_control.registry.model import Backend, JobStatus
from tests.control.metrics.helpers import NOW, host, instance, record

LEAD = {"Backend": "batch", "JobId": "job-1", "Host": "0"}


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def put(client: Any, name: str, value: float, *, dims: dict[str, str] = LEAD, minutes_ago: float = 2) -> None:
    client.put_metric_data(
        Namespace="/aws/osprey",
        MetricData=[{
            "MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
            "Value": value, "Timestamp": NOW - timedelta(minutes=minutes_ago),
        }],
    )  # fmt: skip


def history(*spans: tuple[float, float | None, int | None]) -> Allocations:
    """Allocations from (start, end, gpus) in minutes before NOW (end None: still running)."""
    allocations = Allocations()
    for start, end, gpus in spans:
        allocations = allocations.with_mark(
            AllocationMark(at=NOW - timedelta(minutes=start), running=True, gpus=gpus)
        )
        if end is not None:
            allocations = allocations.with_mark(
                AllocationMark(at=NOW - timedelta(minutes=end), running=False)
            )
    return allocations


def test_given_a_running_job_with_progress_when_collected_then_remaining_time_comes_from_it(
    cloudwatch: Any,
) -> None:
    # Given: a job on 8 GPUs since 90 minutes ago, after an earlier 30-minute attempt on 8 GPUs, whose runtime
    # reported step 400 of 1000 at 3 s per step two minutes ago: RemainingSeconds 600 x 3
    job = record(
        Backend.BATCH, "job-1", [instance("i-0abc")], requested_gpus=8, declared_runtime_s=86400,
        allocations=history((180, 150, 8), (90, None, 8)), submitted_at=NOW - timedelta(hours=4),
    )  # fmt: skip
    put(cloudwatch, "RemainingSeconds", 600 * 3.0)

    # When
    result = collect([job], client=cloudwatch, now=NOW)

    # Then: 2 h on 8 GPUs = 16 GPU-hours; 600 steps x 3 s, less the minute since the end of the report's period
    values = result.metrics[job.key].job_values
    assert values["attained_service"] == pytest.approx(16.0)
    assert values["remaining_time"] == pytest.approx(600 * 3.0 - 60.0)
    assert values["requested_gpus"] == 8.0
    assert values["queue_wait"] == 4 * 3600.0
    assert "remaining_seconds" not in result.metrics[job.key].nodes[0].values


def test_given_two_reports_in_one_period_when_collected_then_the_latest_smaller_one_is_used(
    cloudwatch: Any,
) -> None:
    # Given: a running job that reported 1900 s left, then 1800 s left 18 s later, in the same minute
    job = record(Backend.BATCH, "job-1", [instance("i-0abc")], declared_runtime_s=86400)
    put(cloudwatch, "RemainingSeconds", 1900.0, minutes_ago=2.5)
    put(cloudwatch, "RemainingSeconds", 1800.0, minutes_ago=2.2)

    # When
    result = collect([job], client=cloudwatch, now=NOW)

    # Then: the period's Minimum, less the two minutes since that period's end (not the 1850 s average)
    assert result.metrics[job.key].job_values["remaining_time"] == pytest.approx(1800.0 - 120.0)


def test_given_no_progress_when_collected_then_the_budget_minus_held_time_is_used(cloudwatch: Any) -> None:
    # Given: two running jobs without reports, one with its own estimate, one with only the Batch timeout
    estimated = record(
        Backend.BATCH, "job-e", [instance("i-1")], requested_gpus=4, declared_runtime_s=86400,
        block=parse_block({"priority_derivation_profile": "training-policy", "expected_runtime": 7200}),
        allocations=history((30, None, 4)),
    )  # fmt: skip
    limited = record(
        Backend.BATCH,
        "job-l",
        [instance("i-2")],
        declared_runtime_s=86400,
        allocations=history((60, None, 2)),
    )

    # When
    result = collect([estimated, limited], client=cloudwatch, now=NOW)

    # Then: the user's estimate wins over the limit; both less what they have held
    assert result.metrics[estimated.key].job_values["remaining_time"] == pytest.approx(7200 - 1800)
    assert result.metrics[limited.key].job_values["remaining_time"] == pytest.approx(86400 - 3600)
    assert result.metrics[limited.key].job_values["attained_service"] == pytest.approx(2.0)
    assert "requested_gpus" not in result.metrics[limited.key].job_values


def test_given_a_queued_job_when_collected_then_it_has_values_and_no_progress_queries() -> None:
    # Given: a job never started, asking for 16 GPUs with an expected runtime of 2 h
    job = record(
        Backend.SAGEMAKER, "train-q", [host("train-q/algo-1", gpus=8), host("train-q/algo-2", gpus=8)],
        status=JobStatus.PENDING, requested_gpus=16,
        block=parse_block({"priority_derivation_profile": "training-policy", "expected_runtime": 7200}),
    )  # fmt: skip
    client = boto3.client("cloudwatch", region_name="us-east-1")
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.monitoring.GetMetricData", lambda params, **_: sent.append(params)
    )

    # When (the Stubber checks the request against the real CloudWatch model)
    with Stubber(client) as stubber:
        stubber.add_response(
            "get_metric_data",
            {"MetricDataResults": []},
            {"MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending"},
        )
        result = collect([job], client=client, now=NOW)

    # Then: 0 GPU-hours (it never ran), its whole budget, its GPUs; and no progress series were asked for
    assert result.metrics[job.key].job_values == {
        "attained_service": 0.0,
        "remaining_time": 7200.0,
        "requested_gpus": 16.0,
    }
    names = {query["MetricStat"]["Metric"]["MetricName"] for query in sent[0]["MetricDataQueries"]}
    assert names.isdisjoint({"RemainingSeconds", "TrainingStep", "TrainingTotalSteps", "StepTimeSeconds"})


def test_given_a_running_sagemaker_job_when_collected_then_progress_is_read_from_its_lead_host() -> None:
    # Given: a running SageMaker job on two hosts
    job = record(
        Backend.SAGEMAKER, "train-r", [host("train-r/algo-1", gpus=8), host("train-r/algo-2", gpus=8)]
    )
    client = boto3.client("cloudwatch", region_name="us-east-1")
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.monitoring.GetMetricData", lambda params, **_: sent.append(params)
    )

    # When
    with Stubber(client) as stubber:
        stubber.add_response("get_metric_data", {"MetricDataResults": []}, {
            "MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending"})  # fmt: skip
        collect([job], client=client, now=NOW)

    # Then: one MetricStat query, once per job, on algo-1 with the runtime's exact dimensions
    progress = [q["MetricStat"] for q in sent[0]["MetricDataQueries"]
                if q["MetricStat"]["Metric"]["MetricName"] == "RemainingSeconds"]  # fmt: skip
    assert [(stat["Metric"]["MetricName"], stat["Stat"]) for stat in progress] == [
        ("RemainingSeconds", "Minimum")
    ]
    assert [tuple((d["Name"], d["Value"]) for d in stat["Metric"]["Dimensions"]) for stat in progress] == [
        (("Backend", "sagemaker"), ("JobId", "train-r"), ("Host", "algo-1"))
    ]


def test_given_missing_data_when_collected_then_values_are_absent_never_zero(cloudwatch: Any) -> None:
    # Given: a running job written before histories were kept (no marks), no GPUs, no limits, and only the
    # progress series of an older runtime (step, total, step time; no RemainingSeconds); and a job whose
    # interval's GPU count is unknown
    legacy = record(Backend.BATCH, "job-1", [instance("i-0abc")])
    put(cloudwatch, "TrainingStep", 400)
    put(cloudwatch, "TrainingTotalSteps", 1000)
    put(cloudwatch, "StepTimeSeconds", 3.0)
    unknown = record(Backend.BATCH, "job-u", [instance("i-1")], allocations=history((30, None, None)))

    # When
    result = collect([legacy, unknown], client=cloudwatch, now=NOW)

    # Then
    assert result.metrics[legacy.key].job_values == {}
    assert result.metrics[unknown.key].job_values == {}
