"""What one EKS discovery pass reports: per job an :class:`EksObservation` (merged into the registry as a
:class:`~osprey_control.registry.observation.JobObservation`), plus the problems and missing CRDs per cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from osprey_control.contract import OspreyBlock
from osprey_control.registry import Backend, EksJobId, JobObservation, JobRecord, JobStatus, NodeRef

__all__ = ["DiscoveryResult", "EksDiscoveryProblem", "EksObservation", "WorkloadRef"]


@dataclass(frozen=True)
class WorkloadRef:
    """The Kueue Workload that admits a job; ``priority`` is its ``spec.priority``."""

    name: str
    api_version: str
    priority: int | None
    priority_class: str | None
    admitted: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "api_version": self.api_version,
            "priority": self.priority,
            "priority_class": self.priority_class,
            "admitted": self.admitted,
        }


@dataclass(frozen=True)
class EksObservation:
    """What one discovery pass saw of one Osprey job."""

    cluster: str
    namespace: str
    name: str
    kind: str
    api_version: str
    uid: str
    block: OspreyBlock
    status: JobStatus
    status_time: datetime
    submitted_at: datetime | None
    workload: WorkloadRef | None = None
    nodes: tuple[NodeRef, ...] = ()
    derived_priority: int | None = None  # the annotation Osprey wrote last, if any
    kueue_version: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # the job object's labels (its "tags")
    modified_at: datetime | None = None  # the object's last change (newest ``metadata.managedFields`` time)
    requested_gpus: int | None = None  # from the pod templates, else the pods (eks.requests)
    declared_runtime_s: int | None = None  # activeDeadlineSeconds

    @property
    def native_id(self) -> str:
        """``<cluster>/<namespace>/<name>/<uid>`` (osprey_control.registry.identity): a name is not an identity,
        the uid is (another cluster's ``ml/train``, or the same name re-created, is another job)."""
        return str(EksJobId(self.cluster, self.namespace, self.name, self.uid))

    def to_observation(self) -> JobObservation:
        """What the registry merges (``JobRegistry.apply_observation``), like an ingested event.

        Discovery is a poll, so the times come from the object, never from the pass: the event time is the
        object's last change (a relabelled policy is newer and wins; an unchanged object gives an identical
        observation, so a repeated pass writes nothing), and the status is dated by its own transition.
        """
        return JobObservation(
            backend=Backend.EKS,
            native_id=self.native_id,
            name=self.name,
            block=self.block,
            status=self.status,
            event_time=max(self.modified_at or self.status_time, self.status_time),
            status_since=self.status_time,
            submitted_at=self.submitted_at,
            nodes=self.nodes,
            cluster=self.cluster,
            kind=self.kind,
            tags=dict(self.labels),
            requested_gpus=self.requested_gpus,
            declared_runtime_s=self.declared_runtime_s,
            native_priority=self.native_priority,
        )

    def to_record(self) -> JobRecord:
        """A fresh registry record; the registry merges it with what it already holds."""
        return JobRecord(
            backend=Backend.EKS,
            native_id=self.native_id,
            name=self.name,
            block=self.block,
            status=self.status,
            status_time=self.status_time,
            submitted_at=self.submitted_at,
            nodes=self.nodes,
            cluster=self.cluster,
            kind=self.kind,
            tags=dict(self.labels),
            requested_gpus=self.requested_gpus,
            declared_runtime_s=self.declared_runtime_s,
            native_priority=self.native_priority,
        )

    @property
    def native_priority(self) -> int | None:
        """The Workload's ``spec.priority`` as discovery reads it: the job's own (its WorkloadPriorityClass's
        value) until Osprey writes one, which the registry's merge tells apart (it keeps the first value, and
        only while nothing was applied)."""
        return self.workload.priority if self.workload is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": Backend.EKS.value,
            "cluster": self.cluster,
            "native_id": self.native_id,
            "namespace": self.namespace,
            "name": self.name,
            "kind": self.kind,
            "api_version": self.api_version,
            "uid": self.uid,
            "block": self.block.as_kwargs(),
            "status": self.status.value,
            "status_time": self.status_time.isoformat(),
            "submitted_at": self.submitted_at.isoformat() if self.submitted_at else None,
            "workload": self.workload.to_dict() if self.workload else None,
            "nodes": [node.model_dump(exclude_none=True, mode="json") for node in self.nodes],
            "derived_priority": self.derived_priority,
            "kueue_version": self.kueue_version,
            "labels": dict(self.labels),
            "requested_gpus": self.requested_gpus,
            "declared_runtime_s": self.declared_runtime_s,
        }


@dataclass(frozen=True)
class EksDiscoveryProblem:
    """A labelled object Osprey could not manage, and why (shown to the user, never fatal)."""

    cluster: str
    object: str
    message: str
    # The job's native id when it has one: a job whose labels became invalid is still listed (reconciliation
    # does not close it; osprey_control.backends.reconcile), it is only not updated until they are fixed.
    native_id: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {"cluster": self.cluster, "object": self.object, "message": self.message}


@dataclass
class DiscoveryResult:
    cluster: str
    kueue_version: str | None
    observations: list[EksObservation] = field(default_factory=list)
    problems: list[EksDiscoveryProblem] = field(default_factory=list)
    kinds_missing: list[str] = field(default_factory=list)  # CRDs not installed on this cluster

    @property
    def listed(self) -> frozenset[str]:
        """The native ids of every labelled job this (complete) listing named, managed or not."""
        problems = (problem.native_id for problem in self.problems if problem.native_id)
        return frozenset((*(obs.native_id for obs in self.observations), *problems))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "kueue_version": self.kueue_version,
            "observations": [obs.to_dict() for obs in self.observations],
            "problems": [problem.to_dict() for problem in self.problems],
            "kinds_missing": list(self.kinds_missing),
        }
