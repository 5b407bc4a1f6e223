"""Gangs on EKS: pods Ready, and suspend/resume/stop through the job's own ``suspend`` (or the Kueue Workload's
``active``). The block's translation to Kueue's own gang settings happens at submission, in
``osprey.eks.annotate`` (``kueue.x-k8s.io/job-min-parallelism`` on a batch/v1 Job).

Kueue, as documented upstream: ``kueue.x-k8s.io/job-min-parallelism`` (batch/v1 Job
only, PartialAdmission, beta and on by default since v0.5) lets Kueue admit a Job with fewer pods, never
fewer than the annotation; ``waitForPodsReady`` (timeout, requeuing back-off) is a *cluster-wide* setting of
the Kueue Configuration with no per-workload override, so Osprey's watch enforces the per-job timeout itself
and requeues through ``Workload.spec.active`` (v1beta1 and v1beta2), which Kueue treats as an eviction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.backends.eks.client import KubernetesClient, NotFoundError
from osprey_control.backends.eks.ownership import owned_workloads
from osprey_control.backends.eks.resources import (
    BATCH_JOB,
    JOBSET,
    POD,
    PYTORCHJOB,
    Resource,
    is_enabled,
    kind_for,
)
from osprey_control.gang import NotOptedInError, Readiness

__all__ = ["KubernetesGang"]

_POD_SELECTORS: dict[str, str] = {
    BATCH_JOB.kind: "batch.kubernetes.io/job-name",
    PYTORCHJOB.kind: "training.kubeflow.org/job-name",
    JOBSET.kind: "jobset.sigs.k8s.io/jobset-name",
}
_FINISHED_CONDITIONS = frozenset({"Complete", "Completed", "Succeeded", "Failed"})


def requested_workers(obj: Mapping[str, Any], kind: str) -> int:
    """Pods the job asks for: Job ``parallelism``, PyTorchJob replicas, JobSet replicas * parallelism."""
    spec = obj.get("spec") or {}
    if kind == PYTORCHJOB.kind:
        replicas = (spec.get("pytorchReplicaSpecs") or {}).values()
        return sum(int(replica.get("replicas", 1)) for replica in replicas)
    if kind == JOBSET.kind:
        total = 0
        for replicated in spec.get("replicatedJobs") or []:
            job_spec = (replicated.get("template") or {}).get("spec") or {}
            total += int(replicated.get("replicas", 1)) * int(job_spec.get("parallelism", 1))
        return total
    return int(spec.get("parallelism", 1))


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _finished(obj: Mapping[str, Any]) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") in _FINISHED_CONDITIONS and condition.get("status") == "True":
            return str(condition.get("type"))
    return None


class KubernetesGang:
    """One Kubernetes job (``namespace/name`` of ``kind``) on one cluster."""

    supports_requeue = True

    def __init__(
        self, client: KubernetesClient, kind: str, namespace: str, name: str, *, kueue: str | None = None
    ) -> None:
        self._client = client
        self._resource: Resource = kind_for(kind)
        self._namespace, self._name = namespace, name
        self._kueue = kueue  # Kueue API version served by the cluster, or None

    def readiness(self) -> Readiness:
        try:
            obj = self._client.get(self._resource.item(self._namespace, self._name))
        except NotFoundError:
            return Readiness(0, 0, finished=True, detail="job deleted")
        requested = requested_workers(obj, self._resource.kind)
        ended = _finished(obj)
        if ended:
            return Readiness(0, requested, finished=True, detail=f"job {ended}")
        selector = f"{_POD_SELECTORS[self._resource.kind]}={self._name}"
        pods = self._client.list(POD.collection(self._namespace), label_selector=selector)
        ready = sum(1 for pod in pods if _is_ready(pod))
        return Readiness(ready, requested, detail=f"{ready}/{requested} pods Ready")

    def suspend(self) -> None:
        self._set_running(active=False)

    def resume(self) -> None:
        self._set_running(active=True)

    def stop(self) -> None:
        """Suspended for good: non-destructive (the job and its logs stay), and it frees every GPU."""
        self._set_running(active=False)

    def _set_running(self, *, active: bool) -> None:
        # Only an opted-in job, and only the Workload it controls (issue 28): a Workload is matched by its
        # controller owner reference (uid, kind, name), never by a name that a non-opted-in object may share.
        obj = self._client.get(self._resource.item(self._namespace, self._name))
        if not is_enabled(obj):
            raise NotOptedInError(
                f"{self._resource.kind} {self._namespace}/{self._name} is not labelled opt-in"
            )
        if self._kueue is not None:
            collection = f"/apis/kueue.x-k8s.io/{self._kueue}/namespaces/{self._namespace}/workloads"
            for workload in owned_workloads(self._client.list(collection), obj)[:1]:
                self._client.merge_patch(
                    f"{collection}/{workload['metadata']['name']}", {"spec": {"active": active}}
                )
                return
        # No Kueue (or no Workload yet): the job's own suspend field.
        patch: dict[str, Any] = {"spec": {"suspend": not active}}
        if self._resource.kind == PYTORCHJOB.kind:
            patch = {"spec": {"runPolicy": {"suspend": not active}}}
        self._client.merge_patch(self._resource.item(self._namespace, self._name), patch)
