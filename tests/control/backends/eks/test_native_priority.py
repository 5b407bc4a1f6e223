"""Given a Kueue-managed job (the fake Kubernetes API server), when discovery records it (moto DynamoDB), then
its Workload's ``spec.priority`` (its WorkloadPriorityClass's value) is the job's native priority, and once
Osprey has applied its own priority to that Workload a later pass keeps the job's own value."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import PriorityChange
from osprey_control.backends.eks import EksApplier, KubernetesClient
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.dynamodb import JobRegistry
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_workload

ENV = EksDiscoveryEnvironment(cluster_names=("gpu",))
KEY = JobKey(Backend.EKS, "gpu/ml/train/uid-train")


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-jobs", client=boto3.client("dynamodb", region_name="us-east-1"), shards=2
        )
        registry.create_table()
        yield registry


def test_the_workload_priority_is_recorded_and_kept_after_osprey_writes(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    # Given a Job whose Workload was created at its priority class's value, 300
    job = add_job(fake_k8s, "train", status={"active": 1, "startTime": "2026-01-01T00:02:00Z"})
    workload = add_workload(fake_k8s, job, priority=300)
    # When discovery records it
    run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    record = registry.get(KEY)
    assert record is not None
    # Then that value is the job's native priority
    assert record.native_priority == 300

    # And when Osprey applies priority 80 (Workload spec.priority 800) and discovery runs again
    report = EksApplier(lambda _: k8s_client).apply([PriorityChange(record, 80)])
    assert report.results[0].native_value == "800"
    registry.record_applied(KEY, 80, datetime.now(UTC))
    assert fake_k8s.stored(KUEUE, "workloads", "ml", workload["metadata"]["name"])["spec"]["priority"] == 800
    run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    # Then the registry still says 300: the 800 it now reads is Osprey's, not the job's
    again = registry.get(KEY)
    assert again is not None
    assert again.native_priority == 300
