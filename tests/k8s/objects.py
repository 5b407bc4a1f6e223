"""Builders for the objects the tests create on the real API server: Jobs, hand-made Workloads and Kueue's
queues. Kueue's API is ``kueue.x-k8s.io/v1beta2`` (the version Osprey prefers, ``resources.KUEUE_VERSIONS``)."""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from osprey_control.backends import PriorityChange
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from tests.k8s.cluster import LocalKubernetes

__all__ = [
    "KUEUE",
    "OPT_IN",
    "POD_JOB_LABEL",
    "POLICY",
    "change",
    "cluster_queue",
    "job",
    "jobset",
    "local_queue",
    "owned_workload",
    "pod",
    "pod_template",
    "pytorchjob",
    "queues",
    "ready",
    "resource_flavor",
    "workload_of",
]

KUEUE = "kueue.x-k8s.io/v1beta2"
OPT_IN = {"osprey.aws/enabled": "true"}
POLICY = {"osprey.aws/policy": "training-policy"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
DOC = Path(__file__).resolve().parents[2] / "docs" / "eks.md"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def _kueue_path(plural: str, namespace: str | None = None) -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{KUEUE}{scope}/{plural}"


def pod_template(cpu: str) -> dict[str, Any]:
    """A one-container pod template requesting ``cpu`` (the quota the tests' ClusterQueues count)."""
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "train:latest", "resources": {"requests": {"cpu": cpu}}}
            ],
        }
    }


def job(k8s: LocalKubernetes, namespace: str, name: str, *, queue: str | None = None, cpu: str = "1",
        labels: dict[str, str] | None = None, parallelism: int = 1) -> dict[str, Any]:  # fmt: skip
    """A suspended batch/v1 Job opted in to Osprey; ``queue``: Kueue's LocalQueue (then Kueue manages it)."""
    all_labels = {**OPT_IN, **POLICY, **(labels or {})}
    if queue:
        all_labels[QUEUE_LABEL] = queue
    return k8s.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"suspend": True, "parallelism": parallelism, "completions": parallelism,
                 "template": pod_template(cpu)},
    })  # fmt: skip


def pytorchjob(k8s: LocalKubernetes, namespace: str, name: str, *, queue: str, workers: int = 1,
               cpu: str = "1") -> dict[str, Any]:  # fmt: skip
    """A suspended ``kubeflow.org/v1`` PyTorchJob opted in to Osprey: one Master and ``workers`` Workers, managed by
    Kueue through ``queue`` (Kueue's PyTorchJob integration makes its Workload; no training operator runs)."""
    labels = {**OPT_IN, **POLICY, QUEUE_LABEL: queue}

    def replica(count: int) -> dict[str, Any]:
        template = pod_template(cpu)
        template["spec"]["containers"][0]["name"] = "pytorch"  # the container the operator looks for
        template["spec"].pop("restartPolicy")
        return {"replicas": count, "restartPolicy": "OnFailure", "template": template}

    return k8s.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {"runPolicy": {"suspend": True},
                 "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    })  # fmt: skip


def jobset(k8s: LocalKubernetes, namespace: str, name: str, *, queue: str, replicas: int = 2,
           cpu: str = "1") -> dict[str, Any]:  # fmt: skip
    """A suspended ``jobset.x-k8s.io/v1alpha2`` JobSet opted in to Osprey: one replicated Job of ``replicas``
    single-pod Jobs, managed by Kueue through ``queue`` (no JobSet controller runs)."""
    labels = {**OPT_IN, **POLICY, QUEUE_LABEL: queue}
    return k8s.create(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {"suspend": True, "replicatedJobs": [{
            "name": "workers", "replicas": replicas,
            "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                                  "template": pod_template(cpu)}},
        }]},
    })  # fmt: skip


# The label each operator puts on its pods, which gang readiness and discovery select on.
POD_JOB_LABEL = {
    "Job": "batch.kubernetes.io/job-name",
    "PyTorchJob": "training.kubeflow.org/job-name",
    "JobSet": "jobset.sigs.k8s.io/jobset-name",
}


def pod(k8s: LocalKubernetes, owner: dict[str, Any], index: int) -> str:
    """A pod of ``owner`` as its operator would label it (no operator or kubelet runs here); its name."""
    meta = owner["metadata"]
    name = f"{meta['name']}-{index}"
    k8s.create(f"/api/v1/namespaces/{meta['namespace']}/pods", {
        "metadata": {"name": name, "labels": {**OPT_IN, POD_JOB_LABEL[owner["kind"]]: meta["name"]}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "train:latest"}]},
    })  # fmt: skip
    return name


