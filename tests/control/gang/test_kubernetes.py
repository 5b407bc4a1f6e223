"""EKS gangs against a real-HTTP fake API server: pods Ready, requeue through Kueue's Workload ``active`` or the
job's ``suspend``, stop only for opted-in jobs, and Kueue's gang annotation."""

from __future__ import annotations

from typing import Any

import pytest

from osprey_control.backends.eks.client import KubernetesClient
from osprey_control.backends.eks.gang import KubernetesGang, requested_workers
from osprey_control.gang import NotOptedInError, Readiness
from tests.control.backends.eks.fake_k8s import FakeKubernetes


def _job(parallelism: int, *, enabled: bool = True, conditions: list[Any] | None = None) -> dict[str, Any]:
    labels = {"osprey.aws/enabled": "true"} if enabled else {}
    return {
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "labels": labels},
        "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": False},
        "status": {"conditions": conditions or []},
    }


def _pod(index: int, *, ready: bool, job: str = "train") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}",
            "namespace": "ml",
            "labels": {"batch.kubernetes.io/job-name": job},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_readiness_counts_ready_pods_of_this_job_only(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.add("batch/v1", "jobs", _job(4))
    for index, ready in enumerate([True, True, True, False]):
        fake_k8s.add("v1", "pods", _pod(index, ready=ready))
    fake_k8s.add("v1", "pods", _pod(9, ready=True, job="other"))
    gang = KubernetesGang(k8s_client, "Job", "ml", "train")
    assert gang.readiness() == Readiness(3, 4, detail="3/4 pods Ready")


def test_a_completed_or_deleted_job_is_finished(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.add("batch/v1", "jobs", _job(2, conditions=[{"type": "Failed", "status": "True"}]))
    assert KubernetesGang(k8s_client, "Job", "ml", "train").readiness().finished
    assert KubernetesGang(k8s_client, "Job", "ml", "missing").readiness().finished


def test_requeue_without_kueue_toggles_the_jobs_suspend(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.add("batch/v1", "jobs", _job(2))
    gang = KubernetesGang(k8s_client, "Job", "ml", "train")
    gang.suspend()
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["spec"]["suspend"] is True
    gang.resume()
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["spec"]["suspend"] is False


def test_requeue_with_kueue_deactivates_and_reactivates_the_owned_workload(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.add("batch/v1", "jobs", _job(2))
    workload = {
        "kind": "Workload",
        "metadata": {
            "name": "job-train-abc12",
            "namespace": "ml",
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": "uid-train", "controller": True}],
        },
        "spec": {"active": True, "priority": 50},
    }
    fake_k8s.add("kueue.x-k8s.io/v1beta1", "workloads", workload)
    gang = KubernetesGang(k8s_client, "Job", "ml", "train", kueue="v1beta1")
    gang.suspend()
    assert (
        fake_k8s.stored("kueue.x-k8s.io/v1beta1", "workloads", "ml", "job-train-abc12")["spec"]["active"]
        is False
    )
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["spec"]["suspend"] is False  # Kueue owns it
    gang.resume()
    assert (
        fake_k8s.stored("kueue.x-k8s.io/v1beta1", "workloads", "ml", "job-train-abc12")["spec"]["active"]
        is True
    )


def test_stop_suspends_an_opted_in_job_and_refuses_any_other(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    fake_k8s.add("batch/v1", "jobs", _job(2))
    KubernetesGang(k8s_client, "Job", "ml", "train").stop()
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["spec"]["suspend"] is True
    other = _job(2, enabled=False)
    other["metadata"]["name"] = "theirs"
    fake_k8s.add("batch/v1", "jobs", other)
    with pytest.raises(NotOptedInError):
        KubernetesGang(k8s_client, "Job", "ml", "theirs").stop()
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "theirs")["spec"]["suspend"] is False


@pytest.mark.parametrize(
    ("obj", "kind", "expected"),
    [
        ({"spec": {"parallelism": 8}}, "Job", 8),
        (
            {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 7}}}},
            "PyTorchJob",
            8,
        ),
        (
            {"spec": {"replicatedJobs": [{"replicas": 2, "template": {"spec": {"parallelism": 4}}}]}},
            "JobSet",
            8,
        ),
    ],
)
def test_requested_workers_per_kind(obj: dict[str, Any], kind: str, expected: int) -> None:
    assert requested_workers(obj, kind) == expected


def test_requeue_touches_only_the_workload_the_opted_in_job_controls(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    # Given an opted-in Job "train", and a Workload of the same-named JobSet that did not opt in (its owner
    # reference names "train" too)
    fake_k8s.add("batch/v1", "jobs", _job(2))
    theirs = {"kind": "JobSet", "name": "train", "uid": "uid-jobset-train", "controller": True}
    fake_k8s.add("kueue.x-k8s.io/v1beta1", "workloads", {
        "kind": "Workload",
        "metadata": {"name": "jobset-train-x1", "namespace": "ml", "ownerReferences": [theirs]},
        "spec": {"active": True, "priority": 50},
    })  # fmt: skip
    # When the gang watch requeues the opted-in Job
    KubernetesGang(k8s_client, "Job", "ml", "train", kueue="v1beta1").suspend()
    # Then the JobSet's Workload stays active; the Job (no Workload of its own) is suspended itself
    stored = fake_k8s.stored("kueue.x-k8s.io/v1beta1", "workloads", "ml", "jobset-train-x1")
    assert stored["spec"]["active"] is True
    assert fake_k8s.stored("batch/v1", "jobs", "ml", "train")["spec"]["suspend"] is True


def test_requeue_and_resume_refuse_a_job_that_is_not_opted_in(
    fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    other = _job(2, enabled=False)
    other["metadata"]["name"] = "theirs"
    fake_k8s.add("batch/v1", "jobs", other)
    for act in (KubernetesGang(k8s_client, "Job", "ml", "theirs").suspend,
                KubernetesGang(k8s_client, "Job", "ml", "theirs").resume):  # fmt: skip
        with pytest.raises(NotOptedInError):
            act()
    assert fake_k8s.writes() == []
