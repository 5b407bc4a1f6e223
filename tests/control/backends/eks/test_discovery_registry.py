"""Given Osprey jobs on a cluster (the fake Kubernetes API server), when the discovery Lambda's logic runs with
the registry (moto DynamoDB), then each job is recorded through the same convergent merge as ingested events,
with its kind, labels, pods and their instances, a repeated pass writes nothing, and a relabel is picked up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

import osprey_handlers.eks_discovery as entry
from osprey_control.backends.eks import KubernetesClient
from osprey_control.backends.eks.discovery_run import run_discovery
from osprey_control.backends.eks.settings import EksDiscoveryEnvironment
from osprey_control.registry import Backend, JobKey, JobStatus, NodeKind
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import OSPREY_LABELS, add_job, add_workload

TRAIN = JobKey(Backend.EKS, "gpu/ml/train/uid-train")  # <cluster>/<namespace>/<name>/<uid>
ENV = EksDiscoveryEnvironment(cluster_names=("gpu",))


@pytest.fixture
def registry() -> Iterator[JobRegistry]:
    with mock_aws():
        registry = JobRegistry(
            "osprey-jobs", client=boto3.client("dynamodb", region_name="us-east-1"), shards=2
        )
        registry.create_table()
        yield registry


def running_job(fake: FakeKubernetes, labels: dict[str, str] = OSPREY_LABELS, changed: str = "00:03") -> None:
    job = add_job(
        fake, "train", labels=labels, status={"active": 1, "ready": 1, "startTime": "2026-01-01T00:02:00Z"}
    )
    stored = fake.objects[("batch/v1", "jobs")][("ml", "train")]
    stored["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
        {"manager": "kube-controller-manager", "subresource": "status", "time": f"2026-01-01T{changed}:00Z"},
    ]
    add_workload(fake, job, priority=200)


def test_discovered_jobs_are_recorded_with_kind_labels_and_nodes(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    # Given a running labelled Job whose pod runs on a p4d node
    running_job(fake_k8s)
    fake_k8s.add("v1", "pods", {"kind": "Pod", "metadata": {
        "name": "train-0", "namespace": "ml", "labels": {**OSPREY_LABELS, "batch.kubernetes.io/job-name": "train"}},
        "spec": {"nodeName": "ip-10-0-0-1"}})  # fmt: skip
    fake_k8s.add("v1", "nodes", {"kind": "Node", "metadata": {"name": "ip-10-0-0-1",
        "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0abc123"}})  # fmt: skip
    # When discovery runs with the registry
    result = run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    # Then the job is an active registry record, with what the cycle and the CLI need
    assert (result["unrecorded"], result["recorded"]) == (0, 1)
    record = registry.get(TRAIN)
    assert record is not None
    assert (record.kind, record.cluster, record.status, record.policy) == (
        "Job",
        "gpu",
        JobStatus.RUNNING,
        "training-policy",
    )
    assert record.tags == OSPREY_LABELS
    assert [(n.kind, n.node_id, n.instance_id, n.instance_type) for n in record.nodes] == [
        (NodeKind.POD, "train-0", "i-0abc123", "p4d.24xlarge")
    ]
    assert record.status_time.isoformat() == "2026-01-01T00:02:00+00:00"  # the job's own start, not the poll
    assert [job.key for job in registry.list_active()] == [TRAIN]


def test_a_repeated_pass_writes_nothing_and_a_relabel_is_picked_up(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    running_job(fake_k8s)
    run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    first = registry.get(TRAIN)
    assert first is not None
    # When the same cluster state is discovered again
    run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    # Then nothing is written (the version counts effective writes)
    again = registry.get(TRAIN)
    assert again is not None
    assert again.version == first.version
    # When the user moves the job to another policy (a newer change of the object)
    running_job(fake_k8s, labels={**OSPREY_LABELS, "osprey.aws/policy": "aging-policy"}, changed="00:09")
    run_discovery(ENV, connector=lambda _: k8s_client, registry=registry)
    # Then the registry follows it
    moved = registry.get(TRAIN)
    assert moved is not None
    assert (moved.policy, moved.tags["osprey.aws/policy"], moved.version) == (
        "aging-policy",
        "aging-policy",
        first.version + 1,
    )


class FlakyRegistry:
    """Fails the write of one job, passes the others to the real registry."""

    def __init__(self, registry: JobRegistry, broken: str) -> None:
        self.registry, self.broken = registry, broken
        self.list_active = registry.list_active
        self.update = registry.update

    @property
    def events(self) -> Any:
        return self.registry.events

    def apply_observation(self, observation: JobObservation) -> Any:
        if observation.native_id == self.broken:
            raise RuntimeError("ProvisionedThroughputExceededException after retries")
        return self.registry.apply_observation(observation)


def test_every_changed_record_goes_to_the_gang_starter_once(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    # Given a discovered job and a gang starter (what the handler wires when gangs are deployed)
    running_job(fake_k8s)
    started: list[JobKey] = []
    # When discovery runs twice over an unchanged cluster
    for _ in range(2):
        run_discovery(
            ENV, connector=lambda _: k8s_client, registry=registry, on_change=lambda r: started.append(r.key)
        )
    # Then the starter saw the job once: only a write that changed the record calls it
    assert started == [TRAIN]


def test_the_handler_starts_gang_watches_only_when_gangs_are_deployed() -> None:
    base = {"OSPREY_EKS_CLUSTERS": "gpu", "OSPREY_TABLE_NAME": "osprey-jobs"}
    assert entry._gangs(EksDiscoveryEnvironment.from_environ(base)) is None
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:gangs"
    deployed = EksDiscoveryEnvironment.from_environ({**base, "OSPREY_GANG_STATE_MACHINE_ARN": arn})
    assert deployed.policy_prefix == "/osprey/policies"
    assert callable(entry._gangs(deployed))


def test_one_jobs_failed_write_is_reported_and_the_others_recorded(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient, registry: JobRegistry
) -> None:
    running_job(fake_k8s)
    add_job(fake_k8s, "eval")
    result = run_discovery(
        ENV, connector=lambda _: k8s_client, registry=FlakyRegistry(registry, "gpu/ml/eval/uid-eval")
    )
    assert result["unrecorded"] == 1
    assert result["unrecorded_sample"] == [
        {
            "job": "eks#gpu/ml/eval/uid-eval",
            "error": "RuntimeError: ProvisionedThroughputExceededException after retries",
        }
    ]
    assert registry.get(TRAIN) is not None
    assert registry.get(JobKey(Backend.EKS, "gpu/ml/eval/uid-eval")) is None
    assert (result["jobs"], result["recorded"]) == (2, 1)


def test_the_environment_names_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    env = EksDiscoveryEnvironment.from_environ(
        {"OSPREY_EKS_CLUSTERS": "gpu", "OSPREY_TABLE_NAME": "osprey-jobs", "OSPREY_REGISTRY_SHARDS": "4"}
    )
    assert (env.table_name, env.shards) == ("osprey-jobs", 4)
    assert EksDiscoveryEnvironment.from_environ({"OSPREY_EKS_CLUSTERS": "gpu"}).table_name is None