def ready(k8s: LocalKubernetes, namespace: str, pod_name: str) -> None:
    """What a kubelet would report: the pod running and Ready."""
    k8s.client().request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod_name}/status",
        body={"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json",
    )


def workload_of(k8s: LocalKubernetes, owner: dict[str, Any]) -> dict[str, Any]:
    """The Workload the real Kueue made for ``owner`` (its controller owner reference), waited for."""
    meta = owner["metadata"]
    collection = _kueue_path("workloads", meta["namespace"])
    admin = k8s.client()

    def find() -> dict[str, Any] | None:
        for item in admin.list(collection):
            for ref in item["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == meta["uid"] and ref.get("controller"):
                    return item
        return None

    found: dict[str, Any] = eventually(
        find, f"Kueue to create the Workload of {owner['kind']} {meta['name']}"
    )
    return found


def queues(k8s: LocalKubernetes, namespace: str, *, cpu: int) -> str:
    """A ResourceFlavor, ClusterQueue (``cpu`` CPUs) and the LocalQueue ``team-a`` of ``namespace``: the
    namespace's own, so tests never share quota; the LocalQueue's name."""
    flavor, cluster = f"flavor-{namespace}", f"cq-{namespace}"
    resource_flavor(k8s, flavor)
    cluster_queue(k8s, cluster, cpu=cpu, flavor=flavor)
    local_queue(k8s, namespace, "team-a", cluster)
    return "team-a"


def owned_workload(k8s: LocalKubernetes, owner: dict[str, Any], *, priority: int, queue: str = "nowhere",
                   opted_in: bool = True) -> dict[str, Any]:  # fmt: skip
    """A Workload controlled by ``owner`` (as Kueue makes them), written by the test itself."""
    meta = owner["metadata"]
    return k8s.create(_kueue_path("workloads", meta["namespace"]), {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": f"job-{meta['name']}-test",
            "labels": dict(OPT_IN) if opted_in else {},
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                 "name": meta["name"], "uid": meta["uid"], "controller": True}],
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": pod_template("1")}],
        },
    })  # fmt: skip


def resource_flavor(k8s: LocalKubernetes, name: str = "default") -> dict[str, Any]:
    return k8s.create(_kueue_path("resourceflavors"), {"apiVersion": KUEUE, "kind": "ResourceFlavor",
                                                        "metadata": {"name": name}})  # fmt: skip


def cluster_queue(k8s: LocalKubernetes, name: str, *, cpu: int, flavor: str = "default") -> dict[str, Any]:
    """BestEffortFIFO with preemption of lower priorities within the queue: the setup docs/eks.md asks for."""
    return k8s.create(_kueue_path("clusterqueues"), {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}],
            }],
        },
    })  # fmt: skip


def local_queue(k8s: LocalKubernetes, namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    return k8s.create(_kueue_path("localqueues", namespace), {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue_name},
    })  # fmt: skip


def change(job: dict[str, Any], priority: int) -> PriorityChange:
    """The cycle's decision to give ``job`` Osprey priority ``priority``, keyed as discovery keys it."""
    meta = job["metadata"]
    record = JobRecord(
        backend=Backend.EKS,
        native_id=f"local/{meta['namespace']}/{meta['name']}/{meta['uid']}",
        name=meta["name"],
        block=parse_block({"priority_derivation_profile": "training-policy"}),
        status=JobStatus.PENDING,
        status_time=NOW,
        cluster="local",
    )
    return PriorityChange(record, priority)


def namespace(k8s: LocalKubernetes, prefix: str = "team") -> str:
    """A new namespace of the test's own (with its ``default`` ServiceAccount), so tests never meet."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    k8s.apply_namespace(name)
    return name


def documented_rbac() -> list[dict[str, Any]]:
    """docs/eks.md's RBAC: the YAML block after **Roles.**, as a cluster admin would copy it."""
    text = DOC.read_text()
    section = text[text.index("**Roles.**") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    return [d for d in yaml.safe_load_all(section[start : section.index("```", start)]) if d]


def bind(k8s: LocalKubernetes, rolebindings: list[dict[str, Any]], namespace: str) -> None:
    """The documented RoleBindings (``team-a`` in the page) made in ``namespace``."""
    for template in rolebindings:
        binding = copy.deepcopy(template)
        binding["metadata"]["namespace"] = namespace
        k8s.create(f"{RBAC}/namespaces/{namespace}/rolebindings", binding)


def eventually(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """``check()``'s first truthy value, polled until ``timeout`` (Kueue acts asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
