"""Which Kueue Workload the EKS applier may write for an opted-in job: the one that job owns (issue 28).

A Workload's ``spec.priority`` orders it in its ClusterQueue, so writing the wrong one moves a job that never
opted in. Kueue creates one Workload per job and makes the job its *controller* owner (``ownerReferences`` with
``controller: true``, the job's ``uid``); for a Job it also labels the Workload ``kueue.x-k8s.io/job-uid``. A
Workload is the job's only when

- its controller owner reference names the job: same ``uid``, ``kind`` and ``name`` (a reference to the job that
  is not the controller, e.g. one of several owners of a pod group's Workload, does not count: another object
  controls it), and
- its ``kueue.x-k8s.io/job-uid`` label, when present, is the job's uid.

A name that merely matches (a Workload of a deleted and re-created object, of a non-opted-in object of the same
name) never does. The check is made on the listing and again on every re-read after a 409, since a Workload can
change owners between the read and the write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["JOB_UID_LABEL", "is_owned_by", "owned_workloads"]

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def is_owned_by(workload: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``job`` (a Job, JobSet, PyTorchJob... as read) is ``workload``'s controller (module docstring)."""
    job_meta = _metadata(job)
    uid = job_meta.get("uid")
    if not isinstance(uid, str) or not uid:
        return False  # an object without a uid cannot be told apart from another of its name
    meta = _metadata(workload)
    labels = meta.get("labels")
    if isinstance(labels, Mapping) and JOB_UID_LABEL in labels and labels[JOB_UID_LABEL] != uid:
        return False
    controllers = [
        owner
        for owner in meta.get("ownerReferences") or ()
        if isinstance(owner, Mapping) and owner.get("controller") is True
    ]
    if len(controllers) != 1:
        return False  # Kubernetes allows one controller; none (or a malformed list) is no one's
    [owner] = controllers
    return (
        owner.get("uid") == uid
        and owner.get("kind") == job.get("kind")
        and owner.get("name") == job_meta.get("name")
    )


def owned_workloads(
    workloads: Iterable[Mapping[str, Any]], job: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The Workloads of ``workloads`` that ``job`` owns (normally one)."""
    return [workload for workload in workloads if is_owned_by(workload, job)]
