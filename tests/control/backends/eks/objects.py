"""Builders for the Kubernetes objects the tests put into the fake API server."""

from __future__ import annotations

from typing import Any

from tests.control.backends.eks.fake_k8s import FakeKubernetes

OSPREY_LABELS = {"osprey.aws/enabled": "true", "osprey.aws/policy": "training-policy"}
KUEUE = "kueue.x-k8s.io/v1beta1"


def metadata(name: str, namespace: str = "ml", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    meta.update(extra)
    return meta


def add_job(fake: FakeKubernetes, name: str, *, labels: dict[str, str] | None = OSPREY_LABELS,
            status: dict[str, Any] | None = None, suspend: bool = False,
            annotations: dict[str, str] | None = None, namespace: str = "ml") -> dict[str, Any]:  # fmt: skip
    return fake.add("batch/v1", "jobs", {
        "kind": "Job",
        "metadata": metadata(name, namespace, labels, annotations),
        "spec": {"suspend": suspend, "parallelism": 2},
        "status": status or {},
    })  # fmt: skip


def add_pytorchjob(fake: FakeKubernetes, name: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return fake.add("kubeflow.org/v1", "pytorchjobs", {
        "kind": "PyTorchJob",
        "metadata": metadata(name, labels=OSPREY_LABELS, annotations={"osprey.aws/co-schedule": "true"}),
        "spec": {"pytorchReplicaSpecs": {}},
        "status": {"conditions": conditions},
    })  # fmt: skip


def add_jobset(fake: FakeKubernetes, name: str, ready: int, active: int) -> dict[str, Any]:
    return fake.add("jobset.x-k8s.io/v1alpha2", "jobsets", {
        "kind": "JobSet",
        "metadata": metadata(name, labels=OSPREY_LABELS),
        "spec": {"replicatedJobs": []},
        "status": {"replicatedJobsStatus": [{"name": "workers", "ready": ready, "active": active}]},
    })  # fmt: skip


def add_workload(fake: FakeKubernetes, owner: dict[str, Any], *, priority: int | None = 100,
                 admitted: bool = True, version: str = KUEUE) -> dict[str, Any]:  # fmt: skip
    meta = owner["metadata"]
    kind = owner["kind"]
    conditions = [{"type": "Admitted", "status": "True" if admitted else "False",
                   "lastTransitionTime": "2026-01-01T00:01:00Z"}]  # fmt: skip
    spec: dict[str, Any] = {"queueName": "team-a", "podSets": []}
    if priority is not None:
        spec["priority"] = priority
    return fake.add(version, "workloads", {
        "kind": "Workload",
        "metadata": {
            "name": f"{kind.lower()}-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            # Kueue's integrations.labelKeysToCopy: ["osprey.aws/enabled"] (docs/eks.md) copies the opt-in label.
            "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k == "osprey.aws/enabled"},
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": kind, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True}],
        },
        "spec": spec,
        "status": {"conditions": conditions},
    })  # fmt: skip


def condition(kind: str, when: str = "2026-01-01T00:05:00Z") -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": when}
