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
    "change",
    "cluster_queue",
    "job",
    "local_queue",
    "owned_workload",
    "resource_flavor",
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


def _pod_template(cpu: str) -> dict[str, Any]:
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
                 "template": _pod_template(cpu)},
    })  # fmt: skip


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
            "podSets": [{"name": "main", "count": 1, "template": _pod_template("1")}],
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
