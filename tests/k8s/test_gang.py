"""Gang readiness and the requeue fallback against the real API server and the real Kueue, as the
osprey-gang-watch identity of docs/eks.md's RBAC."""

from __future__ import annotations

from typing import Any

from osprey_control.backends.eks.gang import KubernetesGang
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE


def _pod(k8s: LocalKubernetes, namespace: str, job: str, index: int) -> str:
    name = f"{job}-{index}"
    k8s.create(f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": name, "labels": {**objects.OPT_IN, "batch.kubernetes.io/job-name": job}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "train:latest"}]},
    })  # fmt: skip
    return name


def _ready(k8s: LocalKubernetes, namespace: str, pod: str) -> None:
    """What a kubelet would report: the pod running and Ready (no kubelet runs here)."""
    k8s.client().request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        body={"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json",
    )


def test_gang_readiness_counts_ready_pods_and_a_requeue_goes_through_kueue(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given a 2-worker Job admitted by the real Kueue in a namespace bound as docs/eks.md says
    namespace = objects.namespace(k8s, "gang")
    objects.bind(k8s, rbac, namespace)
    queue = f"cq-{namespace}"
    objects.resource_flavor(k8s, f"flavor-{namespace}")
    objects.cluster_queue(k8s, queue, cpu=2, flavor=f"flavor-{namespace}")
    objects.local_queue(k8s, namespace, "team-a", queue)
    admin = k8s.client()
    objects.job(k8s, namespace, "train", queue="team-a", parallelism=2)
    job_path = f"/apis/batch/v1/namespaces/{namespace}/jobs/train"
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is False, "Kueue to admit the Job")
    gang = KubernetesGang(k8s.client("osprey-gang-watch"), "Job", namespace, "train", kueue="v1beta2")
    # When one of its two pods is Ready
    first, second = _pod(k8s, namespace, "train", 0), _pod(k8s, namespace, "train", 1)
    _ready(k8s, namespace, first)
    # Then the gang is 1 of 2
    readiness = gang.readiness()
    assert (readiness.ready_workers, readiness.requested_workers, readiness.finished) == (1, 2, False)
    # When the second is Ready too, it is complete
    _ready(k8s, namespace, second)
    assert (gang.readiness().ready_workers, gang.readiness().requested_workers) == (2, 2)
    # When the watch requeues the gang (its fallback after a timeout)
    gang.suspend()
    # Then its Workload is deactivated, Kueue evicts it and suspends the Job again
    [workload] = admin.list(f"/apis/{KUEUE}/namespaces/{namespace}/workloads")
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    assert admin.get(path)["spec"]["active"] is False
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is True, "Kueue to suspend the Job")
    # When the watch resumes it, Kueue admits it again
    gang.resume()
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is False, "Kueue to re-admit the Job")
    assert admin.get(path)["spec"]["active"] is True
