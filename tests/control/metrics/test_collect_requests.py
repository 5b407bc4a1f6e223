"""The collector's GetMetricData requests, checked against the real service model with botocore's Stubber."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from osprey_control.catalog import gpus_for_instance_type
from osprey_control.metrics import QUERY_ID_PATTERN, CollectorConfig, collect
from osprey_control.registry.model import Backend, JobRecord
from tests.control.metrics.helpers import NOW, host, instance, pod, record

SERIES_PER_INSTANCE = 4  # the CloudWatch agent metrics
SERIES_PER_RUNNING_JOB = 2  # the runtime's, on the lead host: interconnect latency and RemainingSeconds


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber, list[dict[str, Any]]]]:
    client = boto3.client("cloudwatch", region_name="us-east-1")
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.monitoring.GetMetricData", lambda params, **_: sent.append(params)
    )
    with Stubber(client) as stubber:
        yield client, stubber, sent
        stubber.assert_no_pending_responses()


def fleet(jobs: int, instances_per_job: int) -> list[JobRecord]:
    return [
        record(Backend.BATCH, f"job-{j}", [instance(f"i-{j}-{n}") for n in range(instances_per_job)])
        for j in range(jobs)
    ]


def expect(stubber: Stubber, results: list[dict[str, Any]], token: str | None = None) -> None:
    response: dict[str, Any] = {"MetricDataResults": results}
    if token:
        response["NextToken"] = token
    expected = {"MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending"}
    stubber.add_response("get_metric_data", response, expected)


def point(query_id: str, value: float, status: str = "Complete") -> dict[str, Any]:
    return {
        "Id": query_id,
        "Timestamps": [NOW - timedelta(minutes=1)],
        "Values": [value],
        "StatusCode": status,
    }


def test_s_series_take_exactly_ceil_s_over_500_calls_with_valid_unique_ids(stubbed: Any) -> None:
    client, stubber, sent = stubbed
    # Given 1100 series (264 instances, 4 series each, and 22 running jobs' latency and remaining time)
    records = fleet(jobs=22, instances_per_job=12)
    series = 22 * 12 * SERIES_PER_INSTANCE + 22 * SERIES_PER_RUNNING_JOB
    for _ in range(math.ceil(series / 500)):
        expect(stubber, [])

    # When collected
    result = collect(records, client=client, now=NOW)

    # Then three calls were made, none with more than 500 queries, every id valid and unique per call
    assert result.series == series == 1100
    assert result.calls == len(sent) == 3
    assert [len(call["MetricDataQueries"]) for call in sent] == [500, 500, 100]
    for call in sent:
        ids = [query["Id"] for query in call["MetricDataQueries"]]
        assert len(set(ids)) == len(ids)
        assert all(QUERY_ID_PATTERN.match(query_id) for query_id in ids)
        assert call["EndTime"] - call["StartTime"] == timedelta(minutes=5)
        assert {query["MetricStat"]["Period"] for query in call["MetricDataQueries"]} == {60}


def test_next_token_pages_are_followed_and_merged(stubbed: Any) -> None:
    client, stubber, sent = stubbed
    # Given one instance whose GPU utilization arrives across two pages (PartialData, then the rest)
    job = record(Backend.BATCH, "job-p", [instance("i-p")])
    expect(stubber, [point("q0", 30.0, "PartialData")], token="page-2")
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [point("q1", 45.0)]},
        {"MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": ANY, "NextToken": "page-2"},
    )

    # When collected
    result = collect([job], client=client, now=NOW)

    # Then both pages' values are used, with the same queries resent with the token
    values = result.metrics[job.key].nodes[0].values
    assert values["gpu_utilization"] == 30.0
    assert values["memory_bandwidth_utilization"] == 45.0
    assert result.calls == 2
    assert sent[0]["MetricDataQueries"] == sent[1]["MetricDataQueries"]
    assert result.problems == {}


def test_partial_data_on_the_last_page_keeps_values_and_records_a_problem(stubbed: Any) -> None:
    client, stubber, _ = stubbed
    job = record(Backend.BATCH, "job-q", [instance("i-q")])
    expect(
        stubber,
        [
            point("q0", 70.0, "PartialData"),
            {"Id": "q1", "Timestamps": [], "Values": [], "StatusCode": "InternalError"},
        ],
    )

    result = collect([job], client=client, now=NOW)

    values = result.metrics[job.key].nodes[0].values
    assert values["gpu_utilization"] == 70.0
    assert "memory_bandwidth_utilization" not in values
    assert {problem.kind for problem in result.problems[job.key]} == {"partial-data", "series-error"}


def test_a_throttled_chunk_costs_only_its_own_jobs_their_data(stubbed: Any) -> None:
    client, stubber, _ = stubbed
    # Given 2 jobs of 125 instances (502 series each): job-0 fills chunk one and starts chunk two
    records = fleet(jobs=2, instances_per_job=125)
    stubber.add_client_error("get_metric_data", "Throttling", "Rate exceeded", 400)
    expect(stubber, [point("q502", 64.0)])
    expect(stubber, [])

    # When the first chunk is throttled (after botocore's retries)
    result = collect(records, client=client, now=NOW)

    # Then job-0 has no CloudWatch data and a transient problem; job-1 still has its value
    first, second = records
    assert all(set(node.values) == {"spot_interruption_risk"} for node in result.metrics[first.key].nodes)
    [problem] = result.problems[first.key]
    assert problem.kind == "chunk-failed"
    assert problem.transient
    assert result.metrics[second.key].nodes[0].values["gpu_utilization"] == 64.0
    assert second.key not in result.problems


def test_query_shapes_name_the_documented_dimensions(stubbed: Any) -> None:
    client, stubber, sent = stubbed
    job = record(Backend.SAGEMAKER_QUEUED, "svc-job-id", [host("algo-1")], name="train-q")
    expect(stubber, [point("q0", 400.0)])

    # When a queued SageMaker job on a p4d host is collected (instance type from the caller)
    result = collect([job], client=client, now=NOW, instance_type=lambda _record, _node: "ml.p4d.24xlarge")

    queries = {
        q["MetricStat"]["Metric"]["MetricName"]: q["MetricStat"]["Metric"]
        for q in sent[0]["MetricDataQueries"]
    }
    assert queries["GPUUtilization"]["Dimensions"] == [{"Name": "Host", "Value": "train-q/algo-1"}]
    assert queries["InterconnectLatencyMicroseconds"] == {
        "Namespace": "/aws/osprey",
        "MetricName": "InterconnectLatencyMicroseconds",
        "Dimensions": [
            {"Name": "Backend", "Value": "sagemaker"},
            {"Name": "JobId", "Value": "train-q"},
            {"Name": "Host", "Value": "algo-1"},
        ],
    }
    assert result.metrics[job.key].nodes[0].values["gpu_utilization"] == pytest.approx(50.0)


def test_a_host_with_unknown_gpu_count_is_reported_not_guessed() -> None:
    # Given a SageMaker host with no GPU count and no instance type
    job = record(Backend.SAGEMAKER, "train-x", [host("algo-1")])

    # When collected (only the latency series is queryable, and an empty stub answers it)
    client = boto3.client("cloudwatch", region_name="us-east-1")
    with Stubber(client) as stubber:
        expect(stubber, [])
        result = collect([job], client=client, now=NOW, config=CollectorConfig(window_seconds=600))

    # Then the problem says how to fix it, and no utilization is invented
    [problem] = result.problems[job.key]
    assert problem.kind == "gpus-unknown"
    assert "NodeRef.gpus" in problem.message
    assert "gpu_utilization" not in result.metrics[job.key].nodes[0].values
    assert gpus_for_instance_type("ml.p5.48xlarge") == 8
    assert gpus_for_instance_type("g5.xlarge") == 1
    assert gpus_for_instance_type("x1.large") is None


def test_no_jobs_means_no_calls() -> None:
    result = collect([], client=object(), now=NOW)
    assert result.calls == 0
    assert result.metrics == {}


@pytest.mark.parametrize(
    ("backend", "native_id", "nodes", "lead"),
    [
        (Backend.BATCH, "job-4", [instance(f"i-{n}") for n in range(4)], "0"),
        (Backend.SAGEMAKER, "train-4", [host(f"train-4/algo-{n}", gpus=8) for n in range(1, 5)], "algo-1"),
        (Backend.EKS, "team-a/ddp", [pod(f"ddp-{n}") for n in range(4)], "ddp-0"),
    ],
)
def test_a_4_node_job_is_read_with_one_latency_and_one_remaining_query_on_its_lead_host(
    stubbed: Any, backend: Backend, native_id: str, nodes: list[Any], lead: str
) -> None:
    client, stubber, sent = stubbed
    # Given a running 4-node job
    job = record(backend, native_id, nodes, cluster="gpu" if backend is Backend.EKS else None)
    expect(stubber, [])

    # When collected (no needs: every series the collector knows)
    collect([job], client=client, now=NOW)

    # Then the runtime's series are one latency and one RemainingSeconds query, both on the lead host
    runtime = [
        query["MetricStat"] for query in sent[0]["MetricDataQueries"]
        if query["MetricStat"]["Metric"]["Namespace"] == "/aws/osprey"
    ]  # fmt: skip
    assert sorted((stat["Metric"]["MetricName"], stat["Stat"]) for stat in runtime) == [
        ("InterconnectLatencyMicroseconds", "Average"),
        ("RemainingSeconds", "Minimum"),
    ]
    assert {tuple((d["Name"], d["Value"]) for d in stat["Metric"]["Dimensions"]) for stat in runtime} == {
        (("Backend", backend.value), ("JobId", native_id), ("Host", lead))
    }
    names = {query["MetricStat"]["Metric"]["MetricName"] for query in sent[0]["MetricDataQueries"]}
    assert names.isdisjoint({"TrainingStep", "TrainingTotalSteps", "StepTimeSeconds"})
