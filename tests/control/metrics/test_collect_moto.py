"""The collector against moto CloudWatch: seeded datapoints come back as DESIGN §3 raw values."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.derivation import compile_policy, derive
from osprey_control.metrics import collect
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.registry.model import Backend, JobStatus
from tests.control.metrics.helpers import NOW, host, instance, pod, record


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def put(
    client: Any, namespace: str, name: str, dims: dict[str, str], value: float, *, minutes_ago: float = 1
) -> None:
    client.put_metric_data(
        Namespace=namespace,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
                "Value": value,
                "Timestamp": NOW - timedelta(minutes=minutes_ago),
            }
        ],
    )


def test_batch_instance_metrics_come_from_the_cwagent_per_instance_rollup(cloudwatch: Any) -> None:
    # Given a Batch job on one instance whose agent publishes the InstanceId rollup
    job = record(Backend.BATCH, "job-1", [instance("i-0abc")])
    dims = {"InstanceId": "i-0abc"}
    put(cloudwatch, "CWAgent", "nvidia_smi_utilization_gpu", dims, 87.5)
    put(cloudwatch, "CWAgent", "nvidia_smi_utilization_memory", dims, 40.0)
    put(cloudwatch, "CWAgent", "nvidia_smi_memory_used", dims, 20000.0)
    put(cloudwatch, "CWAgent", "nvidia_smi_memory_total", dims, 80000.0)
    put(
        cloudwatch,
        "/aws/osprey",
        "InterconnectLatencyMicroseconds",
        {"Backend": "batch", "JobId": "job-1", "Host": "0"},
        120.0,
    )

    # When the shard is collected
    result = collect([job], client=cloudwatch, now=NOW)

    # Then every metric is in its raw unit, memory utilization is used/total in percent
    values = result.metrics[job.key].nodes[0].values
    assert values["gpu_utilization"] == pytest.approx(87.5)
    assert values["memory_bandwidth_utilization"] == pytest.approx(40.0)
    assert values["gpu_memory_utilization"] == pytest.approx(25.0)
    assert values["node_interconnect_latency"] == pytest.approx(120.0)
    assert values["spot_interruption_risk"] == 0.0
    assert result.problems == {}


def test_sagemaker_host_metrics_are_normalised_per_gpu(cloudwatch: Any) -> None:
    # Given a SageMaker job on two 8-GPU hosts; SageMaker reports the sum over the host's GPUs
    job = record(Backend.SAGEMAKER, "train-1", [host("algo-1", gpus=8), host("algo-2", gpus=8)])
    put(cloudwatch, "/aws/sagemaker/TrainingJobs", "GPUUtilization", {"Host": "train-1/algo-1"}, 720.0)
    put(cloudwatch, "/aws/sagemaker/TrainingJobs", "GPUMemoryUtilization", {"Host": "train-1/algo-1"}, 400.0)
    put(cloudwatch, "/aws/sagemaker/TrainingJobs", "GPUUtilization", {"Host": "train-1/algo-2"}, 800.0)

    # When collected
    result = collect([job], client=cloudwatch, now=NOW)

    # Then each host's value is a per-GPU percent, and algo-2's missing memory metric is absent (not zero)
    first, second = result.metrics[job.key].nodes
    assert first.values["gpu_utilization"] == pytest.approx(90.0)
    assert first.values["gpu_memory_utilization"] == pytest.approx(50.0)
    assert second.values["gpu_utilization"] == pytest.approx(100.0)
    assert "gpu_memory_utilization" not in second.values


def test_the_latest_datapoint_in_the_window_wins_and_older_ones_are_ignored(cloudwatch: Any) -> None:
    # Given two recent datapoints and one outside the default 5-minute window
    job = record(Backend.BATCH, "job-2", [instance("i-1"), instance("i-2")])
    put(cloudwatch, "CWAgent", "nvidia_smi_utilization_gpu", {"InstanceId": "i-1"}, 10.0, minutes_ago=3)
    put(cloudwatch, "CWAgent", "nvidia_smi_utilization_gpu", {"InstanceId": "i-1"}, 60.0, minutes_ago=1)
    put(cloudwatch, "CWAgent", "nvidia_smi_utilization_gpu", {"InstanceId": "i-2"}, 99.0, minutes_ago=30)

    # When collected
    result = collect([job], client=cloudwatch, now=NOW)

    # Then i-1 reports its latest value and i-2 has no GPU utilization at all
    first, second = result.metrics[job.key].nodes
    assert first.values["gpu_utilization"] == pytest.approx(60.0)
    assert "gpu_utilization" not in second.values


def test_eks_pods_use_container_insights_and_jobs_carry_queue_wait_and_spot_risk(cloudwatch: Any) -> None:
    # Given a pending EKS job with a spot warning on its node and a running pod with Container Insights data
    job = record(
        Backend.EKS,
        "team-a/train",
        [pod("train-0")],
        cluster="gpu",
        status=JobStatus.PENDING,
        submitted_at=NOW - timedelta(minutes=10),
        spot_risk={"train-0": 1.0},
    )
    dims = {"ClusterName": "gpu", "Namespace": "team-a", "PodName": "train-0"}
    put(cloudwatch, "ContainerInsights", "pod_gpu_utilization", dims, 55.0)

    # When collected
    result = collect([job], client=cloudwatch, now=NOW)

    # Then the pod's utilization, the job's queue wait in seconds and the spot risk are present
    metrics = result.metrics[job.key]
    assert metrics.nodes[0].values["gpu_utilization"] == pytest.approx(55.0)
    assert metrics.nodes[0].values["spot_interruption_risk"] == 1.0
    assert "gpu_memory_utilization" not in metrics.nodes[0].values
    assert metrics.job_values["queue_wait"] == pytest.approx(600.0)


def test_a_job_without_any_series_gets_no_values_rather_than_zeros(cloudwatch: Any) -> None:
    # Given a job whose instance publishes nothing
    job = record(Backend.BATCH, "job-3", [instance("i-silent")])

    # When collected
    result = collect([job], client=cloudwatch, now=NOW)

    # Then only the event-derived spot risk is there; no CloudWatch metric reads as zero
    assert dict(result.metrics[job.key].nodes[0].values) == {"spot_interruption_risk": 0.0}


@pytest.mark.parametrize("aggregation", ["mean", "min", "max"])
def test_a_4_node_jobs_interconnect_latency_derives_to_its_lead_hosts_value(
    cloudwatch: Any, aggregation: str
) -> None:
    # Given a 4-node Batch job whose lead (node 0) reports 120 µs, and older runtimes on nodes 1-3 that still
    # publish their own latency series
    job = record(Backend.BATCH, "job-4", [instance(f"i-{n}") for n in range(4)])
    for node, latency in (("0", 120.0), ("1", 900.0), ("2", 1500.0), ("3", 40.0)):
        put(cloudwatch, "/aws/osprey", "InterconnectLatencyMicroseconds",
            {"Backend": "batch", "JobId": "job-4", "Host": node}, latency)  # fmt: skip
    rule = {"metric": "node_interconnect_latency", "weight": 1.0, "scaling": "inverse",
            "minPriority": 1, "maxPriority": 50, "aggregation": aggregation}  # fmt: skip

    # When collected and derived with a latency rule aggregating over the nodes
    result = collect([job], client=cloudwatch, now=NOW)
    policy = PriorityDerivationPolicy.model_validate({
        "apiVersion": "osprey.aws/v1", "kind": "PriorityDerivationPolicy", "metadata": {"name": "latency"},
        "spec": {"derivationRules": [rule]},
    })  # fmt: skip
    decision = derive(compile_policy(policy), result.metrics[job.key], 25)

    # Then the rule reads the lead's value, whatever the aggregation; the other hosts' series are not read
    (explanation,) = decision.rules
    assert explanation.outcome == "used"
    assert explanation.value == pytest.approx(120.0)
    assert result.series == 1 + 4 * 4 + 1  # one latency, the agent's 4 per node, one RemainingSeconds
    latencies = [node.values.get("node_interconnect_latency") for node in result.metrics[job.key].nodes]
    assert latencies[0] == pytest.approx(120.0)
    assert all(value is None or value == pytest.approx(120.0) for value in latencies)
