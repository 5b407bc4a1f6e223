"""Given Kubernetes job objects, when discovered, then the GPUs they ask for come from their pod templates (so a
job Kueue keeps suspended has them too), else from their pods, and activeDeadlineSeconds is the runtime limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from osprey_control.backends.eks import KubernetesClient, discover
from osprey_control.backends.eks.requests import job_declared_runtime, job_requested_gpus
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import OSPREY_LABELS, add_job, metadata


def _template(gpus: str | None, *, requests_only: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources = (
            {"requests": {"nvidia.com/gpu": gpus}} if requests_only else {"limits": {"nvidia.com/gpu": gpus}}
        )
    return {"spec": {"containers": [{"name": "train", "image": "t", "resources": resources}],
                     "initContainers": [{"name": "init", "image": "t", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        ("Job", {"parallelism": 4, "template": _template("8")}, 32),
        ("Job", {"parallelism": 4, "completions": 2, "template": _template("8")}, 16),
        ("Job", {"template": _template("2", requests_only=True)}, 2),
        ("Job", {"parallelism": 4, "template": _template(None)}, None),
        ("PyTorchJob", {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _template("8")},
                                                 "Worker": {"replicas": 3, "template": _template("8")}}}, 32),
        ("JobSet", {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
            "parallelism": 2, "template": _template("4")}}}]}, 16),
    ],
)  # fmt: skip
def test_given_a_job_kind_when_counting_gpus_then_templates_times_replicas_without_init_containers(
    kind: str, spec: dict[str, Any], expected: int | None
) -> None:
    assert job_requested_gpus(kind, {"spec": spec}) == expected


def test_given_deadlines_when_reading_the_runtime_limit_then_job_and_pytorchjob_have_one() -> None:
    assert job_declared_runtime("Job", {"spec": {"activeDeadlineSeconds": 3600}}) == 3600
    assert job_declared_runtime("PyTorchJob", {"spec": {"runPolicy": {"activeDeadlineSeconds": 600}}}) == 600
    assert job_declared_runtime("JobSet", {"spec": {"activeDeadlineSeconds": 600}}) is None
    assert job_declared_runtime("Job", {"spec": {"activeDeadlineSeconds": 0}}) is None


def test_given_a_suspended_job_when_discovered_then_it_already_has_its_gpus_and_limit(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given: a Job Kueue keeps suspended (no pods), 2 x 8 GPUs, a one-day deadline
    fake_k8s.add("batch/v1", "jobs", {
        "kind": "Job", "metadata": metadata("queued", labels=OSPREY_LABELS),
        "spec": {"suspend": True, "parallelism": 2, "activeDeadlineSeconds": 86400, "template": _template("8")},
        "status": {},
    })  # fmt: skip

    # When
    [observed] = discover(k8s_client, "gpu").observations

    # Then: what the registry will store
    record = observed.to_observation()
    assert (record.requested_gpus, record.declared_runtime_s) == (16, 86400)


def test_given_running_pods_when_discovered_then_their_gpus_come_from_the_template_never_their_spec(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given: a running Job whose template asks 4 GPUs per pod, and its two pods (whose spec holds an env value)
    job = add_job(fake_k8s, "train", status={"active": 2, "ready": 2, "startTime": "2026-01-01T00:02:00Z"})
    stored = fake_k8s.objects[("batch/v1", "jobs")][("ml", "train")]
    stored["spec"]["template"] = {
        "spec": {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    }
    for index in range(2):
        fake_k8s.add("v1", "pods", {"kind": "Pod", "metadata": {
            "name": f"train-{index}", "namespace": "ml",
            "labels": {**OSPREY_LABELS, "batch.kubernetes.io/job-name": "train"}},
            "spec": {"nodeName": "", "containers": [{"name": "t", "env": [{"name": "HF_TOKEN", "value": "hf_secret"}],
                     "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}})  # fmt: skip
    assert job["metadata"]["uid"] == "uid-train"

    # When
    [observed] = discover(k8s_client, "gpu").observations

    # Then: each pod counts its template's 4 GPUs, and pods were read as a metadata-only Table (no spec, so no
    # environment value ever reached Osprey)
    assert observed.requested_gpus == 8
    assert [node.gpus for node in observed.nodes] == [4, 4]
    pod_lists = [accept for path, accept in fake_k8s.accepts if path.endswith("/pods")]
    assert pod_lists
    assert all("as=Table" in accept for accept in pod_lists)
    assert "hf_secret" not in json.dumps(observed.to_dict())
