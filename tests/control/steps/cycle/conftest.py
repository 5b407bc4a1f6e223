"""Shared setup for cycle tests: moto DynamoDB, SSM and CloudWatch with the shipped policies deployed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.contract import parse_block
from osprey_control.policy import load_policies
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.registry import Backend, JobKey, JobStatus, NodeKind, NodeRef
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from tests.conftest import REPO_ROOT

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        clients: dict[str, Any] = {
            name: boto3.client(name, region_name="us-east-1") for name in ("dynamodb", "ssm", "cloudwatch")
        }
        for policy in load_policies([REPO_ROOT / "policies"]):
            clients["ssm"].put_parameter(
                Name=f"/osprey/policies/{policy.name}", Value=policy_parameter_value(policy), Type="String"
            )
        registry = JobRegistry("osprey-jobs", client=clients["dynamodb"], shards=1)
        registry.create_table()
        yield {**clients, "registry": registry}


def register(registry: JobRegistry, job_id: str, instance: str) -> JobKey:
    observation = JobObservation(
        backend=Backend.BATCH,
        native_id=job_id,
        name=job_id,
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.RUNNING,
        event_time=NOW - timedelta(minutes=10),
        submitted_at=NOW - timedelta(minutes=20),
        nodes=(NodeRef(node_id=instance, kind=NodeKind.INSTANCE, instance_id=instance),),
    )
    registry.apply_observation(observation)
    return observation.key


def gpu_metrics(cloudwatch: Any, instance: str, gpu: float, memory_bw: float) -> None:
    dims = [{"Name": "InstanceId", "Value": instance}]
    cloudwatch.put_metric_data(
        Namespace="CWAgent",
        MetricData=[
            {"MetricName": name, "Dimensions": dims, "Value": value, "Timestamp": NOW - timedelta(minutes=1)}
            for name, value in (
                ("nvidia_smi_utilization_gpu", gpu),
                ("nvidia_smi_utilization_memory", memory_bw),
            )
        ],
    )
