"""What a Kubernetes job asks for: its GPUs and its runtime limit, from the job object (docs/eks.md).

Pure Python. Read from the job's pod *templates*, not from its pods, so a job that Kueue keeps suspended (no
pods yet) still has ``requested_gpus``, which is what lets a policy order queued jobs:

============  ======================================================  ====================================
kind          GPUs (``nvidia.com/gpu`` limits, else requests)         runtime limit
============  ======================================================  ====================================
Job           ``parallelism`` (default 1; at most ``completions``)    ``spec.activeDeadlineSeconds``
              x the template's containers
PyTorchJob    per replica type: ``replicas`` (default 1) x its        ``spec.runPolicy.activeDeadlineSeconds``
              template's containers, summed
JobSet        per replicated job: ``replicas`` x its Job template's   none (a JobSet has no deadline of its
              parallelism x containers, summed                        own)
============  ======================================================  ====================================

Init containers are not counted: they run before the main containers and their GPUs are released. A template
without GPUs gives None (unknown) so that the pods' own requests are used instead, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osprey_control.backends.declared import kubernetes_container_gpus

__all__: list[str] = []


def _count(value: Any, default: int = 1) -> int:
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _pod_template_gpus(template: Any) -> int:
    spec = template.get("spec") if isinstance(template, Mapping) else None
    return kubernetes_container_gpus(spec.get("containers")) if isinstance(spec, Mapping) else 0


def _job_spec_gpus(spec: Any) -> int:
    if not isinstance(spec, Mapping):
        return 0
    parallel = _count(spec.get("parallelism"))
    if spec.get("completions") is not None:
        parallel = min(parallel, _count(spec.get("completions")))
    return parallel * _pod_template_gpus(spec.get("template"))


def job_requested_gpus(kind: str, obj: Mapping[str, Any]) -> int | None:
    """GPUs the job's templates ask for, over all its pods (the table in the module docstring)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if kind == "PyTorchJob":
        replicas = spec.get("pytorchReplicaSpecs")
        total = sum(
            _count(replica.get("replicas")) * _pod_template_gpus(replica.get("template"))
            for replica in (replicas.values() if isinstance(replicas, Mapping) else ())
            if isinstance(replica, Mapping)
        )
    elif kind == "JobSet":
        total = sum(
            _count(replicated.get("replicas"))
            * _job_spec_gpus((replicated.get("template") or {}).get("spec"))
            for replicated in spec.get("replicatedJobs") or []
            if isinstance(replicated, Mapping)
        )
    else:
        total = _job_spec_gpus(spec)
    return total or None


def job_declared_runtime(kind: str, obj: Mapping[str, Any]) -> int | None:
    """The job's ``activeDeadlineSeconds`` (Job, PyTorchJob ``runPolicy``), None when it has none."""
    spec = obj.get("spec")
    if kind == "JobSet" or not isinstance(spec, Mapping):
        return None
    holder = spec.get("runPolicy") if kind == "PyTorchJob" else spec
    value = holder.get("activeDeadlineSeconds") if isinstance(holder, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"  # PyTorchJob pods: master, worker (lower case)
_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"  # JobSet pods: their replicated job


def pod_template_gpus(kind: str, obj: Mapping[str, Any], pod_labels: Mapping[str, Any]) -> int | None:
    """GPUs one pod of the job asks for, from the template it was made from (None: none, or not known).

    Discovery reads pods as metadata only (never their spec, which holds environment values): the pod's
    labels name its template (PyTorchJob replica type, JobSet replicated job), and the template its GPUs.
    """
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    template: Any = None
    if kind == "PyTorchJob":
        wanted = str(pod_labels.get(_REPLICA_TYPE_LABEL) or "").lower()
        replicas = spec.get("pytorchReplicaSpecs")
        for replica_type, replica in replicas.items() if isinstance(replicas, Mapping) else ():
            if str(replica_type).lower() == wanted and isinstance(replica, Mapping):
                template = replica.get("template")
    elif kind == "JobSet":
        wanted = str(pod_labels.get(_REPLICATED_JOB_LABEL) or "")
        for replicated in spec.get("replicatedJobs") or []:
            if isinstance(replicated, Mapping) and replicated.get("name") == wanted:
                template = ((replicated.get("template") or {}).get("spec") or {}).get("template")
    else:
        template = spec.get("template")
    return _pod_template_gpus(template) or None
