"""Discovery of Osprey jobs through the Kubernetes API (fake server on 127.0.0.1)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from osprey_control.backends.eks import DiscoveryResult, EksObservation, KubernetesClient, discover
from osprey_control.registry.model import Backend, JobStatus, NodeKind
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import (
    OSPREY_LABELS,
    add_job,
    add_jobset,
    add_pytorchjob,
    add_workload,
    condition,
)


def _by_name(result: DiscoveryResult) -> dict[str, EksObservation]:
    return {obs.name: obs for obs in result.observations}


def test_batch_jobs_are_discovered_with_their_workload_pods_and_instances(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a labelled running Job admitted by Kueue, its pod on a node, and an unlabelled Job
    job = add_job(fake_k8s, "train", status={"active": 2, "ready": 1, "startTime": "2026-01-01T00:02:00Z"})
    add_workload(fake_k8s, job, priority=250)
    add_job(fake_k8s, "other", labels={})
    fake_k8s.add("v1", "pods", {"kind": "Pod", "metadata": {
        "name": "train-0-abc", "namespace": "ml",
        "labels": {**OSPREY_LABELS, "batch.kubernetes.io/job-name": "train"}}, "spec": {"nodeName": "ip-10-0-0-1"}})  # fmt: skip
    fake_k8s.add("v1", "nodes", {"kind": "Node", "metadata": {"name": "ip-10-0-0-1"},
                                 "spec": {"providerID": "aws:///us-east-1a/i-0abc123"}})  # fmt: skip
    # When the cluster is discovered
    result = discover(k8s_client, "gpu")
    # Then only the labelled Job is observed, running, linked to its Workload, with its pod and instance
    assert result.kueue_version == "v1beta1"
    [obs] = result.observations
    assert (obs.native_id, obs.kind, obs.status) == ("gpu/ml/train/uid-train", "Job", JobStatus.RUNNING)
    assert obs.workload is not None
    assert obs.workload.priority == 250
    assert obs.workload.admitted
    assert [(n.kind, n.node_id, n.instance_id) for n in obs.nodes] == [
        (NodeKind.POD, "train-0-abc", "i-0abc123")
    ]
    assert obs.status_time == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    # And a JobRecord can be built from it, and the observation is JSON-able
    record = obs.to_record()
    assert (record.backend, record.native_id, record.cluster, record.policy) == (
        Backend.EKS, "gpu/ml/train/uid-train", "gpu", "training-policy")  # fmt: skip
    assert obs.to_dict()["workload"]["name"] == "job-train-1a2b3"


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([condition("Created")], JobStatus.STARTING),
        ([condition("Created"), condition("Running")], JobStatus.RUNNING),
        ([condition("Running"), condition("Succeeded")], JobStatus.SUCCEEDED),
        ([condition("Failed")], JobStatus.FAILED),
        ([condition("Created"), condition("Suspended")], JobStatus.PENDING),
    ],
)
def test_pytorchjob_status_follows_its_conditions(
    fake_k8s: FakeKubernetes,
    k8s_client: KubernetesClient,
    conditions: list[dict[str, Any]],
    expected: JobStatus,
) -> None:
    # Given a PyTorchJob with these conditions (cluster without Kueue)
    fake_k8s.kueue_versions = ()
    add_pytorchjob(fake_k8s, "pt", conditions)
    # When discovered, Then its status is mapped and the annotation part of the block is read
    [obs] = discover(k8s_client, "gpu", include_pods=False).observations
    assert obs.status is expected
    assert obs.block.co_schedule is True
    assert obs.workload is None


def test_jobsets_are_discovered_and_their_child_jobs_are_not_separate_jobs(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a JobSet whose child Job carries the Osprey labels too
    jobset = add_jobset(fake_k8s, "js", ready=0, active=4)
    fake_k8s.add("batch/v1", "jobs", {"kind": "Job", "metadata": {
        "name": "js-workers-0", "namespace": "ml", "labels": OSPREY_LABELS,
        "ownerReferences": [{"kind": "JobSet", "name": "js", "uid": jobset["metadata"]["uid"]}]}, "status": {"active": 4}})  # fmt: skip
    add_workload(fake_k8s, jobset, priority=None, admitted=True)
    # When discovered
    observed = _by_name(discover(k8s_client, "gpu"))
    # Then the JobSet is one job, starting, with its Workload; its child Job is not listed on its own
    assert set(observed) == {"js"}
    assert observed["js"].status is JobStatus.STARTING
    assert observed["js"].workload is not None
    assert observed["js"].workload.priority is None


def test_unadmitted_workload_means_pending_and_terminal_conditions_win(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given a suspended Job waiting for Kueue and a completed one
    waiting = add_job(fake_k8s, "waiting", suspend=True)
    add_workload(fake_k8s, waiting, admitted=False)
    add_job(fake_k8s, "done", status={"conditions": [condition("Complete", "2026-01-02T00:00:00Z")]})
    # When discovered
    observed = _by_name(discover(k8s_client, "gpu", include_pods=False))
    # Then the statuses and their times follow the documented mapping
    assert observed["waiting"].status is JobStatus.PENDING
    assert observed["waiting"].submitted_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert observed["done"].status is JobStatus.SUCCEEDED
    assert observed["done"].status_time == datetime(2026, 1, 2, tzinfo=UTC)


def test_listing_follows_continue_pages_and_missing_crds_are_normal(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given five labelled Jobs, a server that pages two at a time, no Kueue and no PyTorchJob/JobSet CRDs
    fake_k8s.kueue_versions = ()
    fake_k8s.page_size_cap = 2
    for index in range(5):
        add_job(fake_k8s, f"j{index}")
    # When discovered
    result = discover(k8s_client, "gpu", include_pods=False)
    # Then all five are found over several pages, and the absent kinds are only noted
    assert sorted(_by_name(result)) == ["j0", "j1", "j2", "j3", "j4"]
    job_lists = [p for m, p in fake_k8s.requests if p == "/apis/batch/v1/jobs"]
    assert len(job_lists) == 3
    assert result.kueue_version is None
    assert result.kinds_missing == ["kubeflow.org/v1/PyTorchJob", "jobset.x-k8s.io/v1alpha2/JobSet"]


def test_v1beta2_is_preferred_when_served(fake_k8s: FakeKubernetes, k8s_client: KubernetesClient) -> None:
    # Given a cluster serving both Kueue versions and a Workload stored as v1beta2
    fake_k8s.kueue_versions = ("v1beta2", "v1beta1")
    job = add_job(fake_k8s, "train")
    workload = add_workload(fake_k8s, job, priority=7, version="kueue.x-k8s.io/v1beta2")
    fake_k8s.objects[("kueue.x-k8s.io/v1beta2", "workloads")][("ml", workload["metadata"]["name"])]["spec"][
        "priorityClassRef"
    ] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    # When discovered, Then v1beta2 is used
    [obs] = discover(k8s_client, "gpu", include_pods=False).observations
    assert obs.kueue_version == "v1beta2"
    assert obs.workload is not None
    assert obs.workload.priority == 7
    assert obs.workload.priority_class == "high"


def test_an_invalid_block_is_a_problem_not_a_failure(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given one Job with a bad gang timeout next to a good one
    add_job(fake_k8s, "bad", annotations={"osprey.aws/gang-timeout": "soon"})
    add_job(fake_k8s, "good")
    # When discovered
    result = discover(k8s_client, "gpu", include_pods=False)
    # Then the good one is observed and the bad one reported with the offending key
    assert list(_by_name(result)) == ["good"]
    [problem] = result.problems
    assert problem.object == "Job ml/bad"
    assert "osprey.aws/gang-timeout" in problem.message
